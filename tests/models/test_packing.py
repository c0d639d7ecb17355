"""Packed rows: every instance computed exactly as if it were alone, on TensorFlow and JAX;
a packed batch gives the loss and gradients of the unpacked batch of the same instances."""

import json
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.example_mask import example_attention_bias, example_position_ids
from bert_tf.models import BertEncoder, BertPretrainer
from bert_tf.models.losses import pretraining_losses
from bert_tf.models.pretrainer import example_features
from bert_tf.preprocessing import packing
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.training import pretraining
from tests.harness.packing import (
    CONFIG,
    PREDICTIONS,
    SEQ,
    max_differences,
    models,
    packed_batch,
    padded_batch,
    random_instances,
)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class PackedInputsTest(tf.test.TestCase):
    def test_positions_restart_and_attention_is_block_diagonal(self):
        mask = np.array([[1, 1, 1, 2, 2, 3, 0, 0]])
        self.assertAllEqual(example_position_ids(mask), [[0, 1, 2, 0, 1, 0, 6, 7]])
        allowed = np.asarray(example_attention_bias(mask))[0, 0] == 0
        for query in range(8):
            for key in range(8):
                expected = mask[0, key] > 0 and (mask[0, key] == mask[0, query] or mask[0, query] == 0)
                self.assertEqual(allowed[query, key], expected, (query, key))

    def test_rows_of_one_instance_are_the_original_model(self):
        unpacked, packed = models()
        batch = padded_batch(random_instances(4, seed=5))
        rows = dict(batch, next_sentence_positions=np.zeros((4, 1), "int32"))
        expected = unpacked(batch)
        actual = packed(pretraining.model_inputs(rows))
        self.assertAllClose(actual["mlm_logits"], expected["mlm_logits"], atol=1e-5, rtol=0)
        self.assertAllClose(actual["nsp_logits"][:, 0], expected["nsp_logits"], atol=1e-5, rtol=0)
        # Without next_sentence_positions (e.g. the fill-mask demo) each row is one instance.
        plain = packed(batch)
        self.assertAllClose(plain["mlm_logits"], expected["mlm_logits"], atol=1e-5, rtol=0)
        self.assertAllClose(plain["nsp_logits"][:, 0], expected["nsp_logits"], atol=1e-5, rtol=0)
        self.assertAllClose(
            packed.encoder(batch)["sequence_output"],
            unpacked.encoder(batch)["sequence_output"],
            atol=1e-5,
            rtol=0,
        )


