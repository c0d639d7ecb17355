"""What the task models' Keras-native API does: `from_pretrained`, `compile()`, `fit` on raw text,
`predict`, `evaluate`, `save` and `export`.

The task model classes (`bert_tf.BertClassifier`, `BertTokenClassifier`, `BertSpanLabeler`,
`BertMultipleChoice`) hand their calls over to this module, which installs itself into them
when imported (as keras-hub's `from_preset` hands over to a loader): the models know nothing
about files or data, and import nothing above them. A model built by
`from_pretrained` carries its tokenizer and its task description (`FinetunedModelInfo`, what
task.json holds: task, labels, casing, sequence length); raw text goes through the task
family's own preprocessor and batching (`bert_tf.tasks.families`), the same objects the
command line (`python -m bert_tf.finetune`) uses, so dynamic padding and packing are the
CLI's, and `save` writes the folder the CLI writes.

Raw inputs, per family:

- classification / regression: `x` a list (or array, or `tf.data.Dataset`) of texts, or of
  `(text_a, text_b)` pairs, or a tuple of two lists; `y` label names or ids (regression: numbers);
  multi-label (`task="multi_label"`): `y` one list of label names per example, or multi-hot
  rows; `predict` returns probabilities, `label_names` the names above the threshold;
  `fit(..., class_weight="balanced" | {label: weight} | [weights])` weighs the classes;
- token tagging: `x` a list of sentences, each a list of words (or a string, split on
  whitespace); `y` one list of tags per sentence;
- spans (SQuAD): `x` a list of `(question, context)` pairs; `y` one answer per question,
  `{"text": ..., "answer_start": ...}` or `(text, answer_start)`;
- multiple choice: `x` a list of `(context, [ending, ...])`; `y` the index of the right ending.

Example (a tiny Hugging Face checkpoint the tests ship):

>>> import bert_tf
>>> model = bert_tf.BertClassifier.from_pretrained(
...     "tests/fixtures/hf_tiny", label_list=["neg", "pos"], max_seq_length=16)
>>> model.compile()
>>> history = model.fit(["a good film", "a bad film"], ["pos", "neg"], epochs=2, verbose=0)
>>> logits = model.predict(["a good film", "what a film"])
>>> logits.shape, all(name in ("neg", "pos") for name in model.label_names(logits))
((2, 2), True)
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import sys
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.checkpoints import from_pretrained as load_checkpoint
from bert_tf.errors import UsageError
from bert_tf.models import BertClassifier
from bert_tf.models._task import install_task_api
from bert_tf.tasks import families, python_inputs
from bert_tf.tasks.families.classification import is_pair_task
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.finetuned import (
    FinetunedModelInfo,
    check_save_folder,
    is_finetuned_dir,
    load_finetuned,
    save_finetuned,
    task_info,
)
from bert_tf.tasks.kinds import TaskKind
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.tokenization import BertTokenizer


@dataclasses.dataclass
class Attached:
    """What a task model carries besides its weights: how its text becomes features."""

    tokenizer: BertTokenizer
    info: FinetunedModelInfo


@dataclasses.dataclass(frozen=True)
class Recipe:
    """`compile()` without an optimizer: the original fine-tuning recipe, whose schedule
    (warmup, then linear decay to 0) is built when `fit` knows how many updates it runs."""

    learning_rate: float = 5e-5
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    gradient_accumulation_steps: int = 1

    def __post_init__(self):
        if not self.learning_rate > 0:
            raise UsageError(f"learning_rate must be > 0, got {self.learning_rate} (BERT uses 2e-5 to 5e-5)")
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise UsageError(f"warmup_proportion must be in [0, 1), got {self.warmup_proportion}")
        if self.gradient_accumulation_steps < 1:
            raise UsageError(
                f"gradient_accumulation_steps must be >= 1, got {self.gradient_accumulation_steps}"
            )


@dataclasses.dataclass
class Compiled:
    """The arguments of the last `compile` (loss, metrics, ...) and its pending recipe, if any."""

    kwargs: dict
    recipe: Recipe | None


# --- from_pretrained ---------------------------------------------------------------------


def from_pretrained(
    cls,
    path,
    *,
    num_classes: int | None = None,
    label_list: Sequence[str] | None = None,
    task: str | None = None,
    max_seq_length: int | None = None,
    vocab_file: str | None = None,
    lower_case: bool | None = None,
    **options,
):
    """A task model of class `cls` on the checkpoint at `path`, carrying its preprocessor.

    `path` is anything the toolkit reads: a Google checkpoint folder, a Hugging Face BERT
    folder, a pretraining export or model_dir, or a fine-tuned folder (`model.save` or the
    CLI's OUTPUT_DIR/model), which brings its head, labels, vocab and casing along.
    `options` are the family's FinetuneSettings fields (`TaskFamily.python_options`: SQuAD's,
    the windows of long texts); a new head keeps them in its task description.
    """
    family_class = families.family_for_model(cls)
    # doc_stride is every family's to judge: one without windows says so.
    allowed = ("doc_stride", *family_class.python_options)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"{cls.__name__}.from_pretrained got unexpected arguments {unknown}")
    path = os.fspath(path)
    if is_finetuned_dir(path):
        return _from_finetuned(cls, path, num_classes, label_list, max_seq_length, options)
    if "threshold" in options and task != "multi_label":
        raise UsageError("threshold= is a multi-label model's; pass task='multi_label' with it")
    task = task or family_class.default_task
    try:
        task_family = families.family_for_task(task)
    except TaskDataError as error:
        raise UsageError(str(error)) from None
    if task_family is not family_class:
        raise UsageError(
            f"task {task!r} is for bert_tf.{task_family.model_class.__name__}, not {cls.__name__}"
        )
    label_list = _new_labels(cls, num_classes, label_list)
    if family_class is families.ClassificationFamily and task == "classification" and num_classes == 1:
        task = "regression"  # own data, one output: a score
    encoder, checkpoint = load_checkpoint(path, heads="encoder")
    vocab_file = vocab_file or checkpoint.vocab_file
    if not vocab_file:
        raise UsageError(
            f"{path} has no vocab.txt; pass vocab_file= (the vocab the checkpoint was trained with)"
        )
    tokenizer = BertTokenizer(
        vocab_file, lower_case=checkpoint.lower_case if lower_case is None else lower_case
    )
    config = encoder.config
    if max_seq_length is None:  # fine-tuning's defaults, within what the model was trained for
        max_seq_length = min(
            FinetuneSettings(task=task, output_dir="-").max_seq_length, config.max_position_embeddings
        )
    _check_max_seq_length(max_seq_length, config)
    settings = FinetuneSettings(task=task, output_dir="-", max_seq_length=max_seq_length, **options)
    family = families.make_family(settings, tokenizer)
    if family.label_list is not None:  # a GLUE task's own labels
        if label_list is not None and label_list != list(family.label_list):
            raise UsageError(f"task {task!r} has the labels {family.label_list}, not {label_list}")
    elif family.kind == TaskKind.REGRESSION:
        if label_list is not None:
            raise UsageError(f"task {task!r} is a regression task: it has no label_list")
    elif family.needs_label_list:
        if label_list is None:
            raise UsageError(
                f"a new {cls.__name__} head needs its classes: pass num_classes=N or label_list=[...]"
            )
        family.label_list = label_list
    model = family.build_model(encoder)
    model.attach(tokenizer, task_info(settings, family, tokenizer))
    return model


def _check_max_seq_length(max_seq_length: int, config) -> None:
    if not 3 <= max_seq_length <= config.max_position_embeddings:
        raise UsageError(
            f"max_seq_length={max_seq_length} must be in [3, {config.max_position_embeddings}] "
            f"(the model's max_position_embeddings)"
        )


def _new_labels(cls, num_classes: int | None, label_list) -> list[str] | None:
    """The class names of a new head from `label_list` or `num_classes` (ids as names);
    None for one output (regression)."""
    if label_list is not None:
        label_list = [str(label) for label in label_list]
        if not label_list:
            raise UsageError(
                "label_list is empty; give the names of the classes, e.g. label_list=['neg', 'pos']"
            )
        duplicates = sorted({label for label in label_list if label_list.count(label) > 1})
        if duplicates:
            raise UsageError(f"label_list names {duplicates} more than once; each class once")
        if num_classes is not None and num_classes != len(label_list):
            raise UsageError(
                f"num_classes={num_classes} but label_list has {len(label_list)} names; give one of them"
            )
        return label_list
    if num_classes is None:
        return None
    if num_classes < 1:
        raise UsageError(f"num_classes must be >= 1, got {num_classes}")
    if num_classes == 1 and issubclass(cls, BertClassifier):
        return None
    return [str(i) for i in range(num_classes)]


# What a user who wants another head on a fine-tuned model's encoder does.
NEW_HEAD = (
    "to train a new head on its encoder, start from a pretrained checkpoint, or write this "
    "model's encoder alone first: bert_tf.checkpoints.export_pretrained("
    "bert_tf.checkpoints.from_pretrained(PATH, heads='encoder')[0], NEW_DIR, vocab_file=PATH/vocab.txt)"
)


def _from_finetuned(cls, path: str, num_classes, label_list, max_seq_length: int | None, options: dict):
    model, tokenizer, info = load_finetuned(path, compile=False)
    if options:  # e.g. windows for texts longer than the model was trained on; checked by its family
        info = dataclasses.replace(info, **options)
        families.family_for_kind(info.kind).for_model(info, tokenizer)
    if not isinstance(model, cls):
        raise UsageError(
            f"{path} holds a {type(model).__name__} fine-tuned for task {info.task!r} ({info.kind.value}); "
            f"load it with bert_tf.{type(model).__name__}.from_pretrained, or {NEW_HEAD}"
        )
    if label_list is not None and [str(label) for label in label_list] != info.label_list:
        raise UsageError(
            f"{path} was fine-tuned with the labels {info.label_list}, not {list(label_list)}; {NEW_HEAD}"
        )
    if num_classes is not None and num_classes != model.num_classes:
        raise UsageError(f"{path} has {model.num_classes} classes, not num_classes={num_classes}; {NEW_HEAD}")
    if max_seq_length is not None:  # e.g. for a transformers folder, which does not say its own
        _check_max_seq_length(max_seq_length, model.encoder.config)
        info = dataclasses.replace(info, max_seq_length=max_seq_length)
    model.attach(tokenizer, info)
    return model


# --- compile and fit -----------------------------------------------------------------------


def compile_args(model) -> dict:
    """The family's loss and metrics for `model`."""
    from bert_tf.tasks import models

    return models.compile_args(task_kind(model))


