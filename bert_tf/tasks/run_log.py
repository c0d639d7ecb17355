"""A Python `fit`'s curves in a run folder, as the command line logs a run's (`fit(output_dir=...)`)."""

from __future__ import annotations

import os

import keras

from bert_tf import fileio
from bert_tf.errors import UsageError
from bert_tf.tasks.finetuned import check_save_folder
from bert_tf.training import callbacks, progress


def run_log(
    model, output_dir, total_steps: int | None, batch_size: int | None
) -> list[keras.callbacks.Callback]:
    """The callbacks that log a fit of `model` into `output_dir`: the training loss and
    learning rate about every hundredth of its `total_steps` updates, the validation metrics
    of each epoch, as metrics.jsonl and TensorBoard's logs/. Later fits of the same model add
    to its run; a folder holding another run's curves is refused."""
    output_dir = os.fspath(output_dir)
    metrics_file = fileio.join(output_dir, progress.METRICS_FILE)
    if getattr(model, "_run_dir", None) != output_dir and fileio.exists(metrics_file):
        raise UsageError(
            f"output_dir={output_dir} holds the curves of another run ({progress.METRICS_FILE}); log this "
            "fit to a new folder (a later fit of the same model adds to its own)"
        )
    check_save_folder(output_dir, overwrite=False)  # no fine-tuned model or other files in it
    if getattr(model, "_run_dir", None) != output_dir:
        model._run_dir, model._run_updates = output_dir, 0
    # compile() builds a new optimizer for each fit, whose updates count from 0 again: the
    # run's steps go on from the updates its earlier fits made.
    start = callbacks.optimizer_updates(model) if model.optimizer.built else 0
    offset = model._run_updates - start
    progress.record_run(output_dir, f"{type(model).__name__}.fit in Python", model._run_updates)
    logs = progress.log_dir(output_dir)
    return [
        callbacks.ProgressLogger(
            start + (total_steps or 0),
            batch_size or 32,
            every_steps=max(1, (total_steps or 100) // 100),
            verbose=0,
            scalars=progress.ScalarLog(output_dir, "train", fileio.join(logs, "train"), step_offset=offset),
        ),
        callbacks.EpochScalars(
            progress.ScalarLog(output_dir, "eval", fileio.join(logs, "eval"), step_offset=offset)
        ),
        keras.callbacks.LambdaCallback(
            on_train_end=lambda logs: setattr(
                model, "_run_updates", offset + callbacks.optimizer_updates(model)
            )
        ),
    ]
