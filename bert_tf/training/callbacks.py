"""The services around `model.fit`, for fine-tuning and for pretraining on JAX: evaluation
during training, the best model, early stopping, a resumable backup (with the input's
position), and a progress line with TensorBoard scalars.

`bert_tf.tasks.runner` (fine-tuning) and `bert_tf.training.keras_pretraining` (pretraining
under `model.fit`, the JAX path) both train with these, so both write one backup format
(`TrainingBackup`). Each is a plain `keras.callbacks.Callback` for `model.fit`. They count optimizer updates
(`model.optimizer.iterations`), not batches, so they agree under gradient accumulation
and after a resume. The evaluation adds its metrics to the logs as `val_<name>` in the
batch where it runs; the callbacks after it in the list (best model, early stopping,
backup, progress) read them there, so put `TaskEvaluation` first.

Example (evaluation every 2 updates, training stops after 1 evaluation without a gain):

>>> import numpy as np, keras
>>> from bert_tf.training import callbacks
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
>>> model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
>>> x, y = np.ones((8, 3), "float32"), np.zeros(8, "int32")
>>> evaluation = callbacks.TaskEvaluation(lambda m: {"accuracy": 0.5}, every_steps=2)
>>> stop = callbacks.EarlyStopping("val_accuracy", patience=1)
>>> _ = model.fit(x, y, batch_size=1, callbacks=[evaluation, stop], verbose=0)
>>> [step for step, _ in evaluation.history], stop.stopped_step
([2, 4], 4)
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

import keras
import numpy as np

from bert_tf import fileio
from bert_tf.errors import damaged
from bert_tf.progress_display import is_terminal
from bert_tf.training.progress import ScalarLog, progress_line

logger = logging.getLogger(__name__)

VALIDATION_PREFIX = "val_"


def optimizer_updates(model: keras.Model) -> int:
    """Optimizer updates so far (micro-batches / gradient_accumulation_steps)."""
    return int(model.optimizer.iterations)


class _UpdateCallback(keras.callbacks.Callback):
    """Calls `on_update(step, logs)` once per optimizer update, after its last micro-batch.

    The updates are counted from the optimizer's count at the start, not read from it at
    every batch: on JAX reading the model (`self.model`) brings the training state back
    to its variables, a cost a callback pays only when it acts (saves, evaluates).
    """

    def on_train_begin(self, logs=None):
        self._last_step = optimizer_updates(self.model)
        self._micro_batches = 0
        optimizer = self._model.optimizer
        optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # under loss scaling
        self._accumulation = getattr(optimizer, "gradient_accumulation_steps", None) or 1

    def on_train_batch_end(self, batch, logs=None):
        self._micro_batches += 1
        if self._micro_batches % self._accumulation == 0:
            self._last_step += 1
            self.on_update(self._last_step, logs if logs is not None else {})

    def on_update(self, step: int, logs: dict) -> None:
        pass


class TaskEvaluation(_UpdateCallback):
    """Scores the model with `evaluate(model) -> {metric: value}` during training.

    Every `every_steps` updates, or at the end of every epoch when `every_steps` is None.
    The metrics go into the logs as `val_<name>`, into `history` ([(step, metrics)]), one
    JSON line each into `history_file`, and into `scalars` (a `progress.ScalarLog`: TensorBoard
    and metrics.jsonl; if given).
    """

    def __init__(
        self,
        evaluate: Callable[[keras.Model], dict[str, float]],
        every_steps: int | None = None,
        history_file: str | None = None,
        scalars: ScalarLog | None = None,
    ):
        super().__init__()
        if every_steps is not None and every_steps <= 0:
            raise ValueError(f"every_steps must be positive, got {every_steps}")
        self.evaluate, self.every_steps = evaluate, every_steps
        self.history_file, self.scalars = history_file, scalars
        self.history: list[tuple[int, dict[str, float]]] = []

    def on_update(self, step, logs):
        if self.every_steps and step % self.every_steps == 0:
            self._run(step, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.every_steps is None:
            self._run(optimizer_updates(self.model), logs if logs is not None else {})

    def _run(self, step: int, logs: dict) -> None:
        metrics = {name: float(value) for name, value in self.evaluate(self.model).items()}
        self.history.append((step, metrics))
        logs.update({VALIDATION_PREFIX + name: value for name, value in metrics.items()})
        self._write_history()
        if self.scalars is not None:
            self.scalars.write(step, metrics)

    def on_train_end(self, logs=None):
        if self.scalars is not None:
            self.scalars.close()

    def get_state(self) -> dict:
        return {"history": [[step, metrics] for step, metrics in self.history]}

    def set_state(self, state: dict) -> None:
        """Restores the history of a resumed run; the history file keeps only those lines."""
        self.history = [(int(step), dict(metrics)) for step, metrics in state["history"]]
        self._write_history()

    def _write_history(self) -> None:
        # Written whole each time (a few lines): object stores cannot append to a file.
        if self.history_file:
            lines = [
                json.dumps({"step": step, **metrics}, sort_keys=True) + "\n" for step, metrics in self.history
            ]
            fileio.write_text(self.history_file, "".join(lines))


class _MonitorCallback(_UpdateCallback):
    """Acts when the monitored value appears in the logs (that is, after an evaluation)."""

    def __init__(self, monitor: str, mode: str = "max", min_delta: float = 0.0):
        super().__init__()
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        self.monitor, self.mode, self.min_delta = monitor, mode, abs(min_delta)
        self.best: float | None = None
        self.best_step: int | None = None

    def _improved(self, value: float) -> bool:
        if self.best is None:
            return True
        return (
            value > self.best + self.min_delta if self.mode == "max" else value < self.best - self.min_delta
        )

    def on_update(self, step, logs):
        if self.monitor in logs:
            self.on_evaluation(step, float(logs[self.monitor]))

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.monitor in logs:
            self.on_evaluation(optimizer_updates(self.model), float(logs[self.monitor]))

    def on_evaluation(self, step: int, value: float) -> None:
        raise NotImplementedError

    def get_state(self) -> dict:
        return {"best": self.best, "best_step": self.best_step}

    def set_state(self, state: dict) -> None:
        self.best, self.best_step = state["best"], state["best_step"]


class BestModel(_MonitorCallback):
    """Keeps the model weights of the best evaluation by `monitor` in `path` (an .npz).

    `restore(model)` puts them back, e.g. at the end of training. The file is published
    whole (`bert_tf.fileio.write_bytes`), so a kill never leaves half a file.
    """

    def __init__(self, path: str, monitor: str, mode: str = "max"):
        super().__init__(monitor, mode)
        self.path = path

    def on_evaluation(self, step, value):
        if not self._improved(value):
            return
        self.best, self.best_step = value, step
        buffer = io.BytesIO()
        np.savez(buffer, *self.model.get_weights())
        fileio.write_bytes(self.path, buffer.getvalue())  # published whole: see bert_tf.fileio
        logger.info("best %s so far: %.4f at step %d", self.monitor, value, step)

    def restore(self, model: keras.Model) -> bool:
        """Loads the best weights into `model`; False when there are none."""
        if self.best_step is None or not fileio.isfile(self.path):
            return False
        with np.load(io.BytesIO(fileio.read_bytes(self.path))) as arrays:
            model.set_weights([arrays[f"arr_{index}"] for index in range(len(arrays.files))])
        return True


class EarlyStopping(_MonitorCallback):
    """Stops training after `patience` evaluations in a row without a better `monitor`."""

    def __init__(self, monitor: str, patience: int, mode: str = "max", min_delta: float = 0.0):
        super().__init__(monitor, mode, min_delta)
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.patience = patience
        self.wait = 0
        self.stopped_step: int | None = None

    def on_evaluation(self, step, value):
        if self._improved(value):
            self.best, self.best_step, self.wait = value, step, 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_step = step
            self.model.stop_training = True
            logger.info(
                "early stopping at step %d: no better %s than %.4f (step %d) in %d evaluations",
                step,
                self.monitor,
                self.best,
                self.best_step,
                self.wait,
            )

    def get_state(self) -> dict:
        return {**super().get_state(), "wait": self.wait, "stopped_step": self.stopped_step}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.wait, self.stopped_step = state["wait"], state["stopped_step"]


class TrainingBackup(_UpdateCallback):
    """Saves what resuming needs, and restores it: Keras' BackupAndRestore, to the step.

    A backup is a folder `step-<N>` in `directory` (any filesystem `bert_tf.fileio`
    reaches) holding the model and optimizer variables (`model.save_weights`), the dropout
    generators' states, and the states of `stateful` callbacks (evaluation history, best
    value, early-stopping patience). It is written under a temporary name and renamed
    into place, then older ones are removed, so a `kill -9` at any moment leaves a complete
    backup (on object stores, where a folder cannot be renamed, `state.json` is written
    last and a folder without it is not a backup). Saved every `every_steps` updates, after
    each evaluation, at the end of training, and after the update in which `signals` (a
    `bert_tf.training.preemption.StopSignals`) saw SIGTERM or Ctrl-C, which then stops
    training: `interrupted` is set and the caller decides how to exit.

    With `input_position` (a `bert_tf.training.fit_input.InputPosition` that tracks the
    training dataset) a backup also holds the input's position (`input.index`,
    `input.data-*`), and `restore` has the dataset's next iterator start there:
    `input_restored` is then True. Otherwise `restore(model)` (also run by
    `on_train_begin` if not called before) returns the step it resumed from and the
    caller skips that many batches of its training data (`dataset.skip`). Either way a
    resumed run sees the batches an uninterrupted one sees.
    """

    STATE_FILE = "state.json"
    WEIGHTS_FILE = "model.weights.h5"
    RNG_FILE = "dropout_rng.npz"
    # Keras saves a LoRA layer's kernel merged and zeroes its adapters on loading: a backup
    # keeps their own values too, so that a resumed run goes on from the same adapters.
    LORA_FILE = "lora_variables.npz"
    INPUT_PREFIX = "input"  # tf.data's iterator checkpoint: input.index, input.data-*

    def __init__(
        self,
        directory: str,
        every_steps: int | None = None,
        stateful: Sequence[keras.callbacks.Callback] = (),
        extra_state: dict | None = None,
        signals=None,
        input_position=None,
        writer: bool = True,
    ):
        super().__init__()
        self.directory, self.every_steps = directory, every_steps
        # False on the other processes of a multi-host run: all restore, one writes.
        self.writer = writer
        self.input_position = input_position
        self.input_restored = False
        self.stateful = {type(callback).__name__: callback for callback in stateful}
        self.extra_state = dict(extra_state or {})
        self.signals = signals
        self.restored_step: int | None = None
        self.restored_state: dict | None = None
        self.interrupted = False
        self._saved_step: int | None = None

    # -- restoring --------------------------------------------------------------------------
    def latest(self) -> str | None:
        """The folder of the newest complete backup, or None."""
        if not fileio.isdir(self.directory):
            return None
        steps = [
            int(name.split("-", 1)[1])
            for name in fileio.listdir(self.directory)
            if name.startswith("step-")
            and name.split("-", 1)[1].isdigit()
            and fileio.exists(fileio.join(self.directory, name, self.STATE_FILE))
        ]
        return fileio.join(self.directory, f"step-{max(steps)}") if steps else None

    def read_state(self) -> dict | None:
        latest = self.latest()
        if latest is None:
            return None
        path = fileio.join(latest, self.STATE_FILE)
        try:
            return json.loads(fileio.read_text(path))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise damaged(
                path,
                f"not valid JSON: {error}",
                "delete that backup folder to resume from the one before, or pass --overwrite",
            ) from None

    def restore(self, model: keras.Model) -> int:
        """Loads the newest backup into `model` and the stateful callbacks; returns its step (0: none)."""
        self.restored_step, self.input_restored = 0, False
        latest = self.latest()
        if latest is None:
            return 0
        state = self.read_state()
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        with tempfile.TemporaryDirectory(prefix="bert_tf_backup_") as local:
            # Keras and numpy read local files; the backup may be on any filesystem.
            for name in (self.WEIGHTS_FILE, self.RNG_FILE):
                fileio.copy(fileio.join(latest, name), os.path.join(local, name))
            try:
                model.load_weights(os.path.join(local, self.WEIGHTS_FILE))
                with np.load(os.path.join(local, self.RNG_FILE)) as states:
                    for index, variable in enumerate(_rng_states(model)):
                        variable.assign(states[f"arr_{index}"])
                if fileio.exists(fileio.join(latest, self.LORA_FILE)):
                    fileio.copy(fileio.join(latest, self.LORA_FILE), os.path.join(local, self.LORA_FILE))
                    with np.load(os.path.join(local, self.LORA_FILE)) as values:
                        for index, variable in enumerate(_lora_variables(model)):
                            variable.assign(values[f"arr_{index}"])
            except (OSError, ValueError, KeyError) as error:
                raise damaged(
                    latest,
                    f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}",
                    "delete that backup folder to resume from the one before, or pass --overwrite",
                ) from None
        for name, callback in self.stateful.items():
            if name in state["callbacks"]:
                callback.set_state(state["callbacks"][name])
        input_prefix = fileio.join(latest, self.INPUT_PREFIX)
        if state.get("input") and self.input_position is not None and fileio.exists(input_prefix + ".index"):
            self.input_position.restore_from(input_prefix)
            self.input_restored = True
        self.restored_state = state
        self.restored_step = self._saved_step = int(state["step"])
        logger.info("resumed from the backup of step %d in %s", self.restored_step, self.directory)
        return self.restored_step

    # -- saving ------------------------------------------------------------------------------
    def save(self, step: int | None = None) -> str:
        step = optimizer_updates(self.model) if step is None else step
        final = fileio.join(self.directory, f"step-{step}")
        if not self.writer:
            self._saved_step = step
            return final
        state = {
            "step": step,
            "callbacks": {name: callback.get_state() for name, callback in self.stateful.items()},
            **self.extra_state,
        }
        with tempfile.TemporaryDirectory(prefix="bert_tf_backup_") as local:
            self.model.save_weights(os.path.join(local, self.WEIGHTS_FILE))
            np.savez(os.path.join(local, self.RNG_FILE), *[np.asarray(v) for v in _rng_states(self.model)])
            if _lora_variables(self.model):
                np.savez(
                    os.path.join(local, self.LORA_FILE), *[np.asarray(v) for v in _lora_variables(self.model)]
                )
            if self.input_position is not None:
                state["input"] = self.input_position.save(os.path.join(local, self.INPUT_PREFIX))
            with open(os.path.join(local, self.STATE_FILE), "w", encoding="utf-8") as handle:
                json.dump(state, handle, indent=1, sort_keys=True)
            fileio.publish_folder(local, final, last=(self.STATE_FILE,))
        for name in fileio.listdir(self.directory):  # older backups and leftovers of a kill
            if name != fileio.basename(final) and name.startswith(("step-", ".step-")):
                fileio.rmtree(fileio.join(self.directory, name))
        self._saved_step = step
        return final

    def on_train_begin(self, logs=None):
        if self.restored_step is None:
            self.restore(self.model)
        super().on_train_begin(logs)
        self.interrupted = False

    def on_update(self, step, logs):
        stop = bool(self.signals is not None and self.signals.received)
        evaluated = any(name.startswith(VALIDATION_PREFIX) for name in logs)
        if stop or evaluated or (self.every_steps and step % self.every_steps == 0):
            self.save(step)
        if stop:
            self.interrupted = True
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        step = optimizer_updates(self.model)
        if step != self._saved_step:
            self.save(step)


def _lora_variables(model: keras.Model) -> list:
    """The variables of the layers with LoRA adapters (`Dense.enable_lora`), in order."""
    return [
        variable
        for layer in model._flatten_layers()
        if getattr(layer, "lora_enabled", False)
        for variable in layer.weights
    ]


def _rng_states(model: keras.Model) -> list:
    """The state variables of the model's dropout seed generators (not in save_weights)."""
    return [v for v in model.variables if v.path.endswith("seed_generator_state")]


