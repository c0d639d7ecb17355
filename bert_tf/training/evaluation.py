"""Evaluation during pretraining: held-out metrics every N steps, and the best checkpoint.

Every `every_steps` steps the trainer scores the same `steps` evaluation batches (a fresh
pass from their start, so the numbers are comparable), prints them, writes them to
TensorBoard under `model_dir/logs/eval`, and when the masked-LM loss is the lowest so far
copies that step's checkpoint to `model_dir/best/` (with `best/eval.json` saying which
step and what it scored), beside the latest checkpoints that the manager rotates.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from bert_tf import fileio
from bert_tf.training.progress import ScalarLog, log_dir

BEST_DIR = "best"
BEST_INFO = "eval.json"
REPORTED = ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_accuracy", "loss")


class PeriodicEvaluator:
    """`on_loop_end` for `Trainer.train`: evaluates at multiples of `every_steps`."""

    def __init__(
        self,
        trainer,
        dataset_fn: Callable,
        steps: int,
        every_steps: int,
        verbose: bool = True,
        evaluate: Callable[[Callable, int], dict] | None = None,
    ):
        self.trainer = trainer
        self.evaluate = evaluate or trainer.evaluate  # (dataset_fn, steps) -> metrics
        self.dataset_fn = dataset_fn
        self.steps = steps
        self.every_steps = every_steps
        self.verbose = verbose and trainer.is_chief
        self.best_dir = fileio.join(trainer.model_dir, BEST_DIR)
        info = fileio.join(self.best_dir, BEST_INFO)
        self.best = fileio.read_json(info) if fileio.exists(info) else None
        self._scalars = (
            ScalarLog(trainer.model_dir, "eval", fileio.join(log_dir(trainer.model_dir), "eval"))
            if trainer.is_chief
            else None
        )
        self.history: list[dict] = []

    def __call__(self, step: int, train_metrics: dict) -> None:
        if step % self.every_steps:
            return
        metrics = self.evaluate(self.dataset_fn, self.steps)
        self.history.append({"step": step, **metrics})
        if self.verbose:
            shown = "  ".join(f"{name} {metrics[name]:.4f}" for name in REPORTED if name in metrics)
            print(f"eval at step {step}: {shown}", flush=True)
        if self._scalars is not None:
            self._scalars.write(step, metrics)
        if self.best is None or metrics["masked_lm_loss"] < self.best["masked_lm_loss"]:
            self._keep_best(step, metrics)

    def _keep_best(self, step: int, metrics: dict) -> None:
        latest = tf.train.latest_checkpoint(self.trainer.model_dir)
        if not latest or not latest.endswith(f"ckpt-{step}"):
            latest = self.trainer.save()  # every worker takes part in a save
        self.best = {"step": step, **metrics}
        if not self.trainer.is_chief:
            return
        # The new best is copied in before the old one is removed: a crash in between leaves
        # two candidates and eval.json naming the old one, never no best at all.
        old = [
            path for path in fileio.glob(fileio.join(self.best_dir, "ckpt-*")) if f"ckpt-{step}." not in path
        ]
        name = fileio.basename(latest)
        for path in fileio.glob(latest + ".*"):
            fileio.copy(path, fileio.join(self.best_dir, fileio.basename(path)))
        fileio.write_text(
            fileio.join(self.best_dir, "checkpoint"),
            f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n',
        )
        fileio.write_json(fileio.join(self.best_dir, BEST_INFO), self.best)
        for path in old:
            fileio.remove(path)
        if self.verbose:
            print(f"best eval masked_lm_loss so far: kept {fileio.join(self.best_dir, name)}", flush=True)

    def close(self) -> None:
        if self._scalars is not None:
            self._scalars.close()
