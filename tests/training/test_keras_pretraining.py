"""Pretraining under `model.fit` (`bert_tf.training.keras_pretraining`), on JAX and TensorFlow.

The JAX halves run in a new interpreter (the Keras backend is fixed at import), on two
CPU devices so that `keras.distribution.DataParallel` really splits the batch.
"""

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from bert_tf.checkpoints import export_pretrained, from_pretrained
from bert_tf.config import BertConfig
from bert_tf.models import BertPretrainer
from bert_tf.models.losses import pretraining_losses
from bert_tf.models.pretrainer import example_features
from bert_tf.training import keras_pretraining
from bert_tf.training.callbacks import TrainingBackup
from bert_tf.training.inputs import InputError
from bert_tf.training.optimization import WarmupLinearDecay, create_optimizer
from tests.harness import processes
from tests.harness.data import (
    CORPUS_TOKENS,
    CORPUS_VOCAB_SIZE,
    corpus_config,
    write_config,
    write_corpus,
    write_vocab,
)
from tests.harness.jax_backend import jax_environment, run_on_jax

CONFIG = BertConfig(
    vocab_size=40,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
    hidden_dropout_prob=0.0,  # the same batch and weights must give the same loss on both backends
    attention_probs_dropout_prob=0.0,
)


def pretraining_batch(rng, batch_size=4, seq_length=16, predictions=3) -> dict:
    """Random features with padding, both segments and some masked-LM weights 0."""
    lengths = rng.integers(seq_length // 2, seq_length + 1, size=batch_size)
    input_mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype("int32")
    weights = np.ones((batch_size, predictions), "float32")
    weights[0, -1] = 0.0
    return {
        "input_ids": (rng.integers(5, CONFIG.vocab_size, size=(batch_size, seq_length)) * input_mask).astype(
            "int32"
        ),
        "input_mask": input_mask,
        "segment_ids": ((np.arange(seq_length)[None, :] >= lengths[:, None] // 2) * input_mask).astype(
            "int32"
        ),
        "masked_lm_positions": np.stack(
            [rng.choice(np.arange(1, length), predictions, replace=False) for length in lengths]
        ).astype("int32"),
        "masked_lm_ids": rng.integers(5, CONFIG.vocab_size, size=(batch_size, predictions)).astype("int32"),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, size=(batch_size, 1)).astype("int32"),
    }


PARITY_SCRIPT = """
import json, sys
import numpy as np, jax, keras
from bert_tf.checkpoints import export_pretrained
from bert_tf.config import BertConfig
from bert_tf.models import BertPretrainer
from bert_tf.models.pretrainer import example_features
from bert_tf.models.losses import pretraining_losses
from bert_tf.training import keras_pretraining
from bert_tf.training.inputs import InputError
from bert_tf.training.optimization import WarmupLinearDecay
weights_file, batch_file, grads_file, config_file = sys.argv[1:]
batch = dict(np.load(batch_file))
distribution = keras_pretraining.data_parallel()
with distribution.scope():
    model = keras_pretraining.PretrainingModel(BertPretrainer(BertConfig.from_json_file(config_file)))
    model(example_features(1, 16, 3))
    model.pretrainer.load_weights(weights_file)
    model.compile(optimizer="sgd")
    # What fit and evaluate compute: compute_loss on a batch split over the devices.
    fit_loss = model.test_on_batch(batch, return_dict=True)
pretrainer = model.pretrainer
trainable = [v.value for v in pretrainer.trainable_variables]
non_trainable = [v.value for v in pretrainer.non_trainable_variables]
def loss_fn(trainable):
    outputs, _ = pretrainer.stateless_call(trainable, non_trainable, batch, training=True)
    return pretraining_losses(batch, outputs)["loss"]
loss, grads = jax.jit(jax.value_and_grad(loss_fn))(trainable)
np.savez(grads_file, *[np.asarray(g) for g in grads])
schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
print("REPORT" + json.dumps({
    "loss": float(loss), "fit": {k: float(v) for k, v in fit_loss.items()},
    "devices": len(distribution.device_mesh.devices.flatten()),
    "schedule": [float(schedule(step)) for step in (0, 3, 10, 37, 100, 120)],
    "paths": [v.path for v in pretrainer.trainable_variables]}))
"""


class BackendParityTest(tf.test.TestCase):
    def test_same_batch_and_weights_give_the_same_loss_and_gradients_on_jax(self):
        work = tempfile.mkdtemp()
        keras.utils.set_random_seed(3)
        model = BertPretrainer(CONFIG)
        batch = pretraining_batch(np.random.default_rng(0))
        with tf.GradientTape() as tape:
            values = pretraining_losses(batch, model(batch, training=True))
        grads = tape.gradient(values["loss"], model.trainable_variables)
        model.save_weights(os.path.join(work, "model.weights.h5"))
        np.savez(os.path.join(work, "batch.npz"), **batch)
        CONFIG.to_json_file(os.path.join(work, "config.json"))

        report = run_on_jax(
            PARITY_SCRIPT,
            *(
                os.path.join(work, name)
                for name in ("model.weights.h5", "batch.npz", "grads.npz", "config.json")
            ),
            devices=2,
        )
        self.assertEqual(report["devices"], 2)
        self.assertAllClose(report["loss"], float(values["loss"]), atol=1e-5, rtol=0)
        for name in ("loss", *keras_pretraining.METRIC_NAMES):
            self.assertAllClose(report["fit"][name], float(values[name]), atol=1e-5, rtol=0, msg=name)
        jax_grads = np.load(os.path.join(work, "grads.npz"))
        self.assertLen(jax_grads.files, len(grads))
        for index, (grad, path) in enumerate(zip(grads, report["paths"], strict=True)):
            expected = tf.convert_to_tensor(grad).numpy()  # the embedding's IndexedSlices made dense
            self.assertAllClose(jax_grads[f"arr_{index}"], expected, atol=1e-5, rtol=0, msg=path)
        schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
        expected_rates = [float(schedule(step)) for step in (0, 3, 10, 37, 100, 120)]
        self.assertAllClose(report["schedule"], expected_rates, atol=1e-12, rtol=1e-6)


class PretrainingModelTest(tf.test.TestCase):
    """The same module on TensorFlow, in this process: fit learns; checkpoints round-trip."""

    def build(self, seed):
        keras.utils.set_random_seed(seed)
        config = CONFIG.replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
        model = keras_pretraining.PretrainingModel(BertPretrainer(config))
        model(example_features(1, 16, 3))
        model.compile(optimizer=create_optimizer(3e-3, num_train_steps=40, num_warmup_steps=4))
        model.optimizer.build(model.trainable_variables)
        return model

    def test_fit_learns_a_batch_and_checkpoints_restore_weights_optimizer_and_dropout_state(self):
        model = self.build(seed=1)
        batch = pretraining_batch(np.random.default_rng(1), batch_size=8)
        dataset = tf.data.Dataset.from_tensors(batch).repeat()
        history = model.fit(dataset, steps_per_epoch=10, epochs=3, shuffle=False, verbose=0).history
        self.assertLess(history["loss"][-1], 0.7 * history["loss"][0], history["loss"])
        self.assertGreater(history["masked_lm_accuracy"][-1], history["masked_lm_accuracy"][0])

        model_dir = tempfile.mkdtemp()
        backup_dir = os.path.join(model_dir, keras_pretraining.BACKUP_DIR)
        saver = TrainingBackup(backup_dir)
        saver.set_model(model)
        for step in (10, 20, 40):
            saver.save(step)
        # The shared format of every model.fit run: the newest complete backup only.
        self.assertEqual(os.listdir(backup_dir), ["step-40"])
        self.assertEqual(
            keras_pretraining.latest_backup(model_dir), (os.path.join(backup_dir, "step-40"), 40)
        )

        restored = self.build(seed=2)  # other initial weights and dropout seeds
        self.assertEqual(TrainingBackup(backup_dir).restore(restored), 40)
        for name, variables in (
            ("weights", lambda m: m.weights),
            ("optimizer", lambda m: m.optimizer.variables),
            ("dropout seeds", lambda m: [v for v in m.variables if v.path.endswith("seed_generator_state")]),
        ):
            expected, actual = variables(model), variables(restored)
            self.assertNotEmpty(expected)
            self.assertLen(actual, len(expected))
            for want, got in zip(expected, actual, strict=True):
                self.assertAllEqual(
                    keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want), msg=name
                )
        self.assertEqual(TrainingBackup(tempfile.mkdtemp()).restore(restored), 0)

        # --init_checkpoint: an export is loaded, a run's model_dir is refused with the way out.
        with self.assertRaisesRegex(InputError, "pass its export"):
            keras_pretraining.load_init_checkpoint(restored.pretrainer, model_dir)
        export_dir = export_pretrained(model.pretrainer, os.path.join(model_dir, "export"))
        fresh = self.build(seed=3)
        keras_pretraining.load_init_checkpoint(fresh.pretrainer, export_dir)
        for want, got in zip(model.pretrainer.weights, fresh.pretrainer.weights, strict=True):
            self.assertAllEqual(keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want))


