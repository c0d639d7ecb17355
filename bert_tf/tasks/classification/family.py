"""The classification family: GLUE and own-data classification, multi-label classification
and regression.

Reads GLUE TSV files, a GLUE data_dir or TFDS glue/*, and users' CSV/TSV/JSONL; one row
per example, packed batches; a `BertClassifier` head; GLUE's metrics and submission files;
served as `text` or `text_a`, `text_b` -> probabilities and label (or score, or the labels
above the threshold).

Multi-label classification (`--task=multi_label`, `MULTI_LABEL`) is a kind of this
family, not a family of its own: it reads the same files, makes the same features, packs
the same way and has the same head; only its labels (a set per example, multi-hot), loss
(sigmoid cross-entropy per label), metrics and outputs differ.

Class weights (`--class_weights`) weigh each training example's loss: single-label, by the
weight of its class (Keras' `class_weight`); multi-label, each label's positive term by the
label's weight (PyTorch's `pos_weight`). They are per-example sample weights, which packed
batches carry like the labels, one per example.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert_tf import fileio, preprocessing
from bert_tf.checkpoints import TaskHead
from bert_tf.cli import setting
from bert_tf.errors import UsageError
from bert_tf.preprocessing.windows import POOLINGS, pool_windows
from bert_tf.tasks import metrics as task_metrics
from bert_tf.tasks import python_inputs
from bert_tf.tasks.classification import glue, signatures, tables
from bert_tf.tasks.classification.baseline import BagOfWords
from bert_tf.tasks.classification.metrics import multi_label_metrics
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.family import (
    SERVING_PAD_TO_MULTIPLE_OF,
    TEXT,
    Baseline,
    KerasHubClassifier,
    Predictions,
    TaskData,
    TaskFamily,
    serving_doc_stride,
    softmax_cross_entropy_args,
    split_file,
)
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.info import FinetunedModelInfo

logger = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.5  # multi-label: a label is predicted when its probability is above it
# The kinds of this family's models.
CLASSIFICATION, REGRESSION, MULTI_LABEL = "classification", "regression", "multi_label"
OWN_DATA = (CLASSIFICATION, REGRESSION, MULTI_LABEL)  # the tasks of users' own files


@dataclasses.dataclass(frozen=True)
class ClassificationOptions:
    """The classification family's settings: flags, `from_pretrained` arguments, task.json fields."""

    text_column: str = setting("text", "Own data: the column of the text.")
    text_b_column: str | None = setting(None, "Own data: the column of the second text of a pair.")
    label_column: str = setting("label", "Own data: the column of the label (multi_label: the labels).")
    label_separator: str = setting(
        "|", "multi_label: what joins an example's labels in one CSV/TSV cell (JSONL takes a JSON list)."
    )
    threshold: float | None = setting(
        None,
        "multi_label: a label is predicted when its probability is above this (default 0.5, or the "
        "fine-tuned model's own); saved in task.json.",
    )
    class_weights: str | None = setting(
        None,
        "classification/multi_label: weigh the training loss per label: 'balanced' (scikit-learn's "
        "n_samples / (n_classes * count) from the training file; multi-label: negatives / positives "
        "of each label) or one weight per label, comma-separated, in label order.",
    )
    doc_stride: int | None = setting(
        None,
        "Read texts longer than --max_seq_length as overlapping windows starting every N pieces "
        "(default: off, long texts are cut), each window trained on with its text's label and "
        "combined into one answer per text. Of a pair, the second text is windowed, the first kept whole.",
    )
    window_pooling: str | None = setting(
        None,
        "With --doc_stride: a text's logits are the mean or the max of its windows' (default: mean, "
        "or the fine-tuned model's own).",
        choices=POOLINGS,
    )

    def __post_init__(self):
        if self.threshold is not None and not 0.0 < self.threshold < 1.0:
            raise UsageError(
                f"--threshold must be a probability strictly between 0 and 1, got {self.threshold}"
            )
        if not self.label_separator:
            raise UsageError(
                "--label_separator is empty; give the text that joins labels in a cell, e.g. '|'"
            )
        if self.doc_stride is not None and self.doc_stride <= 0:
            raise UsageError(
                f"--doc_stride must be a positive number of word pieces, got {self.doc_stride}; leave it "
                "unset to cut long texts at --max_seq_length instead"
            )
        if self.window_pooling is not None and self.window_pooling not in POOLINGS:
            raise UsageError(
                f"--window_pooling={self.window_pooling} is not a way to combine windows; use one of "
                f"{', '.join(POOLINGS)}"
            )


