"""The span family: SQuAD v1.1 and v2.0, answers as spans of a context.

Reads SQuAD JSON (parsed whole) or TFDS squad/*; a context is read in windows every
doc_stride pieces (several features per example); a `BertSpanLabeler` head; the original
run_squad post-processing and the official EM/F1; served as question, context -> answer.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.checkpoints import TaskHead
from bert_tf.cli import setting
from bert_tf.errors import UsageError
from bert_tf.tasks import python_inputs
from bert_tf.tasks.family import (
    SERVING_PAD_TO_MULTIPLE_OF,
    TEXT,
    Predictions,
    TaskData,
    TaskFamily,
    split_file,
)
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.info import FinetunedModelInfo
from bert_tf.tasks.span import signatures, squad
from bert_tf.tasks.span.metrics import squad_scores
from bert_tf.tasks.span.model import BertSpanLabeler
from bert_tf.tasks.span.postprocess import postprocess, write_predictions

logger = logging.getLogger(__name__)

SPAN = "span"  # the kind of this family's models


@dataclasses.dataclass(frozen=True)
class SpanOptions:
    """SQuAD's settings, as the original run_squad.py names them: flags, `from_pretrained`
    arguments and task.json fields (with `version_2_with_negative`, which the task decides)."""

    doc_stride: int = setting(128, "SQuAD: read contexts in windows starting every N word pieces.")
    max_query_length: int = setting(64, "SQuAD: question pieces kept.")
    n_best_size: int = setting(20, "SQuAD: candidates kept per question.")
    max_answer_length: int = setting(30, "SQuAD: longest answer in pieces.")
    null_score_diff_threshold: float = setting(0.0, "SQuAD 2.0: answer '' above this.")

    def __post_init__(self):
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            if getattr(self, name) <= 0:
                raise UsageError(f"--{name} must be a positive integer, got {getattr(self, name)}")


# The SQuAD settings a span model is saved with (task.json) and served by, in the order
# the export lists them.
SPAN_FIELDS = (
    "max_query_length",
    "doc_stride",
    "max_answer_length",
    "n_best_size",
    "version_2_with_negative",
    "null_score_diff_threshold",
)


class SpanFamily(TaskFamily):
    """SQuAD v1.1 and v2.0 (JSON files or TFDS squad/*): answer spans in a context."""

    name = "span"
    kinds = (SPAN,)
    model_class = BertSpanLabeler
    default_task = "squad"
    tasks = ("squad", "squad_v2")
    Options = SpanOptions
    task_json_fields = SPAN_FIELDS
    default_max_seq_length = 384  # the original run_squad's
    kind = SPAN
    main_metric = "f1"
    has_eval_loss = False  # the labels are answer texts, not the model's positions
    reads_windows = True  # contexts, every doc_stride pieces
    keep = ("token_to_orig", "token_is_max_context", "input_ids")

    def __init__(self, settings, tokenizer):
        super().__init__(settings, tokenizer)
        self.version_2 = settings.task.lower() == "squad_v2" or (
            bool(settings.tfds_name) and squad.squad_version(settings.tfds_name)
        )

    def load(self, split: str) -> list[TaskData]:
        """SQuAD JSON is one document: it is parsed whole (the examples stay in memory)."""
        s = self.settings
        file = split_file(s, split)
        if file:
            dataset = squad.load_dataset(file)
        elif s.tfds_name and split != "predict":
            tfds_split = "train" if split == "train" else "validation"
            dataset = squad.tfds_dataset(s.tfds_name, tfds_split, s.tfds_data_dir)
        else:
            return []
        training = split == "train"
        examples, skipped = squad.read_examples(dataset, training, version_2_with_negative=self.version_2)
        if skipped:
            logger.warning("%s: %d answers not found in their context were skipped", split, skipped)
        if not examples:
            raise TaskDataError(f"no usable SQuAD examples in the {split} data ({skipped} skipped)")
        return [
            TaskData(
                split,
                lambda: iter(examples),
                training,
                ConversionStats(num_skipped=skipped),
                (dataset, examples),
            )
        ]

    def preprocessor(self):
        o = self.options
        return preprocessing.SpanPreprocessor(
            self.tokenizer,
            self.settings.max_seq_length,
            o.doc_stride,
            o.max_query_length,
            self.pad_to_multiple_of,
        )

    def signature(self, labelled: bool) -> tuple:
        x = (TEXT, TEXT)
        return (x, (TEXT, tf.TensorSpec([], tf.int64))) if labelled else (x,)

    def record(self, example, labelled: bool) -> tuple:
        x = (example.question_text, example.context)
        if not labelled:
            return (x,)
        return (x, (example.orig_answer_text or "", -1 if example.is_impossible else example.answer_start))

    def task_json_values(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.options), "version_2_with_negative": bool(self.version_2)}

    def count(self, data: TaskData, progress: bool = False) -> ConversionStats:
        skipped = data.stats.num_skipped
        stats = super().count(data, progress)
        stats.num_skipped = skipped
        return stats

    def python_outputs(self, data: TaskData, predictions: Predictions) -> list[str]:
        """The answers, in question order: a span model's logits are per window."""
        answers, _, _ = self._answers(data, predictions)
        return [answers[example.qas_id] for example in data.meta[1]]

    def python_labels(self, outputs) -> list[str]:
        """The answers: `python_outputs` already gives them."""
        return list(outputs)

    def restore(self, info) -> None:
        self.version_2 = bool(info.option("version_2_with_negative", False))

    def python_data(self, x, y, split: str) -> TaskData:
        """(question, context) pairs with {"text", "answer_start"} (or (text, answer_start))
        answers; labelled data reads as SQuAD training data (answers located in the context)."""
        rows = python_inputs.rows(x, "x")
        answers = python_inputs.labels_for(y, len(rows))
        paragraphs = []
        for index, (row, answer) in enumerate(zip(rows, answers, strict=True)):
            if not (
                isinstance(row, (tuple, list)) and len(row) == 2 and all(isinstance(t, str) for t in row)
            ):
                raise UsageError(f"x[{index}] must be a (question, context) pair, got {row!r}")
            qa: dict[str, Any] = {"id": str(index), "question": row[0], "answers": []}
            if answer is not None:
                if isinstance(answer, dict):
                    text, start = answer.get("text"), answer.get("answer_start")
                elif isinstance(answer, (tuple, list)) and len(answer) == 2:
                    text, start = answer
                else:
                    raise UsageError(
                        f"y[{index}] must be {{'text': ..., 'answer_start': ...}} or (text, start), got {answer!r}"
                    )
                if not text or start is None or start < 0:
                    if not self.version_2:
                        raise UsageError(
                            f"y[{index}] has no answer; unanswerable questions need a SQuAD 2.0 model (task='squad_v2')"
                        )
                    qa["is_impossible"] = True
                else:
                    qa["answers"] = [{"text": text, "answer_start": int(start)}]
            paragraphs.append({"context": row[1], "qas": [qa]})
        dataset = [{"title": split, "paragraphs": paragraphs}]
        labelled = y is not None
        examples, skipped = squad.read_examples(dataset, labelled, version_2_with_negative=self.version_2)
        if skipped:
            raise UsageError(
                f"{skipped} answers of y are not found at their answer_start in their context; fix them"
            )
        return TaskData(split, lambda: iter(examples), labelled, ConversionStats(), (dataset, examples))

    def build_model(self, encoder, preprocessor=None):
        return BertSpanLabeler(encoder, preprocessor=preprocessor)

    def gather(self, parts) -> Predictions:
        vocab = self.tokenizer.vocab
        features, starts, ends = [], [], []
        for outputs, _, meta, real in parts:
            meta = {name: np.asarray(value) for name, value in meta.items()}
            start_logits, end_logits = np.asarray(outputs["start_logits"]), np.asarray(outputs["end_logits"])
            for row in np.flatnonzero(real):
                to_orig, max_context = meta["token_to_orig"][row], meta["token_is_max_context"][row]
                context = np.flatnonzero(to_orig >= 0)
                ids = meta["input_ids"][row]
                length = int((ids != self.tokenizer.pad_id).sum())  # [PAD] is never a real piece
                features.append(
                    squad.SquadFeature(
                        unique_id=1000000000 + len(features),
                        example_index=int(meta["index"][row]),
                        doc_span_index=0,
                        tokens=[vocab[i] for i in ids[:length]],
                        token_to_orig_map={int(p): int(to_orig[p]) for p in context},
                        token_is_max_context={int(p): bool(max_context[p]) for p in context},
                        input_ids=[],
                        input_mask=[],
                        segment_ids=[],
                    )
                )
                starts.append(start_logits[row, :length])
                ends.append(end_logits[row, :length])
        return Predictions((features, starts, ends))

    def _answers(self, data: TaskData, predictions: Predictions):
        _, examples = data.meta
        features, starts, ends = predictions.outputs
        o = self.options
        return postprocess(
            examples,
            features,
            starts,
            ends,
            n_best_size=o.n_best_size,
            max_answer_length=o.max_answer_length,
            lower_case=self.tokenizer.lower_case,
            version_2_with_negative=self.version_2,
            null_score_diff_threshold=o.null_score_diff_threshold,
        )

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        answers, _, null_odds = self._answers(data, predictions)
        return squad_scores(
            data.meta[0],
            answers,
            null_odds if self.version_2 else None,
            version_2_with_negative=self.version_2,
        )

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        answers, nbest, null_odds = self._answers(data, predictions)
        # predictions.json of the predict file at the top; the eval file's beside it only
        # when there is no predict file, else in eval/.
        separate = data.name != "predict" and self.settings.predict_file
        directory = os.path.join(output_dir, "eval") if separate else output_dir
        return write_predictions(directory, answers, nbest, null_odds if self.version_2 else None)

    # -- loss and metrics ----------------------------------------------------------------
    @classmethod
    def compile_args(cls, kind: str) -> dict:
        """The mean of the start and end position cross-entropies, as the original run_squad.py."""
        return {
            "loss": {
                "start_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "end_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            },
            "loss_weights": {"start_logits": 0.5, "end_logits": 0.5},
            "metrics": {
                "start_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                "end_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            },
        }

    # -- serving ---------------------------------------------------------------------------
    @classmethod
    def squad_settings(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        """The SQuAD settings of a saved model: task.json's, the defaults where an older one lacks them."""
        defaults = {**dataclasses.asdict(SpanOptions()), "version_2_with_negative": False}
        return {name: info.option(name, defaults[name]) for name in SPAN_FIELDS}

    @classmethod
    def serving_preprocessor(cls, tokenizer, info: FinetunedModelInfo, seq_length: int):
        saved = cls.squad_settings(info)
        return preprocessing.SpanPreprocessor(
            tokenizer,
            seq_length,
            saved["doc_stride"],
            saved["max_query_length"],
            pad_to_multiple_of=SERVING_PAD_TO_MULTIPLE_OF,
        )

    @classmethod
    def serving_signatures(cls, serving, info: FinetunedModelInfo, seq_length: int) -> dict:
        """question, context -> answer, score, answer_start, answer_end (`signatures`)."""
        return signatures.signatures(serving, cls.squad_settings(info), seq_length)

    @classmethod
    def export_info(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        return cls.squad_settings(info)

    @classmethod
    def head(cls, kind: str) -> TaskHead:
        """run_squad.py's `cls/squad/output_weights` [2, hidden]; BertForQuestionAnswering (no pooler)."""
        return TaskHead(
            "span_dense", "cls/squad/output", "BertForQuestionAnswering", pooler=False, hf_module="qa_outputs"
        )
