"""The task models' building blocks in Python: encoders from checkpoints under every head,
the families' losses and metrics, the fine-tuning optimizer."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import export_pretrained
from bert_tf.models import BertEncoder
from bert_tf.tasks.choice.model import BertMultipleChoice
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.recipe import Recipe
from bert_tf.tasks.span.family import SpanFamily
from bert_tf.tasks.span.model import BertSpanLabeler
from bert_tf.tasks.token.family import TokenFamily
from bert_tf.tasks.token.model import BertTokenClassifier
from bert_tf.training.optimization import uses_weight_decay
from tests import harness


def features(batch=2, seq=6, vocab=30, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, size=(batch, seq)).astype("int32")
    ids[:, 0], ids[:, -1] = 2, 0
    return {"input_ids": ids, "input_mask": (ids > 0).astype("int32"), "segment_ids": np.zeros_like(ids)}


class TaskModelsTest(tf.test.TestCase):
    def test_every_head_loads_the_checkpoint_encoder(self):
        config = harness.tiny_config(vocab_size=30)
        source = BertEncoder(config)
        source(features())
        directory = os.path.join(self.get_temp_dir(), "ckpt")
        vocab = os.path.join(self.get_temp_dir(), "vocab.txt")
        with open(vocab, "w") as handle:
            handle.write(
                "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(25)])
            )
        export_pretrained(source, directory, vocab_file=vocab, lower_case=True, formats=("google",))
        expected = source(features())["pooled_output"]
        for model in (
            BertClassifier.from_pretrained(directory, num_classes=3),
            BertTokenClassifier.from_pretrained(directory, num_classes=4),
            BertSpanLabeler.from_pretrained(directory, max_seq_length=16),
        ):
            self.assertAllClose(model.encoder(features())["pooled_output"], expected, atol=1e-5)
        choice = BertMultipleChoice.from_pretrained(directory)
        stacked = {k: np.stack([v, v], axis=1) for k, v in features().items()}  # [b, 2 choices, seq]
        self.assertEqual(choice(stacked).shape, (2, 2))

    def test_token_loss_and_accuracy_ignore_unlabelled_pieces(self):
        logits = np.log(np.array([[[0.7, 0.3], [0.5, 0.5], [0.2, 0.8]]], dtype="float32"))
        labels = np.array([[0, -1, 0]])
        args = TokenFamily.compile_args("token")
        # Mean cross-entropy over the two labelled pieces: -(log 0.7 + log 0.2) / 2.
        self.assertAllClose(float(args["loss"](labels, logits)), -(np.log(0.7) + np.log(0.2)) / 2, rtol=1e-5)
        metric = args["metrics"][0]
        metric.update_state(labels, logits)
        self.assertAllClose(float(metric.result()), 0.5)

    def test_span_loss_is_the_mean_of_start_and_end(self):
        start = np.log(np.array([[0.5, 0.25, 0.25]], dtype="float32"))
        end = np.log(np.array([[0.1, 0.1, 0.8]], dtype="float32"))
        loss = SpanFamily.task_loss(
            "span",
            {"start_logits": np.array([1]), "end_logits": np.array([2])},
            {"start_logits": start, "end_logits": end},
        )
        self.assertAllClose(loss, -(np.log(0.25) + np.log(0.8)) / 2, rtol=1e-5)

    def test_optimizer_schedule_and_weight_decay_exclusions(self):
        optimizer = Recipe(1e-3, warmup_proportion=0.1).optimizer(num_train_steps=100)
        schedule = optimizer._learning_rate  # Keras keeps the schedule object here
        self.assertAllClose(float(schedule(5)), 5e-4)  # half-way through the 10-step warmup
        self.assertAllClose(float(schedule(55)), 4.5e-4)  # linear decay, measured from step 0
        model = BertClassifier(BertEncoder(harness.tiny_config(vocab_size=30)), num_classes=2)
        model(features())
        optimizer.build(model.trainable_variables)
        decayed = {v.path: uses_weight_decay(optimizer, v) for v in model.trainable_variables}
        self.assertFalse(any(d for path, d in decayed.items() if "bias" in path or "norm" in path.lower()))
        self.assertTrue(any(d for path, d in decayed.items() if path.endswith("kernel")))
        with self.assertRaisesRegex(ValueError, "warmup_proportion"):
            Recipe(1e-3, warmup_proportion=1.5)


@pytest.mark.slow
class MirroredFitTest(tf.test.TestCase):
    def test_two_replica_fit_matches_one_device(self):
        # Two logical CPUs must be configured before TensorFlow starts: a fresh process.
        script = textwrap.dedent(
            """
            import numpy as np, tensorflow as tf, keras
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
            from bert_tf.models import BertEncoder
            from bert_tf.tasks.classification.family import ClassificationFamily
            from bert_tf.tasks.classification.model import BertClassifier
            from bert_tf.tasks.recipe import Recipe
            from bert_tf.training import optimization
            from tests.harness import tiny_config
            rng = np.random.default_rng(0)
            ids = rng.integers(5, 30, size=(8, 6)).astype("int32")
            x = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
            y = rng.integers(0, 2, size=(8,))
            def train(strategy, make_optimizer):
                keras.utils.set_random_seed(1)
                with strategy.scope():
                    # No dropout anywhere: replicas draw different dropout masks.
                    config = tiny_config(30, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
                    model = BertClassifier(BertEncoder(config), num_classes=2, dropout_rate=0.0)
                    model.compile(optimizer=make_optimizer(), **ClassificationFamily.compile_args("classification"))
                model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=3, verbose=0)
                return [w.numpy() for w in model.trainable_weights]

            def difference(a, b):
                return max(float(np.abs(u - v).max()) for u, v in zip(a, b))

            mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            ours = lambda: Recipe(1e-2, warmup_proportion=0.0).optimizer(4)
            # The custom loop's setting: gradients arrive summed, so the optimizer must not sum.
            loops = lambda: optimization.create_optimizer(1e-2, 4, 0, presummed_gradients=True)
            one = train(tf.distribute.get_strategy(), ours)
            print("OURS", difference(one, train(mirrored, ours)))
            print("LOOPS", difference(one, train(mirrored, loops)))
            """
        )
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        output = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        )
        values = dict(
            line.split() for line in output.stdout.splitlines() if line.startswith(("OURS", "LOOPS"))
        )
        self.assertLess(float(values["OURS"]), 1e-5)
        # With the loop's setting under model.fit nothing sums the replicas: each steps on
        # half the batch, a real difference. This is why fine-tuning keeps the default.
        self.assertGreater(float(values["LOOPS"]), 1e-3)


if __name__ == "__main__":
    tf.test.main()
