"""The classification family: GLUE and own-data classification and regression.

Reads GLUE TSV files, a GLUE data_dir or TFDS glue/*, and users' CSV/TSV/JSONL; one row
per example, packed batches; a `BertClassifier` head; GLUE's metrics and submission files;
served as `text` or `text_a`, `text_b` -> probabilities and label (or score).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import keras
import numpy as np
import tensorflow as tf

from bert_tf import fileio, preprocessing
from bert_tf.errors import UsageError
from bert_tf.models import BertClassifier
from bert_tf.preprocessing.windows import pool_windows
from bert_tf.tasks import classification, glue, metrics, python_inputs
from bert_tf.tasks.families.base import (
    TEXT,
    Predictions,
    TaskData,
    TaskFamily,
    serving_input,
    softmax_cross_entropy_args,
    split_file,
)
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.kinds import TaskKind

if TYPE_CHECKING:
    from bert_tf.tasks.finetuned import FinetunedModelInfo

logger = logging.getLogger(__name__)


def _suffix(name: str) -> str:
    return name.split("_", 1)[1] if "_" in name else ""


def is_pair_task(info: FinetunedModelInfo) -> bool:
    """Whether a saved classification/regression model reads two texts (its GLUE task's
    definition, or task.json's text_b_column)."""
    if info.text_b_column:
        return True
    try:
        return glue.get_task(info.task.lower()).text_b is not None
    except TaskDataError:  # not a GLUE task: own data, single text unless task.json says otherwise
        return False


class ClassificationFamily(TaskFamily):
    """GLUE (TSV files, a GLUE data_dir or TFDS glue/*) and users' own CSV/TSV/JSONL:
    classes (`TaskKind.CLASSIFICATION`) or one score (`TaskKind.REGRESSION`)."""

    kinds = (TaskKind.CLASSIFICATION, TaskKind.REGRESSION)
    model_class = BertClassifier
    default_task = "classification"
    tasks = (*glue.GLUE_TASKS, "classification", "regression")
    aliases = ("sst-2", "sts-b")  # GLUE's spellings
    task_json_fields = ("text_b_column", "doc_stride", "window_pooling")

    predict_by_length = True
    packable = True
    python_options = ("doc_stride", "window_pooling")
    reads_windows = True  # with settings.doc_stride: long texts in windows, logits pooled per text

    def __init__(self, settings, tokenizer):
        super().__init__(settings, tokenizer)
        task = settings.task.lower()
        self.glue = glue.get_task(task) if task not in ("classification", "regression") else None
        if settings.tfds_name and (self.glue is None or settings.tfds_name != f"glue/{self.glue.name}"):
            expected = f"glue/{self.glue.name}" if self.glue else "files (--train_file/--eval_file)"
            raise TaskDataError(
                f"--task={settings.task} reads {expected}, not --tfds_name={settings.tfds_name}; "
                "TFDS sources are glue/* (GLUE tasks), squad/v1.1 and squad/v2.0 (squad, squad_v2), "
                "conll2003 (ner)"
            )
        regression = task == "regression" or (self.glue is not None and self.glue.is_regression)
        self.kind = TaskKind.REGRESSION if regression else TaskKind.CLASSIFICATION
        self.metric_names = self.glue.metrics if self.glue else ("accuracy",)
        self.label_list = list(self.glue.label_list) if self.glue and self.glue.label_list else None
        self.pair = None  # whether examples have a second text: known from the first example
        # A text's windows are rows of their own: packed rows hold one example each.
        self.pack = self.pack and not self.windowed
        self.check_doc_stride(settings.max_seq_length - (3 if self._pair_task(settings) else 2))

    def _pair_task(self, settings) -> bool:
        """Whether the settings name a pair task (own data: a text_b_column)."""
        return bool(settings.text_b_column) or (self.glue is not None and self.glue.text_b is not None)

    @property
    def main_metric(self) -> str:
        if self.kind == TaskKind.REGRESSION:
            return "pearson"
        return self.metric_names[0]  # accuracy; Matthews correlation for CoLA

    @property
    def needs_label_list(self) -> bool:
        return self.kind == TaskKind.CLASSIFICATION

    def task_json_values(self, settings) -> dict[str, Any]:
        # Own-data pair tasks: the second text's column (GLUE tasks know theirs); windows.
        values = {"text_b_column": settings.text_b_column} if settings.text_b_column else {}
        if settings.doc_stride is not None:
            values.update(doc_stride=settings.doc_stride, window_pooling=settings.window_pooling)
        return values

    # -- sources -----------------------------------------------------------------------
    def _readers(self, split: str) -> dict[str, Callable[[], Iterator[classification.InputExample]]]:
        """split ("train", "eval", "predict") → {data name: function streaming its examples}."""
        s = self.settings
        labelled = split != "predict"
        file = split_file(s, split)
        # Each reader takes a list where rows the format allows to skip are noted (QQP's).
        if file and self.glue is not None:
            return {split: lambda skipped=None: glue.iter_examples(self.glue, file, labelled, skipped)}
        if file:
            label_column = s.label_column if labelled else None
            return {
                split: lambda skipped=None: classification.iter_table(
                    file, s.text_column, s.text_b_column, label_column
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
            collect = split == "train" and self.label_list is None and self.kind == TaskKind.CLASSIFICATION
            known = None if collect else self.label_list
            labels: set[str] = set()
            first = None
            skipped: list[int] = []
            for example in classification.validate(
                reader(skipped), known if labelled else None, self.kind == TaskKind.REGRESSION and labelled
            ):
                first = first or example
                if collect and example.label is not None:
                    labels.add(str(example.label))
            if first is None:
                raise TaskDataError(f"the {name} data has no examples")
            if skipped:
                logger.warning(
                    "the %s data: skipped %d rows with too few columns (lines %s)",
                    name,
                    len(skipped),
                    ", ".join(map(str, skipped[:10])) + (", ..." if len(skipped) > 10 else ""),
                )
            if collect:
                self.label_list = classification.label_list_from(
                    [classification.InputExample("", "", None, label) for label in labels]
                )
            if self.pair is None:
                self.pair = first.text_b is not None

            def examples(reader=reader, labelled=labelled):
                for example in reader():
                    yield example if labelled else dataclasses.replace(example, label=None)

            result.append(TaskData(name, examples, labelled, ConversionStats(num_skipped=len(skipped))))
        return result

    def restore(self, info) -> None:
        self.pair = is_pair_task(info)

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
        if y is not None and self.kind == TaskKind.CLASSIFICATION:
            labels = [self._label_name(index, label) for index, label in enumerate(labels)]
        examples = [
            classification.InputExample(f"x[{i}]", *(row if pair else (row, None)), label)
            for i, (row, label) in enumerate(zip(rows, labels, strict=True))
        ]
        examples = list(classification.validate(examples, self.label_list, self.kind == TaskKind.REGRESSION))
        return TaskData(split, lambda: iter(examples), y is not None, ConversionStats())

    def python_labels(self, outputs) -> list:
        """Label names of logits [n, classes]; regression: the scores."""
        if self.kind == TaskKind.REGRESSION:
            return np.asarray(outputs)[:, 0].tolist()
        return [self.label_list[i] for i in np.asarray(outputs).argmax(axis=-1)]

    def _label_name(self, index: int, label) -> str:
        """A label of y[index] as one of `label_list`: a name, or an id into the list."""
        names = self.label_list
        if isinstance(label, (list, tuple)):
            raise UsageError(f"y[{index}] is a list ({label!r}); a {self.kind.value} example has one label")
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
            self.label_list if self.kind == TaskKind.CLASSIFICATION else None,
            self.pad_to_multiple_of,
            doc_stride=self.settings.doc_stride,
        )

    def signature(self, labelled: bool) -> tuple:
        x = (TEXT, TEXT) if self.pair else TEXT
        if not labelled:
            return (x,)
        return (x, TEXT if self.kind == TaskKind.CLASSIFICATION else tf.TensorSpec([], tf.float32))

    def record(self, example, labelled: bool) -> tuple:
        x = (example.text_a, example.text_b or "") if self.pair else example.text_a
        if not labelled:
            return (x,)
        return (x, str(example.label) if self.kind == TaskKind.CLASSIFICATION else float(example.label))

    # -- model and outputs ---------------------------------------------------------------
    def build_model(self, encoder):
        return BertClassifier(
            encoder, num_classes=1 if self.kind == TaskKind.REGRESSION else len(self.label_list)
        )

    def gather(self, parts) -> Predictions:
        """One output per example: with windows, the mean (or max: settings.window_pooling) of
        its windows' logits (or scores)."""
        if not self.windowed:
            return super().gather(parts)
        index = np.concatenate([np.asarray(m["index"])[real] for _, _, m, real in parts])
        outputs = np.concatenate([np.asarray(o)[real] for o, _, _, real in parts])
        examples, example_of_window = np.unique(index, return_inverse=True)  # every example has windows
        pooled = pool_windows(outputs, example_of_window, len(examples), self.settings.window_pooling).numpy()
        labels = None
        if parts and parts[0][1] is not None:
            window_labels = np.concatenate([np.asarray(y)[real] for _, y, _, real in parts])
            labels = window_labels[np.unique(index, return_index=True)[1]]  # an example's windows share it
        return Predictions(pooled, labels)

    def _values(self, outputs):
        outputs = np.asarray(outputs)
        return outputs[:, 0] if self.kind == TaskKind.REGRESSION else outputs.argmax(axis=-1)

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        values = self._values(predictions.outputs)
        if self.kind == TaskKind.REGRESSION:
            return metrics.regression_metrics(predictions.labels, values)
        return metrics.classification_metrics(predictions.labels, values, self.metric_names)

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
                label = (
                    f"{float(value):.6g}" if self.kind == TaskKind.REGRESSION else self.label_list[int(value)]
                )
                handle.write(f"{example.guid}\t{label}\n")
        return [path]

    # -- loss and metrics ----------------------------------------------------------------
    @classmethod
    def compile_args(cls, kind: TaskKind) -> dict:
        """classification: softmax cross-entropy on integer labels; regression: mean squared error."""
        if kind == TaskKind.REGRESSION:
            return {
                "loss": keras.losses.MeanSquaredError(),
                "metrics": [keras.metrics.MeanAbsoluteError(name="mae")],
            }
        return softmax_cross_entropy_args()

    # -- serving ---------------------------------------------------------------------------
    @classmethod
    def serving_preprocessor(cls, tokenizer, info: FinetunedModelInfo, seq_length: int):
        if info.doc_stride is not None and info.doc_stride >= seq_length - 2:
            raise UsageError(
                f"the model reads windows every doc_stride={info.doc_stride} pieces (task.json), which "
                f"--seq_length={seq_length} cannot hold; export with --seq_length={info.doc_stride + 3} or more"
            )
        return preprocessing.TextClassifierPreprocessor(tokenizer, seq_length, doc_stride=info.doc_stride)

    @classmethod
    def serving_signatures(cls, serving, info: FinetunedModelInfo, seq_length: int) -> dict:
        """`text` or `text_a`, `text_b` (pair tasks) by default; both forms as
        `serving_single` and `serving_pair`."""
        single = tf.function(lambda text: serving._classify([text])).get_concrete_function(
            serving_input("text")
        )
        pair = tf.function(lambda text_a, text_b: serving._classify([text_a, text_b])).get_concrete_function(
            serving_input("text_a"), serving_input("text_b")
        )
        default = pair if is_pair_task(info) else single
        return {"serving_default": default, "serving_single": single, "serving_pair": pair}

    @classmethod
    def export_info(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        return {
            "pair_input": is_pair_task(info),
            **(
                {"doc_stride": info.doc_stride, "window_pooling": info.window_pooling}
                if info.doc_stride
                else {}
            ),
        }