class JaxSettingsTest(tf.test.TestCase):
    def test_packing_and_accumulation_pass_evaluation_during_training_is_refused_with_its_reason(self):
        from bert_tf.training.settings import PretrainingConfig

        model_dir = tempfile.mkdtemp()
        keras_pretraining.check_settings(
            PretrainingConfig(packing=True, gradient_accumulation_steps=2), model_dir
        )
        with self.assertRaisesRegex(InputError, "does not evaluate during training.*reset the pretraining"):
            keras_pretraining.check_settings(PretrainingConfig(eval_every_steps=10), model_dir)


JAX_OUTPUTS_SCRIPT = """
import json, sys
import numpy as np, keras
from bert_tf.checkpoints import export_pretrained
from bert_tf.config import BertConfig
from bert_tf.models import BertPretrainer
from bert_tf.training import keras_pretraining
from bert_tf.training.callbacks import TrainingBackup
model_dir, batch_file, outputs_file = sys.argv[1:]
batch = dict(np.load(batch_file))
model = keras_pretraining.PretrainingModel(BertPretrainer(BertConfig.from_json_file(model_dir + "/bert_config.json")))
model(batch)
model.compile(optimizer=keras.optimizers.AdamW())
model.optimizer.build(model.trainable_variables)
step = TrainingBackup(model_dir + "/" + keras_pretraining.BACKUP_DIR).restore(model)
outputs = model.pretrainer(batch, training=False)
np.savez(outputs_file, **{k: np.asarray(v) for k, v in outputs.items()})
print("REPORT" + json.dumps({"step": step, "backend": keras.backend.backend()}))
"""


