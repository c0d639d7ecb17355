"""--search (successive halving of recipes, with Keras Tuner) and --seeds on a tiny model and task."""

import csv
import dataclasses
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.tasks.finetuned import load_finetuned
from bert_tf.tasks.search import run
from bert_tf.training.progress import read_metrics
from tests.harness import data
from tests.harness.processes import REPO, environment, finetune_command


def read_table(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def settings_of(root, **changes):
    values = dict(
        baseline=False,
        num_train_epochs=None,
        train_batch_size=32,
        search_learning_rates=(1e-3, 3e-3),
        search_epochs=(1.0, 2.0),
        search_batch_sizes=(8,),
    )
    values.update(changes)
    return data.one_word_task_settings(data.write_one_word_task(root), os.path.join(root, "out"), **values)


class SearchTest(tf.test.TestCase):
    def test_the_best_trial_is_kept_with_the_table_and_the_predictions_made_once(self):
        root = self.get_temp_dir()
        settings = settings_of(root, search=3, predict_file=data.write_one_word_task(root)["dev"])
        with self.assertLogs("bert_tf.tasks.search", "INFO") as logs:
            results = run(settings)
        out = settings.output_dir
        trials = read_table(os.path.join(out, "search_trials.tsv"))
        # Three recipes to epoch 1; the best third (one) goes on to epoch 2.
        self.assertEqual([row["epochs"] for row in trials], ["1", "1", "1", "2"])
        self.assertEqual(results["search_trials"], 4.0)
        first = trials[:3]
        last = trials[3]
        self.assertIn(last["run"], [row["trial"] for row in first])
        started = next(row for row in first if row["trial"] == last["run"])
        self.assertEqual(float(started["accuracy"]), max(float(row["accuracy"]) for row in first))
        for row in first:  # each recipe is one of the space's, in its own run
            self.assertEqual(row["run"], row["trial"])
            self.assertIn(float(row["learning_rate"]), (1e-3, 3e-3))
            self.assertEqual(row["train_batch_size"], "8")
        for key in ("learning_rate", "train_batch_size", "seed"):
            self.assertEqual(last[key], started[key])
        # Only the continued run finished (2 epochs of 3 updates); the others paused at epoch 1.
        run_dir = os.path.join(out, "search", f"trial_{last['run']}", "run")
        with open(os.path.join(run_dir, "eval_results.json")) as handle:
            self.assertAllClose(json.load(handle)["accuracy"], float(last["accuracy"]), atol=5e-5)
        self.assertAllClose(results["accuracy"], float(last["accuracy"]), atol=5e-5)
        with open(os.path.join(run_dir, "eval_history.jsonl")) as handle:
            self.assertEqual([json.loads(line)["step"] for line in handle], [3, 6])
        for row in first:
            if row["trial"] != last["run"]:
                paused = os.path.join(out, "search", f"trial_{row['trial']}", "run")
                self.assertFalse(os.path.exists(os.path.join(paused, "eval_results.json")))
                with open(os.path.join(paused, "eval_history.jsonl")) as handle:
                    self.assertEqual([json.loads(line)["step"] for line in handle], [3])
                # Its backup was only for a continuation: gone once the search is over.
                self.assertFalse(os.path.exists(os.path.join(paused, "backup")))
        # model/ is the finished run's, byte for byte.
        with open(os.path.join(run_dir, "model", "model.keras"), "rb") as a:
            with open(os.path.join(out, "model", "model.keras"), "rb") as b:
                self.assertEqual(a.read(), b.read())
        # The trials on the run's plot; the table in the log; the predictions by the kept model only.
        self.assertLen([r for r in read_metrics(out) if r["split"] == "search"], 4)
        self.assertIn(f"search: 4 trials (best: trial {last['trial']},", "\n".join(logs.output))
        self.assertTrue(os.path.exists(os.path.join(out, "predictions", "predict_predictions.tsv")))
        self.assertFalse([n for n in os.listdir(run_dir) if n.startswith("predict")])

    def test_a_continued_run_trains_as_one_uninterrupted_run(self):
        # The run a search pauses at epoch 1 and continues to epoch 2 reaches the weights of
        # the same recipe run at once: the pause keeps the optimizer, schedule and input.
        root = self.get_temp_dir()
        settings = settings_of(root, search=1, search_learning_rates=(3e-3,))
        run(settings)
        trials = read_table(os.path.join(settings.output_dir, "search_trials.tsv"))
        self.assertEqual([row["epochs"] for row in trials], ["1", "2"])
        reference = dataclasses.replace(
            settings,
            search=None,
            learning_rate=3e-3,
            num_train_epochs=2.0,
            train_batch_size=8,
            seed=int(trials[0]["seed"]),
            keep_best_model=True,
            early_stopping_patience=2,
            output_dir=os.path.join(root, "reference"),
        )
        run(reference)
        searched = load_finetuned(os.path.join(settings.output_dir, "model"), compile=False).get_weights()
        alone = load_finetuned(os.path.join(root, "reference", "model"), compile=False).get_weights()
        for want, got in zip(alone, searched, strict=True):
            self.assertAllClose(want, got, atol=1e-6, rtol=1e-6)

    def test_seeds_report_mean_and_spread_and_keep_the_best_seeds_model(self):
        root = self.get_temp_dir()
        settings = settings_of(root, seeds=2, learning_rate=3e-3, num_train_epochs=1.0, train_batch_size=8)
        results = run(settings)
        rows = read_table(os.path.join(settings.output_dir, "seeds.tsv"))
        self.assertEqual([row["seed"] for row in rows], ["12345", "12346"])
        accuracies = np.array([float(row["accuracy"]) for row in rows])
        self.assertAllClose(results["accuracy_mean"], accuracies.mean(), atol=1e-4)
        self.assertAllClose(results["accuracy_std"], accuracies.std(ddof=1), atol=1e-4)
        self.assertEqual(results["seeds"], 2.0)
        best = rows[int(accuracies.argmax())]["seed"]
        kept = os.path.join(settings.output_dir, "seeds", f"seed_{best}", "model", "model.keras")
        with (
            open(kept, "rb") as a,
            open(os.path.join(settings.output_dir, "model", "model.keras"), "rb") as b,
        ):
            self.assertEqual(a.read(), b.read())

    @pytest.mark.slow  # ~30 s: a second search
    def test_nosave_model_keeps_no_model_and_the_chosen_one_still_predicts(self):
        root = self.get_temp_dir()
        dev = data.write_one_word_task(root)["dev"]
        settings = settings_of(root, search=1, search_epochs=(1.0,), save_model=False, predict_file=dev)
        run(settings)
        self.assertFalse(os.path.exists(os.path.join(settings.output_dir, "model")))
        predictions = os.path.join(settings.output_dir, "predictions", "predict_predictions.tsv")
        self.assertTrue(os.path.exists(predictions))
        # Finished: the same command is refused; --overwrite starts afresh.
        with self.assertRaisesRegex(UsageError, "--overwrite"):
            run(settings)
        os.remove(predictions)
        run(dataclasses.replace(settings, overwrite=True))
        self.assertTrue(os.path.exists(predictions))
        self.assertLen(read_table(os.path.join(settings.output_dir, "search_trials.tsv")), 1)

    def test_bad_input_is_refused_in_one_line_before_anything_is_written(self):
        root = self.get_temp_dir()
        cases = {
            "--search must be a positive number of trials": dict(search=0),
            "--seeds must be a positive number of runs": dict(seeds=0),
            "--search_learning_rates=: give learning rates": dict(search=2, search_learning_rates=()),
            "--search_learning_rates=2.0: give learning rates in": dict(
                search=2, search_learning_rates=("2.0",)
            ),
            "--search_batch_sizes=16.5: give positive batch sizes": dict(
                search=2, search_batch_sizes=("16.5",)
            ),
            "--search_epochs=x: give increasing numbers of epochs": dict(search=2, search_epochs=("x",)),
            "--search_epochs=3,1: give increasing numbers of epochs": dict(search=2, search_epochs=(3, 1)),
        }
        for message, changes in cases.items():
            with self.assertRaisesRegex(UsageError, message):
                settings_of(root, **changes)
        settings = settings_of(root, search=2, eval_file=None)
        with self.assertRaisesRegex(
            UsageError, "--search compares runs by their score on the eval data: give --eval_file"
        ):
            run(settings)
        self.assertFalse(os.path.exists(settings.output_dir))
        settings = settings_of(root, search=2, eval_every_steps=0)
        with self.assertRaisesRegex(UsageError, "leave --eval_every_steps unset"):
            run(settings)
        self.assertFalse(os.path.exists(settings.output_dir))


@pytest.mark.slow
class SearchProcessTest(tf.test.TestCase):
    def test_a_killed_search_continues_where_it_stopped(self):
        root = self.get_temp_dir()
        paths = data.write_one_word_task(root)
        out = os.path.join(root, "out")
        command = finetune_command(
            paths,
            out,
            "--search=3",
            "--search_epochs=20",
            "--search_learning_rates=1e-3",
            "--nobaseline",
            "--eval_every_steps=6",
        )
        process = subprocess.Popen(
            command, cwd=REPO, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        # Killed while the second trial trains (it has a backup), after the first finished.
        deadline = time.monotonic() + 300
        second = None
        while time.monotonic() < deadline and second is None:
            time.sleep(0.5)
            trials = (
                sorted(d for d in os.listdir(os.path.join(out, "search")) if d.startswith("trial_"))
                if os.path.isdir(os.path.join(out, "search"))
                else []
            )
            if len(trials) >= 2 and os.path.isdir(os.path.join(out, "search", trials[1], "run", "backup")):
                second = trials[1]
        self.assertIsNotNone(second, "the search never reached its second trial")
        process.send_signal(signal.SIGKILL)
        process.wait()
        first_done = os.path.getmtime(os.path.join(out, "search", "trial_0000", "seconds.json"))
        rerun = subprocess.run(
            command, cwd=REPO, env=environment(), capture_output=True, text=True, timeout=600
        )
        self.assertEqual(rerun.returncode, 0, rerun.stderr[-3000:])
        self.assertIn("trials were finished before; continuing", rerun.stderr)
        self.assertEqual(
            os.path.getmtime(os.path.join(out, "search", "trial_0000", "seconds.json")), first_done
        )
        self.assertLen(read_table(os.path.join(out, "search_trials.tsv")), 3)