def task_kind(model) -> TaskKind:
    """The kind of `model`'s task: its task.json's, else its class's (a one-output
    classifier scores: regression)."""
    attached = getattr(model, "_attached", None)
    if attached is not None:
        return attached.info.kind
    kinds = families.family_for_model(type(model)).kinds
    if TaskKind.REGRESSION in kinds and model.num_classes == 1:
        return TaskKind.REGRESSION
    return kinds[0]


def build_optimizer(recipe: Recipe, num_train_steps: int) -> keras.optimizers.Optimizer:
    from bert_tf.tasks import models

    return models.create_optimizer(
        recipe.learning_rate,
        num_train_steps,
        recipe.warmup_proportion,
        weight_decay=recipe.weight_decay,
        gradient_accumulation_steps=recipe.gradient_accumulation_steps,
    )


def fit(
    model,
    keras_fit,
    x,
    y,
    *,
    batch_size,
    epochs,
    validation_data,
    seed,
    shuffle_buffer_size,
    output_dir,
    **kwargs,
):
    """`model.fit` on raw text (see the module docstring); returns Keras' History.

    `output_dir`: a run folder the fit logs its curves to as the command line does (the
    training loss and learning rate, the validation metrics of each epoch; metrics.jsonl and
    TensorBoard's logs/), for `python -m bert_tf.plot` and TensorBoard. Later fits of the
    same model add to them; a folder holding another run's curves is refused.

    `class_weight` (raw text): "balanced", {label name or id: weight} (others 1.0, as Keras'
    own `class_weight`) or one weight per label; applied as per-example sample weights by
    the task family, and recorded in the model's task.json.
    """
    _check_compiled(model, "fit")
    recipe = _recipe(model)
    accumulation = recipe.gradient_accumulation_steps if recipe else 1
    if not is_raw(x):  # model features: plain Keras, with the recipe's schedule over its batches
        batches = kwargs.get("steps_per_epoch") or _steps_of(x, batch_size)
        build_schedule(model, batches * epochs // accumulation if batches else None)
        if output_dir is not None:
            kwargs["callbacks"] = [
                *(kwargs.get("callbacks") or []),
                *_run_log(
                    model, output_dir, batches * epochs // accumulation if batches else None, batch_size
                ),
            ]
        return keras_fit(
            x, y, batch_size=batch_size, epochs=epochs, validation_data=validation_data, **kwargs
        )
    if isinstance(x, tf.data.Dataset) and y is None:
        x, y = _split_dataset(x)
    if y is None:
        raise UsageError("fit on raw text needs labels: pass y=[...] (or a dataset of (text, label) pairs)")
    batch_size = batch_size or 32
    if batch_size % accumulation:
        raise UsageError(
            f"batch_size={batch_size} is not a multiple of gradient_accumulation_steps={accumulation}"
        )
    if seed is None:  # keras.utils.set_random_seed seeds Python's random too
        seed = random.randrange(2**31)
    class_weight = kwargs.pop("class_weight", None)
    if class_weight is not None and task_kind(model) not in (TaskKind.CLASSIFICATION, TaskKind.MULTI_LABEL):
        raise UsageError(f"class_weight weighs classes; a {task_kind(model).value} model has none")
    adapter, data = task_data(
        model,
        x,
        y,
        "train",
        seed=seed,
        shuffle_buffer_size=shuffle_buffer_size,
        class_weights=class_weight,
    )
    attached = attached_of(model, "fit")
    attached.info = dataclasses.replace(attached.info, class_weights=adapter.class_weights)
    adapter.count(data)
    adapter.warn_if_truncated(data)
    steps_per_epoch = max(1, math.ceil(data.stats.num_features / batch_size))
    build_schedule(model, steps_per_epoch * epochs)
    dataset = adapter.dataset(data, batch_size // accumulation, training=True)
    validation = None
    if validation_data is not None:
        validation = _validation_dataset(model, validation_data, batch_size)
    if output_dir is not None:
        run_log = _run_log(model, output_dir, steps_per_epoch * epochs, batch_size)
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), *run_log]
    return keras_fit(
        dataset,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch * accumulation,
        validation_data=validation,
        shuffle=False,  # the dataset shuffles in its buffer
        **kwargs,
    )


