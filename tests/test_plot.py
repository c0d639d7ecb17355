"""`python -m bert_tf.plot`: runs side by side, chosen panels, and what it refuses.

A real tiny fine-tuning run is drawn in tests/tasks/test_runner_training.py; here the runs
are written with the training loop's own `ScalarLog`.
"""

import os
import subprocess
import sys

import matplotlib.image
import tensorflow as tf

from bert_tf import plot
from bert_tf.errors import UsageError
from bert_tf.training.progress import ScalarLog, log_dir, read_metrics


def write_run(run_dir: str, scale: float) -> None:
    train = ScalarLog(run_dir, "train", log_dir(run_dir))
    evaluation = ScalarLog(run_dir, "eval", os.path.join(log_dir(run_dir), "eval"))
    for step in range(10, 101, 10):
        train.write(step, {"loss": scale / step, "learning_rate": 1e-4 * (1 - step / 100), "fill_rate": 0.9})
        if step % 50 == 0:
            evaluation.write(step, {"accuracy": 0.5 + step / 400})
    train.close()
    evaluation.close()


class PlotTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.root = self.get_temp_dir()
        self.runs = [os.path.join(self.root, name) for name in ("lr_high", "lr_low")]
        for scale, run_dir in enumerate(self.runs, 1):
            write_run(run_dir, scale)

    def test_default_panels_leave_out_speed_and_padding(self):
        runs = plot.read_runs(self.runs)
        self.assertEqual(
            plot.panels(runs, None), [("train", "loss"), ("train", "learning_rate"), ("eval", "accuracy")]
        )
        self.assertEqual(
            plot.panels(runs, ["train/fill_rate", "accuracy"]), [("train", "fill_rate"), ("eval", "accuracy")]
        )

    def test_a_resumed_run_keeps_the_last_report_of_a_step(self):
        log = ScalarLog(self.runs[0], "train", log_dir(self.runs[0]))
        log.write(100, {"loss": 7.0})
        log.close()
        with open(os.path.join(self.runs[0], "metrics.jsonl"), "a") as handle:
            handle.write('{"split": "train", "st')  # a line cut short by a crash
        reports = [r for r in read_metrics(self.runs[0]) if r["split"] == "train"]
        self.assertEqual([r["step"] for r in reports], list(range(10, 101, 10)))
        self.assertEqual(reports[-1]["loss"], 7.0)

    def test_the_program_draws_two_runs_into_one_png(self):
        output = os.path.join(self.root, "both.png")
        result = subprocess.run(
            [sys.executable, "-m", "bert_tf.plot", *self.runs, f"--output={output}"],
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertEqual(result.stdout.strip(), f"wrote {output}")
        # TensorFlow loads behind the noise filter: none of its native start-up lines.
        self.assertNotRegex(result.stderr, r"(?m)^[IWE]0000 |^WARNING: All log messages")
        image = matplotlib.image.imread(output)
        self.assertEqual(image.shape[:2], (320, 1350))  # one row of three 4.5 x 3.2 in panels at 100 dpi
        self.assertGreater(float(image[..., :3].std()), 0.05)  # not blank

    def test_bad_input_is_refused_with_the_fix(self):
        with self.assertRaisesRegex(UsageError, r"is not a run folder \(no such folder\)"):
            plot.plot([os.path.join(self.root, "missing")])
        with self.assertRaisesRegex(UsageError, r"is not a run folder \(it has no metrics.jsonl\)"):
            plot.plot([self.root])
        with self.assertRaisesRegex(
            UsageError, r"--metrics=f1: no run reported it; the runs have train/loss"
        ):
            plot.plot(self.runs, metrics=["f1"])
        self.assertFalse(os.path.exists(os.path.join(self.runs[0], "metrics.png")))

    def test_tensorboard_is_installed_with_the_package(self):
        import tensorboard  # noqa: F401  (TensorFlow 2.21 no longer installs it)
