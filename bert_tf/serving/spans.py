"""SQuAD settings of a span export.

The answer search itself is `bert_tf.tasks.squad_answers`: the ops fine-tuning's
evaluation runs on the same logits, so the SavedModel answers what evaluation scores.
"""

from __future__ import annotations

import dataclasses

from bert_tf.serving.saving import ExportError
from bert_tf.tasks.finetuned import FinetunedModelInfo


@dataclasses.dataclass(frozen=True)
class SpanSettings:
    """The SQuAD settings of a span export, from the fine-tuned model's `FinetunedModelInfo`
    (which holds the defaults for a task.json written before they were saved)."""

    max_query_length: int
    doc_stride: int
    max_answer_length: int
    n_best_size: int
    version_2_with_negative: bool
    null_score_diff_threshold: float

    @classmethod
    def from_task_info(cls, info: FinetunedModelInfo) -> SpanSettings:
        return cls(**{field.name: getattr(info, field.name) for field in dataclasses.fields(cls)})

    def check(self, seq_length: int) -> None:
        """Raises ExportError for settings that leave no window or span."""
        if seq_length - 3 - self.max_query_length < 1:
            raise ExportError(
                f"seq_length {seq_length} leaves no room for the context after a question of up to "
                f"max_query_length={self.max_query_length} pieces ([CLS] question [SEP] context "
                f"[SEP]); pass --max_seq_length={self.max_query_length + 4} or more"
            )
        for name in ("doc_stride", "max_answer_length", "n_best_size"):
            if getattr(self, name) < 1:
                raise ExportError(
                    f"task.json has {name}={getattr(self, name)}; it must be a positive number of pieces"
                )