def _run_log(model, output_dir, total_steps: int | None, batch_size: int | None) -> list:
    """The callbacks that log a Python fit's curves into `output_dir` (see `fit`)."""
    from bert_tf.training import callbacks, progress

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


def _recipe(model) -> Recipe | None:
    compiled = getattr(model, "_compiled_with", None)
    return None if compiled is None else compiled.recipe


def _check_compiled(model, what: str) -> None:
    if not model.compiled:
        raise UsageError(
            f"{what} before compile: call model.compile() first (no arguments: the original recipe, "
            "AdamW at learning rate 5e-5 with 10% warmup and linear decay; compile(learning_rate=...) "
            "to change it)"
        )


def build_schedule(model, num_train_steps: int | None) -> None:
    """Builds the pending recipe's optimizer for `num_train_steps` optimizer updates (a new
    one per `fit`)."""
    recipe = _recipe(model)
    if recipe is None:
        return
    if not num_train_steps:
        raise UsageError(
            "compile() without an optimizer decays the learning rate over the steps fit runs, which "
            "this input does not tell: pass steps_per_epoch= to fit, or compile(optimizer=...)"
        )
    model.compile_recipe(build_optimizer(recipe, max(1, num_train_steps)))


def _steps_of(x, batch_size) -> int | None:
    if isinstance(x, tf.data.Dataset):
        cardinality = int(x.cardinality())
        return cardinality if cardinality > 0 else None
    if isinstance(x, dict):
        x = next(iter(x.values()))
    if hasattr(x, "__len__"):
        return max(1, math.ceil(len(x) / (batch_size or 32)))
    return None