@keras.saving.register_keras_serializable(package="bert_tf")
class MultiLabelCrossentropy(keras.losses.Loss):
    """Sigmoid cross-entropy of every (example, label) from logits, averaged over both.

    Its values are per label ([batch, num_labels]), so a sample weight per example and label
    (`example_weights`: the class weights of multi-label data) weighs each term.

    >>> import numpy as np
    >>> loss = MultiLabelCrossentropy()
    >>> round(float(loss(np.array([[1.0, 0.0]]), np.array([[0.0, 0.0]]))), 4)  # log(2)
    0.6931
    """

    def __init__(self, name: str = "multi_label_crossentropy", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        return ops.binary_crossentropy(ops.cast(y_true, y_pred.dtype), y_pred, from_logits=True)


def example_weights(labels: tf.Tensor, class_weights: tf.Tensor) -> tf.Tensor:
    """The sample weights of a batch's labels under `class_weights` [num_labels].

    Class ids [examples] -> the weight of each example's class [examples]; multi-hot
    [examples, num_labels] -> the label's weight where the example has the label, 1.0 where
    it has not [examples, num_labels].
    """
    if labels.shape.rank == 1:
        return tf.gather(class_weights, labels)
    return tf.where(labels > 0, class_weights[None, :], 1.0)


def above_threshold(probabilities, threshold: float) -> np.ndarray:
    """Multi-label predictions: bool [examples, num_labels], probability above `threshold`."""
    return np.asarray(probabilities) > threshold


def _suffix(name: str) -> str:
    return name.split("_", 1)[1] if "_" in name else ""


# transformers' problem_type of each kind (BertForSequenceClassification's loss and outputs).
PROBLEM_TYPES = {
    CLASSIFICATION: "single_label_classification",
    REGRESSION: "regression",
    MULTI_LABEL: "multi_label_classification",
}
# keras-hub's BertTextClassifier's output activation for each kind (None: logits, or the score).
KERAS_HUB_ACTIVATIONS = {CLASSIFICATION: None, REGRESSION: None, MULTI_LABEL: "sigmoid"}


def is_pair_task(info: FinetunedModelInfo) -> bool:
    """Whether a saved classification/regression model reads two texts (its GLUE task's
    definition, or task.json's text_b_column)."""
    if info.option("text_b_column"):
        return True
    try:
        return glue.get_task(info.task.lower()).text_b is not None
    except TaskDataError:  # not a GLUE task: own data, single text unless task.json says otherwise
        return False


class ClassificationFamily(TaskFamily):
    """GLUE (TSV files, a GLUE data_dir or TFDS glue/*) and users' own CSV/TSV/JSONL:
    classes (kind "classification"), a set of labels ("multi_label") or one score
    ("regression")."""

    name = "classification"
    kinds = (CLASSIFICATION, REGRESSION, MULTI_LABEL)
    model_class = BertClassifier
    default_task = CLASSIFICATION
    tasks = (*glue.GLUE_TASKS, *OWN_DATA)
    aliases = ("sst-2", "sts-b")  # GLUE's spellings
    Options = ClassificationOptions
    task_json_fields = ("text_b_column", "threshold", "class_weights", "doc_stride", "window_pooling")
    # What a model fine-tuned before keeps of its task.json (its class weights are a record only).
    restored_options = ("text_b_column", "threshold", "doc_stride", "window_pooling")

    predict_by_length = True
    packable = True
    reads_windows = True  # with options.doc_stride: long texts in windows, logits pooled per text
    litert_client = "bert_tf.tasks.classification.litert:LiteRTClassifier"

    def __init__(self, settings, tokenizer):
        super().__init__(settings, tokenizer)
        options = self.options
        task = settings.task.lower()
        self.glue = glue.get_task(task) if task not in OWN_DATA else None
        if settings.tfds_name and (self.glue is None or settings.tfds_name != f"glue/{self.glue.name}"):
            expected = f"glue/{self.glue.name}" if self.glue else "files (--train_file/--eval_file)"
            raise TaskDataError(
                f"--task={settings.task} reads {expected}, not --tfds_name={settings.tfds_name}"
            )
        self.kind = self.kind_of(task)
        self.metric_names = self.glue.metrics if self.glue else ("accuracy",)
        self.label_list = list(self.glue.label_list) if self.glue and self.glue.label_list else None
        self.pair = None  # whether examples have a second text: known from the first example
        # Multi-label: the decision threshold (a fine-tuned model's own unless the options
        # give one: see `restore`).
        self.threshold = options.threshold or DEFAULT_THRESHOLD
        self.window_pooling = options.window_pooling or "mean"
        # One weight per label once the training data is read (`load`, `python_data`).
        self.class_weights: list[float] | None = None
        if options.class_weights is not None and self.kind == REGRESSION:
            raise UsageError(
                f"--class_weights weighs classes; task {settings.task!r} is a regression task, which has none"
            )
        if options.threshold is not None and not self.multi_label:
            raise UsageError(
                f"--threshold decides a multi_label task's labels; task {settings.task!r} predicts one label "
                "(the most probable): drop --threshold, or pass --task=multi_label"
            )
        # A text's windows are rows of their own: packed rows hold one example each.
        self.pack = self.pack and not self.windowed
        self.check_doc_stride(self.settings.max_seq_length - (3 if self._pair_task() else 2))

    @classmethod
    def kind_of(cls, task: str) -> str:
        task = task.lower()
        if task in OWN_DATA:
            return task
        return REGRESSION if glue.get_task(task).is_regression else CLASSIFICATION

    @classmethod
    def kind_of_model(cls, model) -> str:
        """A classifier of one output scores (regression); of more, it classifies."""
        return REGRESSION if model.num_classes == 1 else CLASSIFICATION

    @classmethod
    def new_head(cls, task: str, num_classes: int | None, label_list) -> tuple[str, list[str] | None]:
        """(task, class names) of a new head (`from_pretrained`): own data of one output is
        regression, which has no class names."""
        if task == CLASSIFICATION and num_classes == 1 and label_list is None:
            return REGRESSION, None
        return super().new_head(task, num_classes, label_list)

    @classmethod
    def learn_from_python_data(cls, info: FinetunedModelInfo, x) -> FinetunedModelInfo:
        """A new own-data head learns pairs from its first training data (as the command line
        does from a CSV's text_b_column); its task.json then says so."""
        if info.kind != REGRESSION and not is_pair_task(info) and python_inputs.holds_pairs(x):
            return info.replace(text_b_column="text_b")
        return info

    @property
    def multi_label(self) -> bool:
        return self.kind == MULTI_LABEL

    def _pair_task(self) -> bool:
        """Whether the settings name a pair task (own data: a text_b_column)."""
        return bool(self.options.text_b_column) or (self.glue is not None and self.glue.text_b is not None)

    @property
    def main_metric(self) -> str:
        if self.kind == REGRESSION:
            return "pearson"
        if self.multi_label:
            return "micro_f1"
        return self.metric_names[0]  # accuracy; Matthews correlation for CoLA

    @property
    def needs_label_list(self) -> bool:
        return self.kind != REGRESSION

    def task_json_values(self) -> dict[str, Any]:
        # Own-data pair tasks: the second text's column (GLUE tasks know theirs); multi-label:
        # the threshold; the class weights training used, for the record; windows.
        options = self.options
        values: dict[str, Any] = {"text_b_column": options.text_b_column} if options.text_b_column else {}
        if self.multi_label:
            values["threshold"] = self.threshold
        if self.class_weights is not None:
            values["class_weights"] = list(self.class_weights)
        if options.doc_stride is not None:
            values.update(doc_stride=options.doc_stride, window_pooling=self.window_pooling)
        return values

    # -- sources -----------------------------------------------------------------------
    def _readers(self, split: str) -> dict[str, Callable[[], Iterator[tables.InputExample]]]:
        """split ("train", "eval", "predict") → {data name: function streaming its examples}."""
        s = self.settings
        labelled = split != "predict"
        file = split_file(s, split)
        # Each reader takes a list where rows the format allows to skip are noted (QQP's).
        if file and self.glue is not None:
            return {split: lambda skipped=None: glue.iter_examples(self.glue, file, labelled, skipped)}
        if file:
            label_column = self.options.label_column if labelled else None
            return {
                split: lambda skipped=None: tables.iter_table(
                    file,
                    self.options.text_column,
                    self.options.text_b_column,
                    label_column,
                    self.options.label_separator if self.multi_label else None,
                )
            }
        if self.glue is None:
            return {}
        if s.data_dir:  # a GLUE task directory as distributed
            splits = {"train": ("train",), "eval": self.glue.eval_splits, "predict": self.glue.test_splits}[
                split
            ]
            files = glue.split_files(self.glue, s.data_dir)
            readers = {
                name: (
                    lambda skipped=None, path=files[name]: glue.iter_examples(
                        self.glue, path, labelled, skipped
                    )
                )
                for name in splits
                if fileio.isfile(files[name])
            }
        elif s.tfds_name or s.tfds_data_dir:
            tfds_splits = {"eval": self.glue.tfds_eval_splits, "predict": self.glue.tfds_test_splits}
            splits = tfds_splits.get(split, ("train",))
            readers = {
                name: (
                    lambda skipped=None, name=name: glue.iter_tfds_examples(self.glue, name, s.tfds_data_dir)
                )
                for name in splits
            }
        else:
            return {}
        # MNLI: "eval" is the matched dev set, "eval_mismatched" the other one.
        return {
            (split if index == 0 else f"{split}_{_suffix(name)}"): reader
            for index, (name, reader) in enumerate(readers.items())
        }

    def load(self, split: str) -> list[TaskData]:
        """The split's data, after one validating pass (labels, empty texts, the label set)."""
        result = []
        labelled = split != "predict"
        for name, reader in self._readers(split).items():
            collect = split == "train" and self.label_list is None and self.needs_label_list
            known = None if collect else self.label_list
            skipped: list[int] = []
            examples = tables.validate(
                reader(skipped), known if labelled else None, self.kind == REGRESSION and labelled
            )
            first = next(examples, None)
            if first is None:
                raise TaskDataError(f"the {name} data has no examples")
            # The training data's labels: the label set, and the counts of balanced class weights.
            counts, total = tables.count_labels(itertools.chain([first], examples))
            if skipped:
                logger.warning(
                    "the %s data: skipped %d rows with too few columns (lines %s)",
                    name,
                    len(skipped),
                    ", ".join(map(str, skipped[:10])) + (", ..." if len(skipped) > 10 else ""),
                )
            if collect and not counts:
                raise TaskDataError(
                    f"the {name} data has no labels (every example's label list is empty), so the task "
                    "has no label set; label the examples, or give the labels (label_list) yourself"
                )
            if collect:
                self.label_list = tables.label_list_from(
                    [tables.InputExample("", "", None, label) for label in counts]
                )
            if split == "train" and self.needs_label_list:
                self.class_weights = self._class_weights(counts, total)
            if self.pair is None:
                self.pair = first.text_b is not None

            def examples(reader=reader, labelled=labelled):
                for example in reader():
                    yield example if labelled else dataclasses.replace(example, label=None)

            result.append(TaskData(name, examples, labelled, ConversionStats(num_skipped=len(skipped))))
        return result

    def restore(self, info) -> None:
        self.pair = is_pair_task(info)
        if self.options.threshold is None:  # the options' threshold wins
            self.threshold = info.option("threshold", DEFAULT_THRESHOLD)

    def _class_weights(self, counts, num_examples: int) -> list[float] | None:
        """The settings' class weights (None: unweighted) for the training data's label counts."""
        spec = self.options.class_weights
        if spec is None:
            return None
        return tables.class_weights(spec, self.label_list, counts, num_examples, self.multi_label)

    def python_data(self, x, y, split: str) -> TaskData:
        """Texts, or (text_a, text_b) pairs (or a tuple of two lists), with label names or ids
        (regression: numbers)."""
        if isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], str):
            first, second = python_inputs.rows(x[0], "x"), python_inputs.rows(x[1], "x")
            if len(first) != len(second):
                raise UsageError(
                    f"x holds {len(first)} first texts and {len(second)} second texts; give one of each per pair"
                )
            rows = list(zip(first, second, strict=True))
        else:
            rows = python_inputs.rows(x, "x")
        pair = bool(rows) and not isinstance(rows[0], str)
        for index, row in enumerate(rows):
            if isinstance(row, str) == pair or (
                pair and (len(row) != 2 or not all(isinstance(text, str) for text in row))
            ):
                raise UsageError(
                    f"x[{index}] is {row!r}: give every example as a text, or every one as a (text_a, text_b) pair"
                )
        if bool(self.pair) != pair:
            wanted = "(text_a, text_b) pairs" if self.pair else "single texts"
            raise UsageError(f"this model reads {wanted}; x holds {'pairs' if pair else 'single texts'}")
        labels = python_inputs.labels_for(y, len(rows))
        if y is not None and self.multi_label:
            labels = [self._label_set(index, label) for index, label in enumerate(labels)]
        elif y is not None and self.kind == CLASSIFICATION:
            labels = [self._label_name(index, label) for index, label in enumerate(labels)]
        examples = [
            tables.InputExample(f"x[{i}]", *(row if pair else (row, None)), label)
            for i, (row, label) in enumerate(zip(rows, labels, strict=True))
        ]
        examples = list(tables.validate(examples, self.label_list, self.kind == REGRESSION))
        if split == "train" and y is not None and self.needs_label_list:
            self.class_weights = self._class_weights(*tables.count_labels(examples))
        return TaskData(split, lambda: iter(examples), y is not None, ConversionStats())

    def python_outputs(self, data: TaskData, predictions: Predictions):
        """Logits [n, classes] (regression: scores [n, 1]); multi-label: the probabilities."""
        if self.multi_label:
            return tf.sigmoid(predictions.outputs).numpy()
        return predictions.outputs

    def python_labels(self, outputs) -> list:
        """Label names of logits [n, classes]; regression: the scores; multi-label: the list of
        names whose probability is above the threshold, for each example."""
        if self.kind == REGRESSION:
            return np.asarray(outputs)[:, 0].tolist()
        if self.multi_label:
            return [
                [name for name, on in zip(self.label_list, row, strict=True) if on]
                for row in above_threshold(outputs, self.threshold)
            ]
        return [self.label_list[i] for i in np.asarray(outputs).argmax(axis=-1)]

    def _label_set(self, index: int, labels) -> tuple[str, ...]:
        """The labels of y[index] of a multi-label example: a list of label names, or a
        multi-hot row (numbers, one per label, 0 or 1)."""
        names = self.label_list
        if isinstance(labels, np.ndarray):
            labels = labels.tolist()
        if not isinstance(labels, (list, tuple)):
            raise UsageError(
                f"y[{index}] is {labels!r}; a multi_label example takes a list of its label names "
                f"([] for none), or a multi-hot row of {len(names)} numbers, 0 or 1"
            )
        if labels and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in labels):
            if len(labels) != len(names) or not set(labels) <= {0, 1}:
                raise UsageError(
                    f"y[{index}] is {labels!r}: a row of numbers is read as multi-hot, which takes "
                    f"{len(names)} numbers (one per label of {names}), each 0 or 1"
                )
            return tuple(name for name, on in zip(names, labels, strict=True) if on)
        return tuple(dict.fromkeys(self._label_name(index, label) for label in labels))

    def _label_name(self, index: int, label) -> str:
        """A label of y[index] as one of `label_list`: a name, or an id into the list."""
        names = self.label_list
        if isinstance(label, (list, tuple)):
            raise UsageError(
                f"y[{index}] is a list ({label!r}); a {self.kind} example has one label (for "
                "several labels per example, build the model with task='multi_label')"
            )
        if isinstance(label, int) and not isinstance(label, bool):
            if not 0 <= label < len(names):
                raise UsageError(f"y[{index}] is label id {label}, outside 0..{len(names) - 1} of {names}")
            return names[label]
        if str(label) not in names:
            raise UsageError(
                f"y[{index}] is {label!r}, not one of the model's labels {names}; fix it, or build the "
                "model with a label_list that includes it"
            )
        return str(label)

    def preprocessor(self):
        return preprocessing.TextClassifierPreprocessor(
            self.tokenizer,
            self.settings.max_seq_length,
            self.label_list if self.kind != REGRESSION else None,
            self.pad_to_multiple_of,
            multi_label=self.multi_label,
            doc_stride=self.options.doc_stride,
        )

    def signature(self, labelled: bool) -> tuple:
        x = (TEXT, TEXT) if self.pair else TEXT
        if not labelled:
            return (x,)
        if self.multi_label:
            return (x, tf.TensorSpec([None], tf.string))  # the example's label names
        return (x, TEXT if self.kind == CLASSIFICATION else tf.TensorSpec([], tf.float32))

    def record(self, example, labelled: bool) -> tuple:
        x = (example.text_a, example.text_b or "") if self.pair else example.text_a
        if not labelled:
            return (x,)
        if self.multi_label:
            return (x, list(example.label))
        return (x, str(example.label) if self.kind == CLASSIFICATION else float(example.label))

    def dataset(self, data: TaskData, batch_size: int, training: bool = False) -> tf.data.Dataset:
        """The family's batches for Keras; training with class weights: `(inputs, labels,
        sample_weight)`, the weights of `example_weights` (one per example, packed or not)."""
        dataset = super().dataset(data, batch_size, training)
        if not training or self.class_weights is None:
            return dataset
        weights = tf.constant(self.class_weights, tf.float32)
        return dataset.map(lambda inputs, labels: (inputs, labels, example_weights(labels, weights)))

    # -- model and outputs ---------------------------------------------------------------
    def build_model(self, encoder, preprocessor=None):
        return BertClassifier(
            encoder,
            num_classes=1 if self.kind == REGRESSION else len(self.label_list),
            preprocessor=preprocessor,
        )

    def gather(self, parts) -> Predictions:
        """One output per example: with windows, the mean (or max: options.window_pooling) of
        its windows' logits (or scores)."""
        if not self.windowed:
            return super().gather(parts)
        index = np.concatenate([np.asarray(m["index"])[real] for _, _, m, real in parts])
        outputs = np.concatenate([np.asarray(o)[real] for o, _, _, real in parts])
        examples, example_of_window = np.unique(index, return_inverse=True)  # every example has windows
        pooled = pool_windows(outputs, example_of_window, len(examples), self.window_pooling).numpy()
        labels = None
        if parts and parts[0][1] is not None:
            window_labels = np.concatenate([np.asarray(y)[real] for _, y, _, real in parts])
            labels = window_labels[np.unique(index, return_index=True)[1]]  # an example's windows share it
        return Predictions(pooled, labels)

    def _values(self, outputs):
        """Scores [n] (regression), class ids [n], or multi-label predictions bool [n, labels]."""
        outputs = np.asarray(outputs)
        if self.multi_label:
            return above_threshold(tf.sigmoid(outputs).numpy(), self.threshold)
        return outputs[:, 0] if self.kind == REGRESSION else outputs.argmax(axis=-1)

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        return self._metrics(predictions.labels, self._values(predictions.outputs))

    def _metrics(self, labels, values) -> dict[str, float]:
        """The task's metrics of predicted `values` (scores, class ids or multi-hot rows)."""
        if self.kind == REGRESSION:
            return task_metrics.regression_metrics(labels, values)
        if self.multi_label:
            return multi_label_metrics(labels, values, self.label_list)
        return task_metrics.classification_metrics(labels, values, self.metric_names)

    def fit_baseline(self, train: TaskData) -> Baseline:
        """TF-IDF of word 1-2-grams with logistic regression (one-vs-rest for multi-label, ridge
        for regression), fitted on a sample of at most `MAX_TRAINING_ROWS` training examples."""
        model = BagOfWords.fit(train.examples(), self.kind, self.label_list, seed=self.settings.seed)

        def score(data: TaskData) -> dict[str, float]:
            examples = list(data.examples())
            labels = model.targets(example.label for example in examples)
            return self._metrics(labels, model.predict(examples))

        return Baseline("bag_of_words", model.description, score, model.num_examples, model.num_fitted)

    def majority_baseline(self, predictions: Predictions) -> tuple[str, float] | None:
        """(label, accuracy) of always answering the scored data's commonest class: the best
        score of a model that gives every text the same answer. None where the task's scores
        have no accuracy (regression, multi-label, CoLA's Matthews correlation)."""
        if self.kind != CLASSIFICATION or "accuracy" not in self.metric_names:
            return None
        counts = np.bincount(np.asarray(predictions.labels, np.int64), minlength=len(self.label_list))
        commonest = int(counts.argmax())  # of equally common classes, the first in label order
        return self.label_list[commonest], float(counts[commonest] / counts.sum())

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        values = self._values(predictions.outputs)
        if self.glue is not None:
            names = self.glue.submission_names
            name = names[1] if data.name.endswith("mismatched") and len(names) > 1 else names[0]
            # Leaderboard files for the test sets; eval_<name>.tsv for the dev sets.
            file_name = f"{name}.tsv" if data.name.startswith("predict") else f"eval_{name}.tsv"
            path = os.path.join(output_dir, file_name)
            glue.write_submission(path, self.glue, data.examples(), values)
            return [path]
        path = os.path.join(output_dir, f"{data.name}_predictions.tsv")
        with fileio.writing(path) as handle:
            handle.write("id\tprediction\n")
            for example, value in zip(data.examples(), values, strict=True):
                if self.kind == REGRESSION:
                    label = f"{float(value):.6g}"
                elif self.multi_label:  # the labels above the threshold, joined as the input's cells
                    label = self.options.label_separator.join(np.asarray(self.label_list)[value])
                else:
                    label = self.label_list[int(value)]
                handle.write(f"{example.guid}\t{label}\n")
        return [path]

    # -- loss and metrics ----------------------------------------------------------------
    @classmethod
    def compile_args(cls, kind: str) -> dict:
        """classification: softmax cross-entropy on integer labels; regression: mean squared
        error; multi-label: sigmoid cross-entropy per label, on multi-hot labels."""
        if kind == REGRESSION:
            return {
                "loss": keras.losses.MeanSquaredError(),
                "metrics": [keras.metrics.MeanAbsoluteError(name="mae")],
            }
        if kind == MULTI_LABEL:
            return {
                "loss": MultiLabelCrossentropy(),
                # Of every (example, label), on logits: above 0 is a probability above 0.5.
                "metrics": [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)],
            }
        return softmax_cross_entropy_args()

    # -- serving ---------------------------------------------------------------------------
    @classmethod
    def serving_preprocessor(cls, tokenizer, info: FinetunedModelInfo, seq_length: int):
        doc_stride = serving_doc_stride(info, seq_length)
        return preprocessing.TextClassifierPreprocessor(
            tokenizer, seq_length, pad_to_multiple_of=SERVING_PAD_TO_MULTIPLE_OF, doc_stride=doc_stride
        )

    @classmethod
    def serving_signatures(cls, serving, info: FinetunedModelInfo, seq_length: int) -> dict:
        """`text` or `text_a`, `text_b` (pair tasks) by default; both forms as
        `serving_single` and `serving_pair` (see `bert_tf.tasks.classification.signatures`)."""
        return signatures.signatures(serving, default_pair=is_pair_task(info))

    @classmethod
    def export_info(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        extra = {"pair_input": is_pair_task(info)}
        if info.kind == MULTI_LABEL:
            extra["threshold"] = info.option("threshold", DEFAULT_THRESHOLD)
        if info.option("doc_stride"):
            extra.update(
                doc_stride=info.option("doc_stride"), window_pooling=info.option("window_pooling", "mean")
            )
        return extra

    @classmethod
    def litert_packed(cls, info: FinetunedModelInfo) -> bool:
        return True  # BertClassifier reads packed rows

    @classmethod
    def litert_info(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        # A multi-label model's decision threshold; a model trained on windows (the file reads
        # one window: a long text's first seq_length pieces).
        extra = {"threshold": info.option("threshold", DEFAULT_THRESHOLD)} if info.kind == MULTI_LABEL else {}
        if info.option("doc_stride"):
            extra["doc_stride"] = info.option("doc_stride")
        return extra

    @classmethod
    def head(cls, kind: str) -> TaskHead:
        """run_classifier.py's `output_weights`; transformers' BertForSequenceClassification,
        its problem_type telling classes from a score."""
        return TaskHead(
            "classifier",
            "output",
            "BertForSequenceClassification",
            PROBLEM_TYPES[kind],
            hf_module="classifier",
        )

    @classmethod
    def keras_hub_classifier(cls, model, info: FinetunedModelInfo) -> KerasHubClassifier:
        """keras-hub's BertTextClassifier: dropout on the pooled output, then a dense, with logits
        out (classification), the score (regression) or a sigmoid per label (multi-label)."""
        dense = model.get_layer(cls.head(info.kind).layer)
        return KerasHubClassifier(
            keras.ops.convert_to_numpy(dense.kernel),
            keras.ops.convert_to_numpy(dense.bias),
            activation=KERAS_HUB_ACTIVATIONS[info.kind],
        )
