"""The token family: CoNLL-2003 NER, a tag per word.

Reads CoNLL files or TFDS conll2003; a word is tagged at its first word piece (the others
get `IGNORE_LABEL`, which the loss and `MaskedAccuracy` skip); a `BertTokenClassifier` head;
seqeval-style entity F1; served as text -> entities with character offsets.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert_tf import preprocessing
from bert_tf.checkpoints import TaskHead
from bert_tf.cli import setting
from bert_tf.errors import UsageError
from bert_tf.tasks import python_inputs
from bert_tf.tasks.family import (
    SERVING_PAD_TO_MULTIPLE_OF,
    Predictions,
    TaskData,
    TaskFamily,
    serving_doc_stride,
    split_file,
)
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.info import FinetunedModelInfo
from bert_tf.tasks.token import conll, signatures
from bert_tf.tasks.token.metrics import ner_metrics
from bert_tf.tasks.token.model import BertTokenClassifier

TOKEN = "token"  # the kind of this family's models


@dataclasses.dataclass(frozen=True)
class TokenOptions:
    """The token family's settings: flags, `from_pretrained` arguments and task.json fields."""

    doc_stride: int | None = setting(
        None,
        "Read sentences longer than --max_seq_length as overlapping windows starting every N pieces "
        "(default: off, long sentences are cut), each word tagged from the window where it has the "
        "most context.",
    )

    def __post_init__(self):
        if self.doc_stride is not None and self.doc_stride <= 0:
            raise UsageError(
                f"--doc_stride must be a positive number of word pieces, got {self.doc_stride}; leave it "
                "unset to cut long texts at --max_seq_length instead"
            )


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedAccuracy(keras.metrics.Mean):
    """Accuracy of per-token predictions over the positions whose label is not -1.

    Example:

    >>> import numpy as np
    >>> metric = MaskedAccuracy()
    >>> _ = metric.update_state(np.array([[1, -1, 0]]), np.array([[[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]]))
    >>> float(metric.result())  # position 0 right, position 2 wrong, position 1 ignored
    0.5
    """

    def __init__(self, name: str = "accuracy", ignore_label: int = preprocessing.IGNORE_LABEL, **kwargs):
        super().__init__(name=name, **kwargs)
        self.ignore_label = ignore_label

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), y_true), "float32")
        weight = ops.cast(ops.not_equal(y_true, self.ignore_label), "float32")
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, "float32")
        return super().update_state(correct, sample_weight=weight)

    def get_config(self):
        return {**super().get_config(), "ignore_label": self.ignore_label}