def _validation_dataset(model, validation_data, batch_size: int) -> tf.data.Dataset:
    if isinstance(validation_data, tf.data.Dataset):
        x, y = _split_dataset(validation_data)
    elif isinstance(validation_data, tuple) and len(validation_data) == 2:
        x, y = validation_data
    else:
        raise UsageError(
            "validation_data takes (x, y) of raw text and labels, or a dataset of (text, label) pairs"
        )
    adapter, data = task_data(model, x, y, "eval")
    adapter.count(data)
    # A known length: Keras then reads it whole at every evaluation, without a warning.
    batches = math.ceil(data.stats.num_features / batch_size)
    return adapter.dataset(data, batch_size, training=False).apply(
        tf.data.experimental.assert_cardinality(batches)
    )


def predict(model, x, batch_size: int | None):
    """The model's outputs on raw text, one per example in input order (see `TaskModel.predict`)."""
    family, data = task_data(model, x, None, "predict")
    return family.python_outputs(data, family.predict(model, data, batch_size or 32))


def evaluate(model, x, y, batch_size: int | None) -> dict[str, float]:
    """The task's official metrics (and eval_loss) on raw text and labels."""
    adapter, data = task_data(model, x, y, "eval")
    return adapter.evaluate(model, data, batch_size or 32)


def label_names(model, outputs):
    """Label names of `predict`'s outputs, as the model's task family reads them."""
    return family_of(model).python_labels(outputs)


