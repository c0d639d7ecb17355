"""What the task models' Keras-native API does: `from_pretrained`, `compile()`, `fit` on raw text,
`predict`, `evaluate`, `save` and `export`.

The task models (`bert_tf.tasks.task_model.TaskModel`: `bert_tf.BertClassifier`,
`BertTokenClassifier`, `BertSpanLabeler`, `BertMultipleChoice`, and the models of families
of your own) hand their calls over to this module, as keras-hub's `from_preset` hands over
to a loader. A model built by `from_pretrained` carries its preprocessor
(`bert_tf.tasks.preprocessor.TaskPreprocessor`: its tokenizer and its task description,
what task.json holds); raw text goes through the task family's own preprocessor and batching
(`bert_tf.tasks.family`), the same objects the command line (`python -m bert_tf.finetune`)
uses, so dynamic padding and packing are the CLI's, and `save` writes the folder the CLI
writes.

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
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import from_pretrained as load_checkpoint
from bert_tf.errors import UsageError
from bert_tf.tasks import python_inputs, registry
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.finetuned import (
    check_save_folder,
    is_finetuned_dir,
    load_finetuned,
    read_info,
    save_finetuned,
)
from bert_tf.tasks.preprocessor import TaskPreprocessor
from bert_tf.tasks.recipe import Recipe
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.tokenization import BertTokenizer


@dataclasses.dataclass
class Compiled:
    """The arguments of the last `compile`: its optimizer, the rest (loss, metrics, ...), and
    the recipe whose optimizer `fit` builds (None: the optimizer was given)."""

    optimizer: object
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
    `options` are the family's (`TaskFamily.Options`: SQuAD's, the windows of long texts,
    a multi-label threshold); a new head keeps them in its task description.
    """
    family_class = registry.family_for_model(cls)
    path = os.fspath(path)
    if is_finetuned_dir(path) and _holds(path, cls):
        return _from_finetuned(cls, path, num_classes, label_list, max_seq_length, options)
    # Any other checkpoint gives its encoder to a new head: a pretrained one, or a model
    # fine-tuned by another family (`bert_tf.checkpoints` reads its encoder and says so).
    task = task or family_class.default_task
    task_family = registry.family_for_task(task)
    if task_family is not family_class:
        raise UsageError(
            f"task {task!r} is for bert_tf.{task_family.model_class.__name__}, not {cls.__name__}"
        )
    task, label_list = family_class.new_head(task, num_classes, label_list)
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
    if max_seq_length is None:  # the family's default, within what the model was trained for
        max_seq_length = min(family_class.default_max_seq_length, config.max_position_embeddings)
    _check_max_seq_length(max_seq_length, config)
    settings = FinetuneSettings(task=task, output_dir="-", max_seq_length=max_seq_length, options=options)
    family = family_class(settings, tokenizer)
    if family.label_list is not None:  # a GLUE task's own labels
        if label_list is not None and label_list != list(family.label_list):
            raise UsageError(f"task {task!r} has the labels {family.label_list}, not {label_list}")
    elif family.needs_label_list:
        if label_list is None:
            raise UsageError(
                f"a new {cls.__name__} head needs its classes: pass num_classes=N or label_list=[...]"
            )
        family.label_list = label_list
    elif label_list is not None:
        raise UsageError(f"task {task!r} has no classes to name: drop label_list")
    return family.build_model(encoder, preprocessor=TaskPreprocessor(family.task_info(), tokenizer))


def _check_max_seq_length(max_seq_length: int, config) -> None:
    if not 3 <= max_seq_length <= config.max_position_embeddings:
        raise UsageError(
            f"max_seq_length={max_seq_length} must be in [3, {config.max_position_embeddings}] "
            f"(the model's max_position_embeddings)"
        )


def _holds(path: str, cls) -> bool:
    """Whether the fine-tuned folder at `path` holds a model of `cls`'s family."""
    return registry.family_of_info(read_info(path)) is registry.family_for_model(cls)