class TokenFamily(TaskFamily):
    """CoNLL-2003 NER (CoNLL files or TFDS conll2003): a tag per word."""

    name = "token"
    kinds = (TOKEN,)
    model_class = BertTokenClassifier
    default_task = "ner"
    tasks = ("ner",)
    Options = TokenOptions
    kind = TOKEN
    main_metric = "f1"
    keep = ("word_positions", "num_words")
    ignore_label = preprocessing.IGNORE_LABEL
    task_json_fields = ("doc_stride",)
    reads_windows = True  # with options.doc_stride: each word tagged from its max-context window

    def __init__(self, settings, tokenizer):
        super().__init__(settings, tokenizer)
        self.check_doc_stride(self.settings.max_seq_length - 2)

    def task_json_values(self) -> dict:
        return {"doc_stride": self.options.doc_stride} if self.options.doc_stride is not None else {}

    def load(self, split: str) -> list[TaskData]:
        s = self.settings
        file = split_file(s, split)
        labelled = split != "predict"
        if file:

            def reader():
                return conll.iter_conll(file, labelled=labelled)

        elif s.tfds_name:
            tfds_split = {"train": "train", "eval": "validation", "predict": "test"}[split]

            def reader():
                return conll.iter_tfds_sentences(s.tfds_name, tfds_split, s.tfds_data_dir)

        else:
            return []
        if split == "train":
            self.label_list = conll.label_list_from(reader())
        elif labelled and self.label_list is not None:
            _check_tags(reader(), self.label_list, file or s.tfds_name)
        return [TaskData(split, reader, labelled, ConversionStats())]

    @property
    def needs_label_list(self) -> bool:
        return True

    def preprocessor(self):
        return preprocessing.TokenTaggerPreprocessor(
            self.tokenizer,
            self.settings.max_seq_length,
            self.label_list,
            self.pad_to_multiple_of,
            doc_stride=self.options.doc_stride,
        )

    def signature(self, labelled: bool) -> tuple:
        words = tf.TensorSpec([None], tf.string)
        return (words, tf.TensorSpec([None], tf.string)) if labelled else (words,)

    def record(self, sentence, labelled: bool) -> tuple:
        return (sentence.words, sentence.tags) if labelled else (sentence.words,)

    def python_data(self, x, y, split: str) -> TaskData:
        """Sentences as lists of words (or strings, split on whitespace), with one tag per word."""
        sentences_words = [
            row.split() if isinstance(row, str) else list(row) for row in python_inputs.rows(x, "x")
        ]
        tags = python_inputs.labels_for(y, len(sentences_words))
        known = set(self.label_list)
        sentences = []
        for index, (words, sentence_tags) in enumerate(zip(sentences_words, tags, strict=True)):
            if not words:
                raise UsageError(f"x[{index}] has no words")
            if sentence_tags is not None:
                if isinstance(sentence_tags, str):
                    raise UsageError(
                        f"y[{index}] is one tag ({sentence_tags!r}); give one tag per word of x[{index}]"
                    )
                sentence_tags = [str(tag) for tag in sentence_tags]
                if len(sentence_tags) != len(words):
                    raise UsageError(
                        f"x[{index}] has {len(words)} words but y[{index}] has {len(sentence_tags)} tags"
                    )
                unknown = sorted(set(sentence_tags) - known)
                if unknown:
                    raise UsageError(
                        f"y[{index}] has tags {unknown} that are not the model's {self.label_list}"
                    )
            sentences.append(conll.Sentence(words, sentence_tags, index))
        return TaskData(split, lambda: iter(sentences), y is not None, ConversionStats())

    def python_labels(self, outputs) -> list[list[str]]:
        """One tag per word of every sentence, from its per-word logits."""
        return conll.word_predictions(outputs, self.label_list)

    def build_model(self, encoder, preprocessor=None):
        return BertTokenClassifier(encoder, num_classes=len(self.label_list), preprocessor=preprocessor)

    def gather(self, parts) -> Predictions:
        """Per sentence, its words' logits at their first pieces (NaN for words cut by
        max_seq_length); with windows, each from the one window that holds it as max context."""
        word_logits: dict[int, np.ndarray] = {}
        for outputs, _, meta, real in parts:
            logits = np.asarray(outputs)
            positions = meta["word_positions"]
            positions = positions.to_list() if hasattr(positions, "to_list") else np.asarray(positions)
            for row in np.flatnonzero(real):
                where = np.asarray(positions[row][: int(meta["num_words"][row])], dtype=np.int64)
                index = int(meta["index"][row])
                if index not in word_logits:
                    word_logits[index] = np.full([len(where), logits.shape[-1]], np.nan)
                read = where >= 0
                word_logits[index][read] = logits[row, where[read]]
        return Predictions([word_logits[index] for index in sorted(word_logits)])

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        predicted = conll.word_predictions(predictions.outputs, self.label_list)
        return ner_metrics([sentence.tags for sentence in data.examples()], predicted)

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        path = os.path.join(output_dir, f"{data.name}_predictions.txt")
        conll.write_predictions(
            path, data.examples(), conll.word_predictions(predictions.outputs, self.label_list)
        )
        return [path]

    # -- loss and metrics ----------------------------------------------------------------
    @classmethod
    def compile_args(cls, kind: str) -> dict:
        """Cross-entropy averaged over the labelled pieces only (IGNORE_LABEL is skipped)."""
        return {
            "loss": keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, ignore_class=preprocessing.IGNORE_LABEL, reduction="mean_with_sample_weight"
            ),
            "metrics": [MaskedAccuracy()],
        }

    # -- serving ---------------------------------------------------------------------------
    @classmethod
    def serving_preprocessor(cls, tokenizer, info: FinetunedModelInfo, seq_length: int):
        doc_stride = serving_doc_stride(info, seq_length)
        return preprocessing.TokenTaggerPreprocessor(
            tokenizer, seq_length, pad_to_multiple_of=SERVING_PAD_TO_MULTIPLE_OF, doc_stride=doc_stride
        )

    @classmethod
    def serving_signatures(cls, serving, info: FinetunedModelInfo, seq_length: int) -> dict:
        """text -> entity_text, entity_label, entity_start, entity_end, entity_score, num_entities."""
        return signatures.signatures(serving)

    @classmethod
    def litert_info(cls, info: FinetunedModelInfo) -> dict:
        return {"doc_stride": info.option("doc_stride")} if info.option("doc_stride") else {}

    @classmethod
    def head(cls, kind: str) -> TaskHead:
        """BertForTokenClassification's classifier (no pooler); the original has no tagging
        script: `cls/token/output_weights` [tags, hidden], in run_squad.py's style."""
        return TaskHead(
            "classifier",
            "cls/token/output",
            "BertForTokenClassification",
            pooler=False,
            hf_module="classifier",
        )


def _check_tags(sentences: Iterable[conll.Sentence], label_list, source) -> None:
    known = set(label_list)
    for sentence in sentences:
        for word, tag in zip(sentence.words, sentence.tags or [], strict=False):
            if tag not in known:
                raise TaskDataError(
                    f"{source}: sentence at line {sentence.line}: tag {tag!r} of word {word!r} is not one "
                    f"of the training data's tags {list(label_list)}; add it to the training data or fix the tag"
                )