def has_backup(model_dir: Path) -> bool:
    return keras_pretraining.latest_backup(str(model_dir)) is not None


@pytest.mark.slow  # three JAX pretraining runs of 200 steps; ~3 min on 2 cores
class JaxPretrainingRunTest(tf.test.TestCase):
    def test_jax_run_learns_resumes_after_kill_9_and_exports_for_tensorflow(self):
        work = Path(tempfile.mkdtemp())
        args = [
            "--backend=jax",
            f"--config={write_config(work / 'config.json', corpus_config())}",
            f"--corpus={write_corpus(work / 'corpus.txt')}",
            f"--vocab_file={write_vocab(work / 'vocab.txt', CORPUS_TOKENS)}",
            "--train_batch_size=8",
            "--max_seq_length=32",
            "--max_predictions_per_seq=5",
            "--num_train_steps=200",
            "--num_warmup_steps=20",
            "--learning_rate=2e-3",
            "--save_checkpoints_steps=50",
            "--steps_per_loop=25",
            "--seed=7",
        ]
        env = jax_environment(devices=2)
        straight = processes.program(
            "bert_tf.pretrain", *args, f"--model_dir={work / 'straight'}", env=env, stderr=subprocess.STDOUT
        )
        crashed = processes.program(
            "bert_tf.pretrain", *args, f"--model_dir={work / 'crashed'}", env=env, stderr=subprocess.STDOUT
        )
        terminated = processes.program(
            "bert_tf.pretrain", *args, f"--model_dir={work / 'terminated'}", env=env, stderr=subprocess.STDOUT
        )
        # kill -9 as soon as the first backup is written, mid-run.
        deadline = time.time() + 600
        while not has_backup(work / "crashed") and crashed.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        crashed.send_signal(signal.SIGKILL)
        crashed.wait()
        self.assertEqual(crashed.returncode, -signal.SIGKILL)
        killed_at, killed_step = keras_pretraining.latest_backup(str(work / "crashed"))
        self.assertLess(killed_step, 200, "the run finished before it was killed")

        # SIGTERM: a checkpoint at the step reached (not only at a save step), exit 143.
        while not has_backup(work / "terminated") and terminated.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        terminated.send_signal(signal.SIGTERM)
        output, _ = terminated.communicate(timeout=300)
        self.assertEqual(terminated.returncode, 143, output[-3000:])
        saved, saved_step = keras_pretraining.latest_backup(str(work / "terminated"))
        self.assertIn(f"stopped on SIGTERM; saved {saved}; rerun to resume", output)
        self.assertBetween(saved_step, 50, 199)

        output, _ = straight.communicate(timeout=900)
        self.assertEqual(straight.returncode, 0, output[-3000:])
        self.assertIn("(Keras jax backend, 2 devices)", output)
        lines = [line for line in output.splitlines() if line.startswith("step ")]
        self.assertLen(lines, 8)  # one line per 25 steps

        def values(name):
            return [float(line.split(f"  {name} ")[1].split()[0]) for line in lines]

        # Measured: loss 4.26 over steps 1-25, 3.06 over steps 176-200.
        self.assertLess(values("loss")[-1], 0.8 * values("loss")[0], values("loss"))
        self.assertGreater(values("masked_lm_accuracy")[-1], values("masked_lm_accuracy")[0] + 0.1)

        resumed = processes.program(
            "bert_tf.pretrain", *args, f"--model_dir={work / 'crashed'}", env=env, stderr=subprocess.STDOUT
        )
        output, _ = resumed.communicate(timeout=900)
        self.assertEqual(resumed.returncode, 0, output[-3000:])
        self.assertIn(f"resumed from {killed_at} at step {killed_step}", output)
        # The resumed run reaches the weights of the uninterrupted one (data, dropout, optimizer).
        expected = load_file(str(work / "straight" / "export" / "model.safetensors"))
        actual = load_file(str(work / "crashed" / "export" / "model.safetensors"))
        self.assertEqual(expected.keys(), actual.keys())
        for name in expected:
            self.assertAllClose(actual[name], expected[name], atol=1e-5, rtol=0, msg=name)

        # The export loads on TensorFlow and computes what the JAX model computes.
        batch = pretraining_batch(np.random.default_rng(5), seq_length=16)
        batch["input_ids"] %= CORPUS_VOCAB_SIZE
        batch["masked_lm_ids"] %= CORPUS_VOCAB_SIZE
        np.savez(work / "batch.npz", **batch)
        report = run_on_jax(
            JAX_OUTPUTS_SCRIPT, str(work / "straight"), str(work / "batch.npz"), str(work / "jax_outputs.npz")
        )
        self.assertEqual((report["step"], report["backend"]), (200, "jax"))
        jax_outputs = np.load(work / "jax_outputs.npz")
        model, _ = from_pretrained(work / "straight" / "export")
        tf_outputs = model(batch, training=False)
        for name in ("mlm_logits", "nsp_logits"):
            self.assertAllClose(tf_outputs[name], jax_outputs[name], atol=1e-5, rtol=0, msg=name)