def _from_finetuned(cls, path: str, num_classes, label_list, max_seq_length: int | None, options: dict):
    model = load_finetuned(path, compile=False)
    info = model.task_info
    if options:  # e.g. windows for texts longer than the model was trained on; checked by its family
        info = info.replace(**options)
        model.preprocessor.info = info
        family_of(model)
    # Its head is its classes': other classes need a new head on its encoder.
    new_head = (
        "to train a new head on its encoder, build one from a pretrained checkpoint (or pass the folder "
        "to another family's model, or to bert_tf.finetune with another --task)"
    )
    if label_list is not None and [str(label) for label in label_list] != info.label_list:
        raise UsageError(
            f"{path} was fine-tuned with the labels {info.label_list}, not {list(label_list)}; {new_head}"
        )
    if num_classes is not None and num_classes != getattr(model, "num_classes", num_classes):
        raise UsageError(f"{path} has {model.num_classes} classes, not num_classes={num_classes}; {new_head}")
    if max_seq_length is not None:  # e.g. for a transformers folder, which does not say its own
        _check_max_seq_length(max_seq_length, model.encoder.config)
        model.preprocessor.info = info.replace(max_seq_length=max_seq_length)
    return model


# --- compile and fit -----------------------------------------------------------------------


def compile_arguments(model, optimizer, loss, metrics, kwargs: dict, **recipe) -> Compiled:
    """What `TaskModel.compile` passes to Keras: the family's loss and metrics where none are
    given, and without an optimizer the recipe's (a stand-in schedule until `fit` knows its
    length: evaluate and predict need none)."""
    if loss is None and metrics is None and "loss_weights" not in kwargs:
        family_class = registry.family_for_model(type(model))
        defaults = family_class.compile_args(kind_of(model))
        loss, metrics = defaults["loss"], defaults["metrics"]
        kwargs = {**kwargs, "loss_weights": kwargs.get("loss_weights", defaults.get("loss_weights"))}
    plan = None
    if optimizer is None:
        plan = Recipe(**recipe)
        optimizer = plan.optimizer(num_train_steps=1)
    return Compiled(optimizer, dict(loss=loss, metrics=metrics, **kwargs), plan)