class ProgressLogger(_UpdateCallback):
    """A progress line per update (step/total, loss, learning rate, examples/s, ETA) and
    TensorBoard scalars.

    On a terminal with `verbose=1` the line is redrawn in place every update; otherwise
    (a log file, or `verbose=2`) one line is printed every `every_steps` updates. The
    evaluation metrics in the logs are printed on their own line. `scalars` (a
    `progress.ScalarLog`: TensorBoard and metrics.jsonl; if given) gets `loss`,
    `learning_rate` and `examples_per_second` every `every_steps` updates. The first
    update's time (tracing and compilation) is left out of the speed.
    """

    def __init__(
        self,
        total_steps: int,
        examples_per_step: int,
        every_steps: int = 100,
        verbose: int = 1,
        scalars: ScalarLog | None = None,
        stream=None,
    ):
        super().__init__()
        self.total_steps, self.examples_per_step = total_steps, examples_per_step
        self.every_steps, self.verbose, self.scalars = max(1, every_steps), verbose, scalars
        self.stream = stream or sys.stdout

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._timer_step, self._timer = None, None  # from the end of the first update
        self._loss_mark = (0, 0.0)  # (batches, summed loss) at the last report
        self._in_place = self.verbose == 1 and is_terminal(self.stream)

    def on_train_batch_end(self, batch, logs=None):
        self._mean_loss = float((logs or {}).get("loss", math.nan))  # running mean of the epoch
        self._epoch_batches = batch + 1
        super().on_train_batch_end(batch, logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._loss_mark = (0, 0.0)

    def _period_loss(self, reset: bool) -> float:
        # Keras logs the epoch's running mean; the mean since the last report is more telling.
        total = self._mean_loss * self._epoch_batches
        batches, summed = self._loss_mark
        if reset:
            self._loss_mark = (self._epoch_batches, total)
        return (total - summed) / max(self._epoch_batches - batches, 1)

    def on_update(self, step, logs):
        now = time.perf_counter()
        if self._timer is None:
            self._timer_step, self._timer = step, now
        done = step - self._timer_step
        speed = done * self.examples_per_step / (now - self._timer) if done else None
        report = step % self.every_steps == 0 or step == self.total_steps
        line = None
        if self._in_place or report:
            loss = self._period_loss(reset=report)
            learning_rate = float(self.model.optimizer.learning_rate)
            line = progress_line(
                step,
                self.total_steps,
                {"loss": loss},
                learning_rate,
                rate=None if speed is None else (speed, "examples/s"),
                eta=None if speed is None else (self.total_steps - step) * (now - self._timer) / done,
            )
            if report and self.scalars is not None:
                scalars = {"loss": loss, "learning_rate": learning_rate}
                if speed is not None:
                    scalars["examples_per_second"] = speed
                self.scalars.write(step, scalars)
        if self.verbose and line is not None:
            if self._in_place:
                self.stream.write("\r" + line + "\033[K")
            else:
                self.stream.write(line + "\n")
            self.stream.flush()
        evaluation = {
            k[len(VALIDATION_PREFIX) :]: v for k, v in logs.items() if k.startswith(VALIDATION_PREFIX)
        }
        if self.verbose and evaluation:
            text = "  ".join(f"{name} {value:.4f}" for name, value in evaluation.items())
            self.stream.write(("\n" if self._in_place else "") + f"evaluation at step {step}: {text}\n")
            self.stream.flush()

    def on_train_end(self, logs=None):
        if self._in_place and self.verbose:
            self.stream.write("\n")
        if self.scalars is not None:
            self.scalars.close()


class EpochScalars(keras.callbacks.Callback):
    """Writes the `val_*` metrics Keras computes at the end of each epoch (a `fit` with
    `validation_data`) to `scalars` as the "eval" split, at the optimizer update they were taken."""

    def __init__(self, scalars: ScalarLog):
        super().__init__()
        self.scalars = scalars

    def on_epoch_end(self, epoch, logs=None):
        evaluation = {
            name[len(VALIDATION_PREFIX) :]: value
            for name, value in (logs or {}).items()
            if name.startswith(VALIDATION_PREFIX)
        }
        if evaluation:
            self.scalars.write(optimizer_updates(self.model), evaluation)

    def on_train_end(self, logs=None):
        self.scalars.close()
