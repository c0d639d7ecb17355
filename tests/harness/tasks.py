"""The checks every task family runs, built-in or a user's: `run_task_test` (as keras-hub's).

A family's test describes its task once (`TaskCase`: its model class and task, raw training
and dev data that a tiny model learns, the same data as files for the command line, how its
served outputs read) and calls `run_task_test`, which checks, on a tiny checkpoint:

- `fit` on raw text learns the task (the family's main metric on the dev data);
- `save` -> `from_pretrained` gives the same outputs (1e-6);
- the task SavedModel (`bert_tf.export --kind=task`), served in a fresh process that imports
  neither bert_tf nor the family's module, gives the same outputs (1e-5);
- the command line's driver (`bert_tf.tasks.runner.run`, what `python -m bert_tf.finetune`
  runs) and Python reach the same weights for a seed (1e-6);
- its LiteRT file, where the family serves there, gives the same outputs through the interpreter.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable

import keras
import numpy as np

from bert_tf.serving.exporter import export_saved_model
from bert_tf.tasks.runner import run
from bert_tf.tasks.settings import FinetuneSettings
from tests.harness import processes


@dataclasses.dataclass
class TaskCase:
    """One family's task, as `run_task_test` drives it.

    `x`, `y`, `dev_x`, `dev_y`: raw training and dev data a tiny model learns (as `fit` takes
    them); `write_files(directory)` writes the same training data as the command line reads it
    ({"train_file": path} and any flags it needs); `serve(x)`: the served signature's keyword
    inputs of raw `x` (JSON values for the fresh-process loader) and `served(outputs)` the
    array to compare with `predict(x)`; `learnt`: the main metric's least value on the dev data.
    """

    model_class: type
    task: str
    x: list
    y: list
    dev_x: list
    dev_y: list
    write_files: Callable[[str], dict]
    serve: Callable[[list], dict]
    served: Callable[[dict], np.ndarray]
    learnt: float
    options: dict = dataclasses.field(default_factory=dict)
    head: dict = dataclasses.field(default_factory=dict)  # a new head's label_list / num_classes
    max_seq_length: int = 32
    epochs: int = 6
    learning_rate: float = 1e-3
    batch_size: int = 16
    outputs: Callable = np.asarray  # predict's outputs as an array to compare


def run_task_test(test, case: TaskCase, checkpoint: str) -> None:
    """Every check of the module docstring, on `case` and the tiny `checkpoint`."""
    root = tempfile.mkdtemp(prefix=f"task_test_{case.task.split(':')[-1]}_")
    model = _fit(case, checkpoint, seed=3)
    scores = model.evaluate(case.dev_x, case.dev_y)
    main_metric = model.preprocessor.family().main_metric
    test.assertGreater(scores[main_metric], case.learnt, f"{case.task} did not learn: {scores}")
    predicted = case.outputs(model.predict(case.dev_x))

    folder = model.save(os.path.join(root, "model"))
    reloaded = case.model_class.from_pretrained(folder)
    _assert_same(test, case.outputs(reloaded.predict(case.dev_x)), predicted, atol=1e-6)

    export_dir = export_saved_model("task", folder, os.path.join(root, "export"))
    call = {"name": "task", "export_dir": export_dir, "endpoint": "signature:serving_default"}
    served = processes.run_in_fresh_process(
        [{**call, "kwargs": case.serve(case.dev_x)}], tempfile.mkdtemp(dir=root)
    )
    test.assertEqual(list(served["__bert_tf_modules__"]), [])
    outputs = {name[len("task/") :]: value for name, value in served.items() if name.startswith("task/")}
    _assert_same(test, case.served(outputs), predicted, atol=1e-5)

    _check_same_weights_as_the_command_line(test, case, checkpoint, root)


def _assert_same(test, got, want, atol: float) -> None:
    if np.asarray(want).dtype.kind in "OUSb":  # strings (answers): equal
        test.assertEqual(np.asarray(got).tolist(), np.asarray(want).tolist())
    else:
        test.assertAllClose(got, want, atol=atol)


def _fit(case: TaskCase, checkpoint: str, seed: int):
    keras.utils.set_random_seed(seed)
    model = case.model_class.from_pretrained(
        checkpoint, task=case.task, max_seq_length=case.max_seq_length, **case.head, **case.options
    )
    model.compile(learning_rate=case.learning_rate)
    model.fit(case.x, case.y, batch_size=case.batch_size, epochs=case.epochs, seed=seed, verbose=0)
    return model


def _check_same_weights_as_the_command_line(test, case: TaskCase, checkpoint: str, root: str) -> None:
    settings = FinetuneSettings.of(
        task=case.task,
        init_checkpoint=checkpoint,
        output_dir=os.path.join(root, "cli"),
        max_seq_length=case.max_seq_length,
        train_batch_size=case.batch_size,
        num_train_epochs=case.epochs,
        learning_rate=case.learning_rate,
        seed=7,
        verbose=0,
        **case.write_files(root),
        **case.options,
    )
    run(settings)
    cli = case.model_class.from_pretrained(os.path.join(settings.output_dir, "model"))
    python = _fit(dataclasses.replace(case), checkpoint, seed=7)
    test.assertEqual(len(python.weights), len(cli.weights))
    for ours, theirs in zip(python.weights, cli.weights, strict=True):
        test.assertAllClose(ours, theirs, atol=1e-6, msg=ours.path)