def kind_of(model) -> str:
    """The kind of `model`'s task: its task.json's, else its family's for its class."""
    if model.task_info is not None:
        return model.task_info.kind
    family_class = registry.family_for_model(type(model))
    return family_class.kind_of_model(model)


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

    `class_weight` (raw text): "balanced", {label name or id: weight} (others 1.0, as Keras'
    own `class_weight`) or one weight per label; applied as per-example sample weights by
    the task family, and recorded in the model's task.json.

    `output_dir`: a run folder the fit logs its curves to as the command line does (the
    training loss and learning rate, the validation metrics of each epoch; metrics.jsonl and
    TensorBoard's logs/), for `python -m bert_tf.plot` and TensorBoard. Later fits of the
    same model add to them; a folder holding another run's curves is refused.
    """
    _check_compiled(model, "fit")
    recipe = _recipe(model)
    accumulation = recipe.gradient_accumulation_steps if recipe else 1
    if not is_raw(x):  # model features: plain Keras, with the recipe's schedule over its batches
        batches = kwargs.get("steps_per_epoch") or _steps_of(x, batch_size)
        updates = batches * epochs // accumulation if batches else None
        build_schedule(model, updates)
        _add_run_log(kwargs, model, output_dir, updates, batch_size)
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
    options = {} if class_weight is None else {"class_weights": class_weight}
    family, data = task_data(
        model, x, y, "train", seed=seed, shuffle_buffer_size=shuffle_buffer_size, options=options
    )
    if class_weight is not None:  # recorded in task.json, as the command line records them
        model.preprocessor.info = model.task_info.replace(class_weights=family.class_weights)
    family.count(data)
    family.warn_if_truncated(data)
    steps_per_epoch = max(1, math.ceil(data.stats.num_features / batch_size))
    build_schedule(model, steps_per_epoch * epochs)
    dataset = family.dataset(data, batch_size // accumulation, training=True)
    validation = None
    if validation_data is not None:
        validation = _validation_dataset(model, validation_data, batch_size)
    _add_run_log(kwargs, model, output_dir, steps_per_epoch * epochs, batch_size)
    return keras_fit(
        dataset,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch * accumulation,
        validation_data=validation,
        shuffle=False,  # the dataset shuffles in its buffer
        **kwargs,
    )


def _add_run_log(fit_kwargs: dict, model, output_dir: str | None, updates: int | None, batch_size) -> None:
    """Adds to fit's callbacks those that log the curves to `output_dir` (where one is given)."""
    from bert_tf.tasks.run_log import run_log

    if output_dir is not None:
        fit_kwargs["callbacks"] = [
            *(fit_kwargs.get("callbacks") or []),
            *run_log(model, output_dir, updates, batch_size),
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
    one per `fit`); an optimizer given to `compile` has its slots built ahead, as the recipe's."""
    recipe = _recipe(model)
    if recipe is None:
        model.build_optimizer()
        return
    if not num_train_steps:
        raise UsageError(
            "compile() without an optimizer decays the learning rate over the steps fit runs, which "
            "this input does not tell: pass steps_per_epoch= to fit, or compile(optimizer=...)"
        )
    model.compile_recipe(recipe.optimizer(max(1, num_train_steps)))


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
    family, data = task_data(model, x, y, "eval")
    family.count(data)
    # A known length: Keras then reads it whole at every evaluation, without a warning.
    batches = math.ceil(data.stats.num_features / batch_size)
    return family.dataset(data, batch_size, training=False).apply(
        tf.data.experimental.assert_cardinality(batches)
    )


def predict(model, x, batch_size: int | None):
    """The model's outputs on raw text, one per example in input order (see `TaskModel.predict`)."""
    family, data = task_data(model, x, None, "predict")
    return family.python_outputs(data, family.predict(model, data, batch_size or 32))


def evaluate(model, x, y, batch_size: int | None) -> dict[str, float]:
    """The task's official metrics (and eval_loss) on raw text and labels."""
    family, data = task_data(model, x, y, "eval")
    return family.evaluate(model, data, batch_size or 32)


def save(model, directory, overwrite: bool = False) -> str:
    """The fine-tuned folder, written whole; a folder holding a fine-tuned model is replaced only
    with `overwrite` (see `bert_tf.tasks.finetuned.check_save_folder`)."""
    _preprocessor_of(model, "save")
    directory = os.fspath(directory)
    check_save_folder(directory, overwrite)
    return save_finetuned(directory, model)


def export(model, export_dir: str, overwrite: bool = False, format: str = "bert_tf") -> str:
    from bert_tf.serving.exporter import export_checkpoint
    from bert_tf.serving.task import export_task_model

    preprocessor = _preprocessor_of(model, "export")
    if format in ("huggingface", "google"):
        return export_checkpoint(format, model, os.fspath(export_dir), overwrite)
    return export_task_model(
        model, preprocessor.tokenizer, preprocessor.info, os.fspath(export_dir), overwrite=overwrite
    )


def _preprocessor_of(model, what: str) -> TaskPreprocessor:
    if model.preprocessor is None:
        raise UsageError(
            f"{what} needs the model's tokenizer and task: build it with "
            f"bert_tf.{type(model).__name__}.from_pretrained(...), or give it a "
            "preprocessor=bert_tf.tasks.preprocessor.TaskPreprocessor(info, tokenizer)"
        )
    return model.preprocessor


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


def family_of(model, seed: int = 12345, shuffle_buffer_size: int = 10_000, options: dict | None = None):
    """The task family of `model`'s task, on its task.json (preprocessor, batching, scoring),
    `seed`, `shuffle_buffer_size` and `options` (the family's, e.g. class weights)."""
    preprocessor = _preprocessor_of(model, "raw text")
    return preprocessor.family(seed=seed, shuffle_buffer_size=shuffle_buffer_size, options=options or {})


def task_data(
    model,
    x,
    y,
    split: str,
    *,
    seed: int = 12345,
    shuffle_buffer_size: int = 10_000,
    options: dict | None = None,
):
    """(the model's task family, TaskData) of raw `x` and labels `y` (None: unlabelled)."""
    preprocessor = _preprocessor_of(model, "raw text")
    if isinstance(x, tf.data.Dataset):
        x, y_from_data = _split_dataset(x)
        y = y if y is not None else y_from_data
    if split == "train":  # a new head may learn from its first data (a classifier: pairs)
        preprocessor.info = preprocessor.family_class().learn_from_python_data(preprocessor.info, x)
    family = family_of(model, seed, shuffle_buffer_size, options)
    try:
        data = family.python_data(x, y, split)
    except TaskDataError as error:  # e.g. class weights that do not fit the labels
        raise UsageError(str(error)) from None
    if not any(True for _ in data.examples()):
        raise UsageError(f"the {split} data has no examples")
    return family, data
