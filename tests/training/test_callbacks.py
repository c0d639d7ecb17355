"""The model.fit services (bert_tf.training.callbacks): accumulation, evaluation, best model, early stopping, backups."""

import io
import json
import os

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models import BertEncoder
from bert_tf.tasks.classification.family import ClassificationFamily
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.recipe import Recipe
from bert_tf.training import callbacks
from bert_tf.training.progress import ScalarLog, read_metrics, read_scalars
from tests.harness import tiny_config

VOCAB_SIZE = 40


def features(n, seq=12, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB_SIZE, size=(n, seq)).astype("int32")
    lengths = rng.integers(3, seq + 1, size=n)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    x = {"input_ids": ids * mask, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    return x, (ids[:, 1] % 2).astype("int32")


def classifier(dropout: float, seed: int = 7, accumulation: int = 1, steps: int = 8):
    keras.utils.set_random_seed(seed)
    config = tiny_config(
        VOCAB_SIZE, hidden_size=32, intermediate_size=64, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )  # fmt: skip
    model = BertClassifier(BertEncoder(config), num_classes=2, dropout_rate=dropout)
    model.compile(
        optimizer=Recipe(1e-3, 0.25, gradient_accumulation_steps=accumulation).optimizer(steps),
        **ClassificationFamily.compile_args("classification"),
    )
    return model


def stream(x, y, batch_size, seed=3):
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    return dataset.shuffle(len(y), seed=seed, reshuffle_each_iteration=True).repeat().batch(batch_size)


class GradientAccumulationTest(tf.test.TestCase):
    def test_micro_batches_follow_the_recipe_of_the_larger_batch(self):
        x, y = features(32)
        # Without dropout the two runs see the same examples in the same order per update.
        big = classifier(0.0)
        big.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        small = classifier(0.0, accumulation=2)
        small.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        self.assertEqual(int(big.optimizer.iterations), 4)
        self.assertEqual(int(small.optimizer.iterations), 4)
        # The schedule counts updates: warmup 2 of 8 steps, then linear decay.
        self.assertAllClose(float(small.optimizer.learning_rate), float(big.optimizer.learning_rate))
        self.assertAllClose(float(big.optimizer.learning_rate), 1e-3 * (1 - 4 / 8))
        for a, b in zip(big.get_weights(), small.get_weights(), strict=True):
            self.assertAllClose(a, b, atol=2e-6, rtol=1e-5)
        # And training moved the weights: the equality is not of two untouched models.
        self.assertGreater(
            max(
                np.abs(a - b).max()
                for a, b in zip(big.get_weights(), classifier(0.0).get_weights(), strict=True)
            ),
            1e-4,
        )


class EvaluationCallbacksTest(tf.test.TestCase):
    def test_evaluation_best_model_and_early_stopping(self):
        x, y = features(16)
        model = classifier(0.1, steps=100)
        scripted = iter([0.5, 0.7, 0.6, 0.65, 0.9, 0.95])
        snapshots = {}

        def evaluate(m):
            snapshots[int(m.optimizer.iterations)] = [w.copy() for w in m.get_weights()]
            return {"accuracy": next(scripted), "eval_loss": 1.0}

        root = self.get_temp_dir()
        history_file = os.path.join(root, "history.jsonl")
        evaluation = callbacks.TaskEvaluation(
            evaluate,
            every_steps=3,
            history_file=history_file,
            scalars=ScalarLog(root, "eval", os.path.join(root, "eval")),
        )
        best = callbacks.BestModel(os.path.join(root, "best.npz"), "val_accuracy")
        stopping = callbacks.EarlyStopping("val_accuracy", patience=2)
        model.fit(stream(x, y, 4), steps_per_epoch=40, callbacks=[evaluation, best, stopping], verbose=0)
        # 0.5, 0.7 (best), 0.6, 0.65: two evaluations without a gain stop training at step 12.
        self.assertEqual([step for step, _ in evaluation.history], [3, 6, 9, 12])
        self.assertEqual((stopping.stopped_step, int(model.optimizer.iterations)), (12, 12))
        self.assertEqual((best.best, best.best_step), (0.7, 6))
        with open(history_file) as handle:
            lines = [json.loads(line) for line in handle]
        self.assertEqual([line["step"] for line in lines], [3, 6, 9, 12])
        self.assertEqual(lines[1]["accuracy"], 0.7)
        self.assertTrue(best.restore(model))
        for restored, kept in zip(model.get_weights(), snapshots[6], strict=True):
            self.assertAllEqual(restored, kept)
        scalars = read_scalars(os.path.join(root, "eval"))
        self.assertEqual([step for step, _ in scalars["accuracy"]], [3, 6, 9, 12])
        self.assertAllClose([value for _, value in scalars["accuracy"]], [0.5, 0.7, 0.6, 0.65])
        # The same values in metrics.jsonl.
        reports = read_metrics(root)
        self.assertEqual([(r["split"], r["step"]) for r in reports], [("eval", s) for s in (3, 6, 9, 12)])
        self.assertAllClose([r["accuracy"] for r in reports], [0.5, 0.7, 0.6, 0.65])

    def test_progress_line_and_training_scalars(self):
        x, y = features(16)
        model = classifier(0.1, steps=10)
        output = io.StringIO()
        run_dir = self.get_temp_dir()
        log_dir = os.path.join(run_dir, "train")
        scalars_log = ScalarLog(run_dir, "train", log_dir)
        progress = callbacks.ProgressLogger(10, 4, every_steps=5, scalars=scalars_log, stream=output)
        model.fit(stream(x, y, 4), steps_per_epoch=10, callbacks=[progress], verbose=0)
        lines = output.getvalue().splitlines()
        self.assertEqual([line.split("  ")[0] for line in lines], ["step 5/10", "step 10/10"])
        self.assertRegex(lines[1], r"loss \d\.\d{4}  lr \S+  [\d.]+ examples/s  ETA 0s")
        scalars = read_scalars(log_dir)
        self.assertEqual([step for step, _ in scalars["loss"]], [5, 10])
        self.assertEqual([step for step, _ in scalars["learning_rate"]], [5, 10])
        self.assertAllClose(scalars["learning_rate"][1][1], 0.0)  # decayed to 0 at the end
        self.assertIn("examples_per_second", scalars)
        reports = read_metrics(run_dir)
        self.assertEqual([r["step"] for r in reports], [5, 10])
        self.assertAllClose([r["loss"] for r in reports], [value for _, value in scalars["loss"]])


class TrainingBackupTest(tf.test.TestCase):
    def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(self):
        x, y = features(24, seed=1)
        steps = 9

        def train(model, start, callbacks_):
            tf.random.set_seed(5)  # the shuffling's seed is the same in every run, as in the runner's
            dataset = stream(x, y, 4).skip(start * 2)  # 2 micro-batches per update
            model.fit(dataset, steps_per_epoch=(steps - start) * 2, callbacks=callbacks_, verbose=0)

        reference = classifier(0.2, accumulation=2, steps=steps)  # dropout: its RNG must resume too
        train(reference, 0, [])

        class Crash(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if int(self.model.optimizer.iterations) == 7:
                    raise RuntimeError("crash")

        directory = os.path.join(self.get_temp_dir(), "backup")
        first = classifier(0.2, accumulation=2, steps=steps)
        with self.assertRaisesRegex(RuntimeError, "crash"):
            train(first, 0, [callbacks.TrainingBackup(directory, every_steps=3), Crash()])
        self.assertEqual(os.listdir(directory), ["step-6"])  # the newest complete backup only

        second = classifier(0.2, accumulation=2, steps=steps, seed=99)  # other initial weights
        backup = callbacks.TrainingBackup(directory, every_steps=3)
        start = backup.restore(second)
        self.assertEqual(start, 6)
        train(second, start, [backup])
        self.assertEqual(int(second.optimizer.iterations), steps)
        for a, b in zip(reference.get_weights(), second.get_weights(), strict=True):
            self.assertAllClose(a, b, atol=1e-6, rtol=1e-6)
        self.assertEqual(os.listdir(directory), [f"step-{steps}"])  # saved at the end


if __name__ == "__main__":
    tf.test.main()