@pytest.mark.slow  # a TensorFlow and a JAX pretraining run of 24 steps; ~2 min on 2 cores
class JaxLoopParityTest(tf.test.TestCase):
    def test_packed_accumulated_jax_run_follows_the_tensorflow_loss_curve(self):
        """Packing and gradient accumulation under model.fit on JAX against the TensorFlow loop:
        the same batches, the same initial weights, no dropout."""
        work = Path(tempfile.mkdtemp())
        config_file = write_config(work / "config.json", corpus_config(dropout=0.0))
        vocab_file = write_vocab(work / "vocab.txt", CORPUS_TOKENS)
        keras.utils.set_random_seed(11)
        initial = BertPretrainer(BertConfig.from_json_file(config_file))
        initial(example_features(1, 32, 5))
        init_dir = export_pretrained(initial, str(work / "init"), vocab_file=vocab_file)
        args = [
            f"--config={config_file}",
            f"--corpus={write_corpus(work / 'corpus.txt', documents=12)}",
            f"--vocab_file={vocab_file}",
            f"--init_checkpoint={init_dir}",
            "--packing",
            "--gradient_accumulation_steps=2",
            "--train_batch_size=8",
            "--max_seq_length=32",
            "--max_predictions_per_seq=5",
            "--num_train_steps=24",
            "--num_warmup_steps=4",
            "--learning_rate=1e-3",
            "--steps_per_loop=4",
            "--save_checkpoints_steps=100",
            "--seed=3",
        ]
        runs = {
            "tensorflow": processes.program(
                "bert_tf.pretrain", *args, f"--model_dir={work / 'tensorflow'}", stderr=subprocess.STDOUT
            ),
            "jax": processes.program(
                "bert_tf.pretrain",
                *args,
                f"--model_dir={work / 'jax'}",
                env=jax_environment(devices=2),
                stderr=subprocess.STDOUT,
            ),
        }
        losses = {}
        for backend, process in runs.items():
            output, _ = process.communicate(timeout=900)
            self.assertEqual(process.returncode, 0, output[-3000:])
            lines = [line for line in output.splitlines() if line.startswith("step ")]
            losses[backend] = [float(line.split("  loss ")[1].split()[0]) for line in lines]
        self.assertLen(losses["jax"], 6)  # one value per 4 updates
        self.assertLen(losses["tensorflow"], 6)
        # The loops normalize a micro-batch's loss alike only when its masked-LM weights are
        # those of the whole batch (Keras averages the micro-batches, the TensorFlow loop sums
        # their shares of the batch), and packing makes them uneven: close, not equal.
        self.assertAllClose(losses["jax"], losses["tensorflow"], rtol=0.03, atol=0)
        # And the curve moves, so the agreement is not that of two flat lines (measured on JAX:
        # 4.50, 4.40, 4.29, 4.13, 4.14, 4.30; the last loops see other packed rows).
        self.assertLess(min(losses["jax"]), losses["jax"][0] - 0.2, losses["jax"])


if __name__ == "__main__":
    tf.test.main()
