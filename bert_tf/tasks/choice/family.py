"""The multiple-choice family: SWAG, the most likely of a context's endings.

Reads SWAG CSV files; each choice is packed `[CLS] context [SEP] ending [SEP]` (inputs
[batch, choices, seq]); a `BertMultipleChoice` head; accuracy; served as context,
endings -> probabilities and choice.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from bert_tf import fileio, preprocessing
from bert_tf.checkpoints import TaskHead
from bert_tf.errors import UsageError
from bert_tf.tasks import metrics, python_inputs
from bert_tf.tasks.choice import signatures, swag
from bert_tf.tasks.choice.model import BertMultipleChoice
from bert_tf.tasks.family import (
    SERVING_PAD_TO_MULTIPLE_OF,
    TEXT,
    Predictions,
    TaskData,
    TaskFamily,
    softmax_cross_entropy_args,
    split_file,
)
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.info import FinetunedModelInfo

MULTIPLE_CHOICE = "multiple_choice"  # the kind of this family's models


class ChoiceFamily(TaskFamily):
    """SWAG-style multiple choice (CSV files): the most likely of a context's endings."""

    name = "choice"
    kinds = (MULTIPLE_CHOICE,)
    model_class = BertMultipleChoice
    default_task = "swag"
    tasks = ("swag",)
    kind = MULTIPLE_CHOICE
    main_metric = "accuracy"

    def load(self, split: str) -> list[TaskData]:
        file = split_file(self.settings, split)
        if not file:
            return []
        labelled = split != "predict"
        num_choices = None
        for example in swag.iter_swag(file):  # validates every row
            num_choices = num_choices or len(example.endings)
            if labelled and example.label is None:
                raise TaskDataError(f"{example.guid}: the {split} data needs a label column")
        self.num_choices = num_choices
        return [TaskData(split, lambda: swag.iter_swag(file), labelled, ConversionStats())]

    def preprocessor(self):
        return preprocessing.MultipleChoicePreprocessor(
            self.tokenizer, self.settings.max_seq_length, self.pad_to_multiple_of
        )

    def signature(self, labelled: bool) -> tuple:
        x = (TEXT, tf.TensorSpec([None], tf.string))
        return (x, tf.TensorSpec([], tf.int32)) if labelled else (x,)

    def record(self, example, labelled: bool) -> tuple:
        x = (example.context, example.endings)
        return (x, example.label) if labelled else (x,)

    def python_data(self, x, y, split: str) -> TaskData:
        """(context, [ending, ...]) examples with the index of the right ending."""
        rows = python_inputs.rows(x, "x")
        labels = python_inputs.labels_for(y, len(rows))
        examples = []
        for index, (row, label) in enumerate(zip(rows, labels, strict=True)):
            if not (isinstance(row, (tuple, list)) and len(row) == 2 and isinstance(row[0], str)):
                raise UsageError(f"x[{index}] must be (context, [ending, ...]), got {row!r}")
            context, endings = row[0], list(row[1])
            if len(endings) < 2 or not all(isinstance(ending, str) for ending in endings):
                raise UsageError(f"x[{index}] needs two or more endings (strings), got {endings!r}")
            if label is not None and not (isinstance(label, int) and 0 <= label < len(endings)):
                raise UsageError(
                    f"y[{index}] is {label!r}: the index of the right ending, 0..{len(endings) - 1}"
                )
            examples.append(swag.ChoiceExample(f"x[{index}]", context, endings, label))
        return TaskData(split, lambda: iter(examples), y is not None, ConversionStats())

    def python_labels(self, outputs) -> list[int]:
        """The index of the chosen ending of every example."""
        return np.asarray(outputs).argmax(axis=-1).tolist()

    def build_model(self, encoder, preprocessor=None):
        return BertMultipleChoice(encoder, preprocessor=preprocessor)

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        return metrics.classification_metrics(
            predictions.labels, np.asarray(predictions.outputs).argmax(axis=-1), ("accuracy",)
        )

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        path = os.path.join(output_dir, f"{data.name}_predictions.tsv")
        with fileio.writing(path) as handle:
            handle.write("id\tprediction\n")
            for example, choice in zip(
                data.examples(), np.asarray(predictions.outputs).argmax(axis=-1), strict=True
            ):
                handle.write(f"{example.guid}\t{int(choice)}\n")
        return [path]

    # -- loss and metrics ----------------------------------------------------------------
    @classmethod
    def compile_args(cls, kind: str) -> dict:
        """Softmax cross-entropy over the choices."""
        return softmax_cross_entropy_args()

    # -- serving ---------------------------------------------------------------------------
    @classmethod
    def serving_preprocessor(cls, tokenizer, info: FinetunedModelInfo, seq_length: int):
        return preprocessing.MultipleChoicePreprocessor(
            tokenizer, seq_length, pad_to_multiple_of=SERVING_PAD_TO_MULTIPLE_OF
        )

    @classmethod
    def serving_signatures(cls, serving, info: FinetunedModelInfo, seq_length: int) -> dict:
        """context [batch], endings [batch, choices] -> probabilities, choice."""
        return signatures.signatures(serving)

    # LiteRT: the file's inputs are [batch, choices, length].
    litert_input_rank = 3

    @classmethod
    def head(cls, kind: str) -> TaskHead:
        """BertForMultipleChoice's classifier [1, hidden]; the original has no multiple-choice
        script: `cls/multiple_choice/output_weights`, in run_squad.py's style."""
        return TaskHead(
            "scorer", "cls/multiple_choice/output", "BertForMultipleChoice", hf_module="classifier"
        )
