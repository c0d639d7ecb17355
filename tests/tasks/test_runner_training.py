"""The runner's training: evaluation during training, TensorBoard, the best model, bad
settings, and resuming a killed `python -m bert_tf.finetune` to the same weights."""

import dataclasses
import json
import os
import signal
import subprocess
import time
import zipfile
from unittest import mock

import keras
import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import plot
from bert_tf.errors import UsageError
from bert_tf.tasks import streams
from bert_tf.tasks.finetuned import load_finetuned
from bert_tf.tasks.runner import BACKUP_DIR, RESUME_FIELDS, TrainingPlan, is_finished, run
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.training import callbacks
from bert_tf.training.progress import read_metrics, read_scalars
from tests.harness.data import one_word_task_settings, write_one_word_task
from tests.harness.processes import finetune_command


class TrainingRunTest(tf.test.TestCase):
    def test_evaluation_during_training_tensorboard_and_best_model(self):
        root = self.get_temp_dir()
        paths = write_one_word_task(root)
        output_dir = os.path.join(root, "out")
        settings = one_word_task_settings(
            paths,
            output_dir,
            eval_every_steps=4,
            keep_best_model=True,
            learning_rate=1e-3,
            mixed_precision="float32",
        )
        results = run(settings)
        # 24 examples, batch 4, 2 epochs: 12 updates, evaluated at 4, 8 and 12.
        with open(os.path.join(output_dir, "eval_history.jsonl")) as handle:
            history = [json.loads(line) for line in handle]
        self.assertEqual([entry["step"] for entry in history], [4, 8, 12])
        self.assertContainsSubset({"accuracy", "eval_loss"}, set(history[0]))
        # The final model is the best evaluation's: its accuracy is the best of the history.
        self.assertAllClose(results["accuracy"], max(entry["accuracy"] for entry in history))
        scalars = read_scalars(os.path.join(output_dir, "logs", "eval"))
        self.assertEqual([step for step, _ in scalars["accuracy"]], [4, 8, 12])
        self.assertEqual(
            [step for step, _ in read_scalars(os.path.join(output_dir, "logs", "train"))["loss"]], [12]
        )
        # metrics.jsonl: the same reports.
        reports = {(r["split"], r["step"]): r for r in read_metrics(output_dir)}
        self.assertEqual(
            sorted(reports),
            [("baseline", 12), ("eval", 4), ("eval", 8), ("eval", 12), ("run", 0), ("train", 12)],
        )
        self.assertAllClose(reports["baseline", 12]["accuracy"], results["bag_of_words_accuracy"])
        self.assertEqual(reports["run", 0]["program"], "bert_tf.finetune")
        self.assertAllClose(
            [reports["eval", s]["accuracy"] for s in (4, 8, 12)], [h["accuracy"] for h in history]
        )
        # bert_tf.plot draws them: a PNG with a panel each for train loss, learning rate and
        # the eval metrics, not blank.
        png = plot.plot([output_dir])
        image = matplotlib.image.imread(png)
        self.assertEqual(png, os.path.join(output_dir, "metrics.png"))
        self.assertGreater(image.shape[0], 300)
        self.assertGreater(image.shape[1], 900)  # three panels a row
        self.assertGreater(float(image[..., :3].std()), 0.05)
        self.assertFalse(os.path.exists(os.path.join(output_dir, BACKUP_DIR)))  # removed when finished
        self.assertTrue(is_finished(output_dir))
        model = load_finetuned(os.path.join(output_dir, "model"), compile=False)
        self.assertEqual(
            {layer.dtype_policy.name for layer in model.encoder.layers if layer.weights}, {"float32"}
        )

    def test_mixed_precision_trains_and_keeps_float32_logits(self):
        root = self.get_temp_dir()
        paths = write_one_word_task(root)
        output_dir = os.path.join(root, "bf16")
        results = run(
            one_word_task_settings(
                paths, output_dir, mixed_precision="mixed_bfloat16", eval_every_steps=0, num_train_epochs=1.0
            )
        )
        # Evaluated only at the end (24 examples, batch 4: 6 updates): metrics.jsonl has the
        # scores at the last update, beside the training curve.
        final = [r for r in read_metrics(output_dir) if r["split"] == "eval"]
        self.assertEqual([r["step"] for r in final], [6])
        # The baselines are the data's, not the model's: eval_results.json has them beside the
        # model's scores; metrics.jsonl has the bag of words apart ("baseline"), the majority not.
        scores = {k: v for k, v in results.items() if not k.startswith(("majority_baseline", "bag_of_words"))}
        self.assertAllClose({k: final[0][k] for k in scores}, scores)
        # The encoder's layers were built, and so trained, under the run's policy; the saved
        # model computes in the policy of whoever loads it (float32 here: Keras' default).
        with zipfile.ZipFile(os.path.join(output_dir, "model", "model.keras")) as archive:
            self.assertIn('"mixed_bfloat16"', archive.read("config.json").decode())
        model = load_finetuned(os.path.join(output_dir, "model"), compile=False)
        self.assertEqual(
            {layer.dtype_policy.name for layer in model.encoder.layers if layer.weights}, {"float32"}
        )
        ids = np.array([[2, 5, 6, 3]], "int32")
        logits = model.predict({"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids}, verbose=0)
        self.assertEqual(logits.dtype, np.float32)
        self.assertEqual(keras.config.dtype_policy().name, "float32")  # the run's policy does not leak

    def test_bad_training_settings_are_refused_with_the_fix(self):
        root = self.get_temp_dir()
        paths = write_one_word_task(root)
        base = one_word_task_settings(paths, os.path.join(root, "bad"))
        with self.assertRaisesRegex(
            UsageError, r"--eval_every_steps=50 is more than the 12 updates of this run"
        ):
            TrainingPlan.make(dataclasses.replace(base, eval_every_steps=50), 24, True)
        with self.assertRaisesRegex(
            UsageError, "--early_stopping_patience evaluates during training: it needs eval data"
        ):
            TrainingPlan.make(dataclasses.replace(base, early_stopping_patience=2), 24, False)
        with self.assertRaisesRegex(UsageError, "--eval_every_steps=0 turns evaluation during training off"):
            TrainingPlan.make(dataclasses.replace(base, keep_best_model=True, eval_every_steps=0), 24, True)
        plan = TrainingPlan.make(dataclasses.replace(base, gradient_accumulation_steps=2), 24, True)
        self.assertEqual((plan.num_train_steps, plan.micro_batch_size, plan.eval_every_steps), (12, 2, 6))
        for changes, message in [
            (
                {"gradient_accumulation_steps": 3},
                "--train_batch_size=4 is not a multiple of --gradient_accumulation_steps=3",
            ),
            (
                {"gradient_accumulation_steps": 0},
                "--gradient_accumulation_steps must be a positive integer, got 0",
            ),
            ({"eval_every_steps": -1}, "--eval_every_steps must be >= 0"),
            ({"early_stopping_patience": 0}, "--early_stopping_patience must be >= 1"),
            (
                {"mixed_precision": "float16"},
                "--mixed_precision=float16 is not a dtype policy; use one of auto, float32",
            ),
            ({"save_checkpoints_steps": 0}, "--save_checkpoints_steps must be a positive integer"),
        ]:
            with self.subTest(changes=changes), self.assertRaisesRegex(UsageError, message):
                dataclasses.replace(base, **changes)

    def test_an_unfinished_run_resumes_only_under_its_own_training_settings(self):
        root = self.get_temp_dir()
        paths = write_one_word_task(root)
        settings = one_word_task_settings(paths, os.path.join(root, "unfinished"), learning_rate=1e-3)
        step_dir = os.path.join(settings.output_dir, BACKUP_DIR, "step-3")
        os.makedirs(step_dir)
        saved = {name: getattr(settings, name) for name in RESUME_FIELDS}
        with open(os.path.join(step_dir, "state.json"), "w") as handle:
            json.dump({"step": 3, "callbacks": {}, "settings": saved}, handle)
        self.assertFalse(is_finished(settings.output_dir))
        with self.assertRaisesRegex(
            UsageError,
            r"holds an unfinished run \(step 3\) with other training settings "
            r"\(--learning_rate=0.001 there, 5e-05 now\); rerun it with its own flags",
        ):
            run(dataclasses.replace(settings, learning_rate=5e-5))

    def test_a_resumed_run_continues_its_optimizer_and_schedule(self):
        # The backup's optimizer (Adam's moments, its update count, hence the schedule) is the
        # one that trains on: a fresh one would count from 0 and warm up again.
        root = self.get_temp_dir()
        paths = write_one_word_task(root)  # 24 examples: 6 updates a pass, 12 in all
        settings = one_word_task_settings(
            paths, os.path.join(root, "run"), eval_every_steps=0, save_checkpoints_steps=2
        )
        with crash_after(4), self.assertRaises(Crash):
            run(settings)
        seen = {}
        original = callbacks.ProgressLogger.on_update

        def on_update(logger, reached, logs):
            optimizer = logger.model.optimizer
            seen[reached] = (int(optimizer.iterations), float(optimizer.learning_rate))
            original(logger, reached, logs)

        with mock.patch.object(callbacks.ProgressLogger, "on_update", on_update):
            run(settings)
        self.assertEqual(sorted(seen), list(range(5, 13)))
        self.assertEqual([seen[step][0] for step in sorted(seen)], list(range(5, 13)))
        # The original schedule: linear decay to 0 over the 12 updates (warmup was update 1's).
        for step, (_, rate) in seen.items():
            self.assertAllClose(rate, 5e-5 * (12 - step) / 12, rtol=1e-5, atol=1e-12)

    def test_training_flags_map_onto_settings(self):
        from absl import flags

        from bert_tf import finetune

        flag_values = flags.FlagValues()
        finetune.define_flags(flag_values)
        flag_values(
            [
                "finetune",
                "--task=sst2",
                "--output_dir=/tmp/o",
                "--mixed_precision=mixed_bfloat16",
                "--jit_compile",
                "--gradient_accumulation_steps=4",
                "--eval_every_steps=10",
                "--early_stopping_patience=3",
                "--keep_best_model",
                "--save_checkpoints_steps=50",
                "--log_every_steps=5",
            ]
        )
        settings = finetune.settings_from_flags(flag_values)
        self.assertEqual(
            (settings.mixed_precision, settings.jit_compile, settings.gradient_accumulation_steps),
            ("mixed_bfloat16", True, 4),
        )
        self.assertEqual((settings.eval_every_steps, settings.early_stopping_patience), (10, 3))
        self.assertEqual(
            (settings.keep_best_model, settings.save_checkpoints_steps, settings.log_every_steps),
            (True, 50, 5),
        )
        defaults = FinetuneSettings.of(task="sst2", output_dir="/tmp/o")
        self.assertEqual(
            (defaults.mixed_precision, defaults.jit_compile, defaults.eval_every_steps),
            ("auto", None, None),
        )

    # Two fine-tuning runs; its parts stay in the default run: test_streams' packed batches hold
    # the padded batches' examples, test_packing's packed forward pass equals each instance alone.
    @pytest.mark.slow
    def test_packed_training_reaches_the_weights_of_padded_training(self):
        # Packing moves each batch's tokens into fewer rows and changes nothing else: the same
        # examples per update, each computed as if alone. Without dropout in the encoder
        # (whose dropout masks follow the rows' shapes) both runs end at the same weights.
        paths = write_one_word_task(self.get_temp_dir(), n_train=40)
        with open(paths["config"]) as handle:
            config = json.load(handle)
        config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=32)
        with open(paths["config"], "w") as handle:
            json.dump(config, handle)
        weights, results = {}, {}
        for packing in (True, False):
            output_dir = os.path.join(self.get_temp_dir(), f"packing_{packing}")
            settings = one_word_task_settings(
                paths, output_dir, packing=packing, max_seq_length=32, train_batch_size=8, learning_rate=1e-3
            )
            results[packing] = run(settings)
            weights[packing] = load_finetuned(os.path.join(output_dir, "model")).get_weights()
        for packed, padded in zip(weights[True], weights[False], strict=True):
            self.assertAllClose(packed, padded, atol=1e-5, rtol=0)
        self.assertAllClose(results[True]["eval_loss"], results[False]["eval_loss"], atol=1e-5)

    def test_early_stopping_stops_the_run(self):
        root = self.get_temp_dir()
        paths = write_one_word_task(root)
        output_dir = os.path.join(root, "early")
        # A learning rate of ~0 leaves the accuracy where it is: no evaluation improves on the first.
        run(
            one_word_task_settings(
                paths, output_dir, learning_rate=1e-12, eval_every_steps=2, early_stopping_patience=2
            )
        )
        with open(os.path.join(output_dir, "eval_history.jsonl")) as handle:
            steps = [json.loads(line)["step"] for line in handle]
        self.assertEqual(steps, [2, 4, 6])  # of 12 updates: stopped after two without a gain


class Crash(Exception):
    pass


def crash_after(step):
    """Raises in the update `step` (after its backup: the progress line comes last)."""
    original = callbacks.ProgressLogger.on_update

    def on_update(self, reached, logs):
        if reached == step:
            raise Crash(f"crash at update {step}")
        original(self, reached, logs)

    return mock.patch.object(callbacks.ProgressLogger, "on_update", on_update)


def counting_records():
    """Patches streams.RecordReader to count every record any source yields; returns the list of readers."""
    readers = []
    original = streams.RecordReader.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        readers.append(self)

    return readers, mock.patch.object(streams.RecordReader, "__init__", init)


@pytest.mark.slow  # five tiny fine-tuning runs: ~2.5-5 min on 2 loaded cores
class ResumeInputTest(tf.test.TestCase):
    def test_a_resume_restores_the_input_position_instead_of_replaying_the_batches(self):
        root = self.get_temp_dir()
        paths = write_one_word_task(root)  # 24 examples, 6 updates a pass
        changes = dict(num_train_epochs=6.0, eval_every_steps=0, save_checkpoints_steps=2)
        reference = os.path.join(root, "reference")
        run(one_word_task_settings(paths, reference, **changes))
        expected = load_finetuned(os.path.join(reference, "model"), compile=False).get_weights()

        passed_over = {}
        for crash_step in (8, 26):  # in the 2nd and in the 5th pass over the data
            output_dir = os.path.join(root, f"crash_{crash_step}")
            with crash_after(crash_step), self.assertRaises(Crash):
                run(one_word_task_settings(paths, output_dir, **changes))
            self.assertEqual(backup_step(output_dir), crash_step)
            readers, counting = counting_records()
            with counting, self.assertLogs("bert_tf.tasks.runner", "INFO") as logs:
                run(one_word_task_settings(paths, output_dir, **changes))
            log = "\n".join(logs.output)
            self.assertIn(f"from the backup of step {crash_step} (input position restored)", log)
            passed_over[crash_step] = sum(reader.records_passed_over for reader in readers)
            weights = load_finetuned(os.path.join(output_dir, "model"), compile=False).get_weights()
            for want, got in zip(expected, weights, strict=True):
                self.assertAllClose(want, got, atol=1e-6, rtol=1e-6)
        # Reaching the position read the records of at most one pass (24), the same at step
        # 26 as at step 8; skipping would have read, tokenized and batched 104 again.
        self.assertEqual(passed_over[8], passed_over[26])
        self.assertLessEqual(passed_over[26], 24)


def backup_step(output_dir):
    directory = os.path.join(output_dir, BACKUP_DIR)
    steps = (
        [int(n.split("-")[1]) for n in os.listdir(directory) if n.startswith("step-")]
        if os.path.isdir(directory)
        else []
    )
    return max(steps, default=0)


@pytest.mark.slow
class ResumeProcessTest(tf.test.TestCase):
    def interrupt(self, paths, output_dir, sig):
        process = subprocess.Popen(
            finetune_command(paths, output_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        # Interrupted once it has a backup of step 20 (of 240): mid-run. The first updates
        # include starting TensorFlow and compiling, which a loaded machine makes slow.
        deadline = time.time() + 900
        while backup_step(output_dir) < 20 and process.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        self.assertIsNone(process.poll(), "the run ended before it could be interrupted")
        self.assertGreaterEqual(backup_step(output_dir), 20, "no backup of step 20 in 15 minutes")
        process.send_signal(sig)
        output = process.communicate(timeout=120)[0].decode()
        return process.returncode, output

    def test_kill_9_and_sigterm_then_the_same_command_continues_to_the_same_weights(self):
        root = self.get_temp_dir()
        paths = write_one_word_task(root)
        reference = os.path.join(root, "reference")
        subprocess.run(finetune_command(paths, reference), check=True, capture_output=True)
        expected = load_finetuned(os.path.join(reference, "model"), compile=False).get_weights()

        for sig in (signal.SIGKILL, signal.SIGTERM):
            with self.subTest(signal=sig.name):
                output_dir = os.path.join(root, sig.name)
                code, output = self.interrupt(paths, output_dir, sig)
                if sig == signal.SIGTERM:  # saved at the next update and exited cleanly
                    self.assertEqual(code, 143, output)
                    self.assertIn("stopped by SIGTERM at update", output)
                else:
                    self.assertEqual(code, -signal.SIGKILL)
                interrupted_at = backup_step(output_dir)
                self.assertBetween(interrupted_at, 20, 239)
                self.assertFalse(is_finished(output_dir))
                rerun = subprocess.run(finetune_command(paths, output_dir), capture_output=True, text=True)
                self.assertEqual(rerun.returncode, 0, rerun.stderr)
                self.assertIn(f"from the backup of step {interrupted_at}", rerun.stderr)
                weights = load_finetuned(os.path.join(output_dir, "model"), compile=False).get_weights()
                for a, b in zip(expected, weights, strict=True):
                    self.assertAllClose(a, b, atol=1e-6, rtol=1e-6)
                self.assertTrue(is_finished(output_dir))


if __name__ == "__main__":
    tf.test.main()