class PackedForwardTest(tf.test.TestCase):
    def test_each_packed_instance_equals_the_instance_alone(self):
        for seed in range(3):
            instances = random_instances(seed=seed)
            rows, places = packed_batch(instances)
            self.assertLess(len(rows["input_ids"]), len(instances))  # several instances share rows
            self.assertGreater(rows["next_sentence_weights"].sum(1).max(), 1)
            differences = max_differences(*models(seed), instances, rows, places)
            for name, difference in differences.items():
                self.assertLessEqual(difference, 1e-5, f"seed {seed} {name}: {differences}")

    def test_loss_and_gradients_equal_the_unpacked_batch(self):
        unpacked, packed = models()
        instances = random_instances(seed=7)
        batch = padded_batch(instances)
        rows, _ = packed_batch(instances)

        def loss_and_gradients(model, features):
            features = {name: tf.constant(value) for name, value in features.items()}
            with tf.GradientTape() as tape:
                losses = pretraining_losses(
                    features, model(pretraining.model_inputs(features), training=True)
                )
            return losses, tape.gradient(losses["loss"], model.trainable_variables)

        expected, expected_gradients = loss_and_gradients(unpacked, batch)
        actual, actual_gradients = loss_and_gradients(packed, rows)
        for name in expected:
            self.assertAllClose(actual[name], expected[name], atol=1e-5, rtol=0, msg=name)
        for variable, want, got in zip(
            unpacked.trainable_variables, expected_gradients, actual_gradients, strict=True
        ):
            self.assertAllClose(
                tf.convert_to_tensor(got), tf.convert_to_tensor(want), atol=1e-5, rtol=0, msg=variable.path
            )
        # The loop's per-replica shares add up to the same loss, and count instances, not rows.
        features = {name: tf.constant(value) for name, value in rows.items()}
        totals = pretraining.masked_lm_totals(features)
        self.assertEqual(float(totals["examples"]), len(instances))
        shares = pretraining.pretraining_loss_share(
            features, packed(pretraining.model_inputs(features)), totals
        )
        self.assertAllClose(shares["loss"], expected["loss"], atol=1e-5, rtol=0)
        real = sum(len(instance["input_ids"]) for instance in instances)
        self.assertEqual(float(shares["real_tokens"]), real)
        self.assertAllClose(shares["fill_rate"], real / rows["input_ids"].size)

    def test_checkpoint_of_either_layout_loads_into_the_other(self):
        unpacked, packed = models()
        path = tf.train.Checkpoint(model=packed).write(os.path.join(tempfile.mkdtemp(), "ckpt"))
        keras.utils.set_random_seed(99)
        fresh = BertPretrainer(CONFIG)
        fresh(example_features(1, SEQ, PREDICTIONS))
        tf.train.Checkpoint(model=fresh).read(path).assert_existing_objects_matched()
        for want, got in zip(unpacked.get_weights(), fresh.get_weights(), strict=True):
            self.assertAllEqual(got, want)

    @pytest.mark.slow  # about a minute of CPU: a JAX interpreter compiling both models
    def test_jax_backend_gives_the_same_equivalences(self):
        # The Keras backend is fixed at import: the JAX half runs in a fresh interpreter on
        # rows and weights made here.
        # Few distinct lengths: JAX compiles every new shape of the instances run alone.
        instances = random_instances(7, seed=11, lengths=(7, 12, 19))
        rows, places = packed_batch(instances)
        unpacked, _ = models(11)
        work = tempfile.mkdtemp()
        np.savez(os.path.join(work, "weights.npz"), *unpacked.get_weights())
        with open(os.path.join(work, "case.json"), "w") as handle:
            json.dump(
                {
                    "instances": [{k: np.asarray(v).tolist() for k, v in i.items()} for i in instances],
                    "rows": {k: v.tolist() for k, v in rows.items()},
                    "places": [[int(x) for x in place] for place in places],
                },
                handle,
            )
        script = """
import json, os, sys
import numpy as np, keras, jax
assert keras.backend.backend() == "jax"
from tests.harness import packing as case
from bert_tf.models.losses import pretraining_losses
from bert_tf.training import pretraining
from tests.harness.packing import (
    CONFIG,
    INSTANCES,
    PREDICTIONS,
    ROW_PREDICTIONS,
    SEQ,
    alone,
    max_differences,
    models,
    numpy_features,
    packed_batch,
    packed_outputs,
    padded_batch,
    random_instances,
)
work = sys.argv[1]
data = json.load(open(os.path.join(work, "case.json")))
instances = [{k: np.asarray(v) if isinstance(v, list) else v for k, v in i.items()} for i in data["instances"]]
rows = {k: np.asarray(v, "float32" if k in ("masked_lm_weights", "next_sentence_weights") else "int32")
        for k, v in data["rows"].items()}
weights = np.load(os.path.join(work, "weights.npz"))
unpacked, packed = case.models()
unpacked.set_weights([weights[f"arr_{i}"] for i in range(len(weights.files))])
packed.set_weights(unpacked.get_weights())
report = {"forward": case.max_differences(unpacked, packed, instances, rows, [tuple(p) for p in data["places"]])}
batch = case.padded_batch(instances)
def loss(model, features):
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    def fn(trainable):
        outputs, _ = model.stateless_call(trainable, non_trainable, pretraining.model_inputs(features), training=True)
        return pretraining_losses(features, outputs)["loss"]
    return jax.jit(jax.value_and_grad(fn))(trainable)
want, want_grads = loss(unpacked, batch)
got, got_grads = loss(packed, rows)
report["loss"] = abs(float(want) - float(got))
report["gradients"] = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(want_grads, got_grads))
print("REPORT" + json.dumps(report))
"""
        env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
        env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        result = subprocess.run(
            [sys.executable, "-c", script, work],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=REPO_ROOT,
        )
        lines = [line for line in result.stdout.splitlines() if line.startswith("REPORT")]
        self.assertTrue(lines, f"JAX subprocess failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        report = json.loads(lines[-1][len("REPORT") :])
        for name, difference in report["forward"].items():
            self.assertLessEqual(difference, 1e-5, f"{name}: {report}")
        self.assertLessEqual(report["loss"], 1e-5, report)
        self.assertLessEqual(report["gradients"], 1e-5, report)


def classification_batch(count, seed):
    """`count` examples `[CLS] A [SEP] (B [SEP])` of random lengths, padded to SEQ (numpy)."""
    rng = np.random.default_rng(seed)
    batch = {name: np.zeros((count, SEQ), "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    for row in range(count):
        length = int(rng.integers(3, SEQ + 1))
        ids = rng.integers(5, CONFIG.vocab_size, length)
        ids[0], ids[-1] = 2, 3
        batch["input_ids"][row, :length] = ids
        batch["input_mask"][row, :length] = 1
        if rng.random() < 0.5 and length > 4:  # a pair: B after A's [SEP]
            split = int(rng.integers(2, length - 1))
            batch["input_ids"][row, split] = 3
            batch["segment_ids"][row, split + 1 : length] = 1
    return batch


class PackedClassifierTest(tf.test.TestCase):
    def test_packed_batch_gives_each_example_its_own_logits_and_gradients(self):
        keras.utils.set_random_seed(4)
        model = BertClassifier(BertEncoder(CONFIG), num_classes=3, dropout_rate=0.0)
        labels = tf.constant(np.random.default_rng(0).integers(0, 3, 24))
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        def loss_and_gradients(inputs):
            with tf.GradientTape() as tape:
                logits = model(inputs, training=True)
                value = loss(labels, logits)
            return logits, value, tape.gradient(value, model.trainable_variables)

        for seed in range(3):
            batch = classification_batch(24, seed)
            rows = packing.pack_sequences(
                {name: tf.constant(value) for name, value in batch.items()}, row_length=SEQ
            )
            self.assertLess(rows["input_ids"].shape[0], 24)  # several examples share rows
            self.assertEqual(rows["input_ids"].shape[1], SEQ)
            expected, expected_loss, expected_gradients = loss_and_gradients(batch)
            actual, actual_loss, actual_gradients = loss_and_gradients(rows)
            self.assertEqual(actual.shape, (24, 3))
            self.assertAllClose(actual, expected, atol=1e-5, rtol=0, msg=f"seed {seed}")
            self.assertAllClose(actual_loss, expected_loss, atol=1e-6, rtol=0)
            for variable, want, got in zip(
                model.trainable_variables, expected_gradients, actual_gradients, strict=True
            ):
                self.assertAllClose(
                    tf.convert_to_tensor(got),
                    tf.convert_to_tensor(want),
                    atol=1e-5,
                    rtol=0,
                    msg=variable.path,
                )