def save(model, directory, overwrite: bool = False) -> str:
    """The fine-tuned folder, written whole; a folder holding a fine-tuned model is replaced only
    with `overwrite` (see `bert_tf.tasks.finetuned.check_save_folder`)."""
    attached = attached_of(model, "save")
    directory = os.fspath(directory)
    check_save_folder(directory, overwrite)
    return save_finetuned(directory, model, attached.tokenizer, attached.info)


def export(model, export_dir: str, overwrite: bool = False, format: str = "bert_tf") -> str:
    from bert_tf.serving.exporter import export_checkpoint
    from bert_tf.serving.task import export_task_model

    attached = attached_of(model, "export")
    if format in ("huggingface", "google"):
        return export_checkpoint(
            format, model, attached.tokenizer, attached.info, os.fspath(export_dir), overwrite=overwrite
        )
    return export_task_model(
        model, attached.tokenizer, attached.info, os.fspath(export_dir), overwrite=overwrite
    )


def attached_of(model, what: str) -> Attached:
    attached = getattr(model, "_attached", None)
    if attached is None:
        raise UsageError(
            f"{what} needs the model's tokenizer and task: build it with "
            f"bert_tf.{type(model).__name__}.from_pretrained(...), or call model.attach(tokenizer, info)"
        )
    return attached


# --- raw inputs -> the family's TaskData -----------------------------------------------------


def is_raw(x) -> bool:
    """Whether `x` is raw text (strings, pairs, word lists), not model features."""
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        first = spec[0] if isinstance(spec, tuple) else spec
        return any(leaf.dtype == tf.string for leaf in tf.nest.flatten(first))
    if isinstance(x, dict) or x is None:
        return False
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "OUS"
    if isinstance(x, (list, tuple)) and x:
        leaf = x[0]
        while isinstance(leaf, (list, tuple, np.ndarray)) and len(leaf):
            leaf = leaf[0]
        return isinstance(leaf, (str, bytes))
    return False


def _split_dataset(dataset: tf.data.Dataset) -> tuple[list, list | None]:
    """A dataset of raw elements as Python lists: a 2-tuple element is (x, y), anything else
    is x alone (unlabelled pairs are then `((text_a, text_b),)`)."""
    labelled = isinstance(dataset.element_spec, tuple) and len(dataset.element_spec) == 2
    xs, ys = [], []
    for element in dataset.as_numpy_iterator():
        if labelled:
            xs.append(python_inputs.decode(element[0]))
            ys.append(python_inputs.decode(element[1]))
        else:
            xs.append(
                python_inputs.decode(
                    element[0] if isinstance(element, tuple) and len(element) == 1 else element
                )
            )
    return xs, (ys if labelled else None)


def family_of(model, seed: int = 12345, shuffle_buffer_size: int = 10_000, **settings) -> families.TaskFamily:
    """The task family of `model`'s task, on its task.json (preprocessor, batching, scoring)
    and `settings` (other FinetuneSettings fields, e.g. class_weights)."""
    attached = attached_of(model, "raw text")
    family = families.family_for_kind(attached.info.kind)
    return family.for_model(
        attached.info, attached.tokenizer, seed=seed, shuffle_buffer_size=shuffle_buffer_size, **settings
    )


def task_data(
    model, x, y, split: str, *, seed: int = 12345, shuffle_buffer_size: int = 10_000, class_weights=None
) -> tuple[families.TaskFamily, families.TaskData]:
    """(the model's task family, TaskData) of raw `x` and labels `y` (None: unlabelled)."""
    attached = attached_of(model, "raw text")
    if isinstance(x, tf.data.Dataset):
        x, y_from_data = _split_dataset(x)
        y = y if y is not None else y_from_data
    info = attached.info
    if (
        split == "train"
        and info.kind in (TaskKind.CLASSIFICATION, TaskKind.MULTI_LABEL)
        and not is_pair_task(info)
        and _holds_pairs(x)
    ):
        # A new own-data head learns pairs from its first training data (as the command
        # line does from a CSV's text_b_column); its task.json then says so.
        attached.info = dataclasses.replace(info, text_b_column="text_b")
    family = family_of(model, seed, shuffle_buffer_size, class_weights=class_weights)
    try:
        data = family.python_data(x, y, split)
    except TaskDataError as error:  # e.g. class weights that do not fit the labels
        raise UsageError(str(error)) from None
    if not any(True for _ in data.examples()):
        raise UsageError(f"the {split} data has no examples")
    return family, data


def _holds_pairs(x) -> bool:
    if isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], str):
        return True
    rows = x.tolist() if isinstance(x, np.ndarray) else x
    return bool(len(rows)) and isinstance(rows[0], (tuple, list))


install_task_api(sys.modules[__name__])
