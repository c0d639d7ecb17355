"""SQuAD answer search in the graph: the best span over the windows of each question.

The windows and the max-context rule are the span preprocessor's
(`bert_tf.preprocessing.spans`); the search follows the fine-tuning post-processing
(`bert_tf.tasks.squad_postprocess`, the original run_squad's), as TensorFlow ops over a
whole batch:

- Best span: a span starts at a piece of its window's context that has its max context
  there, ends in the same window's context at or after its start, and is at most
  max_answer_length pieces long; the highest start + end logit over all windows of an
  example wins. SQuAD 2.0: the null score is the lowest [CLS] start + end logit over the
  windows, and there is no answer when null score - best span score > the threshold.

Sums and comparisons are in float64, as the original's Python floats, so that the same
logits give the same choice.
"""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import tensorflow as tf

from bert_tf.preprocessing.spans import Windows, is_max_context
from bert_tf.serving.saving import ExportError
from bert_tf.tasks.finetuned import FinetunedModelInfo


@dataclasses.dataclass(frozen=True)
class SpanSettings:
    """The SQuAD settings of a span export, from the fine-tuned model's `FinetunedModelInfo`
    (which holds the defaults for a task.json written before they were saved)."""

    max_query_length: int
    doc_stride: int
    max_answer_length: int
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
                f"[SEP]); pass --seq_length={self.max_query_length + 4} or more"
            )
        for name in ("doc_stride", "max_answer_length"):
            if getattr(self, name) < 1:
                raise ExportError(
                    f"task.json has {name}={getattr(self, name)}; it must be a positive number of pieces"
                )


class BestSpans(typing.NamedTuple):
    first_piece: tf.Tensor  # [b] int64, the span's first and last piece in the example's context
    last_piece: tf.Tensor
    score: tf.Tensor  # [b] float64 start + end logit; -inf when the context has no valid span
    has_answer: tf.Tensor  # [b] bool: a span exists (and, SQuAD 2.0, beats the null answer)


def best_spans(
    start_logits: tf.Tensor,
    end_logits: tf.Tensor,
    windows: Windows,
    query_length: tf.Tensor,
    settings: SpanSettings,
) -> BestSpans:
    """The best span of each example from its windows' logits [w, seq] (`query_length` [w])."""
    start_logits = tf.cast(tf.cast(start_logits, tf.float32), tf.float64)
    end_logits = tf.cast(tf.cast(end_logits, tf.float32), tf.float64)
    seq_length = tf.shape(start_logits, out_type=tf.int64)[1]
    offset = query_length + 2  # [w] first context position: [CLS] question [SEP]
    positions = tf.range(seq_length)[None, :]  # [1, seq]
    in_context = (positions >= offset[:, None]) & (positions < (offset + windows.length)[:, None])
    doc_position = windows.start[:, None] + positions - offset[:, None]  # [w, seq]: piece in the context
    can_start = in_context & is_max_context(windows, doc_position)
    # Spans as (start, length - 1): the end is start + 0 ... max_answer_length - 1.
    max_length = settings.max_answer_length
    band = positions[0, :, None] + tf.range(max_length, dtype=tf.int64)[None, :]  # [seq, max_length]
    can_end = tf.gather(tf.pad(in_context, [[0, 0], [0, max_length]]), band, axis=1)  # [w, seq, max_length]
    end_at = tf.gather(tf.pad(end_logits, [[0, 0], [0, max_length]]), band, axis=1)
    scores = tf.where(can_start[:, :, None] & can_end, start_logits[:, :, None] + end_at, -np.inf)
    scores = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [w, seq * max_length]
    window_best = tf.reduce_max(scores, axis=1)  # [w]
    window_argmax = tf.argmax(scores, axis=1)
    # The best window of each example: the first of those with its best score.
    by_example = windows.per_example(window_best).to_tensor(default_value=-np.inf)  # [b, windows]
    best_score = tf.reduce_max(by_example, axis=1)  # [b]
    number = tf.range(tf.shape(by_example, out_type=tf.int64)[1])[None, :]
    chosen = tf.reduce_min(tf.where(tf.equal(by_example, best_score[:, None]), number, tf.int64.max), axis=1)
    window = windows.first_window + tf.minimum(chosen, windows.count - 1)  # [b]
    best = tf.gather(window_argmax, window)
    start = tf.stack([window, best // max_length], axis=1)  # [b, 2]: (window, position)
    end = tf.stack([window, best // max_length + best % max_length], axis=1)
    has_answer = tf.math.is_finite(best_score)
    if settings.version_2_with_negative:
        num_examples = tf.shape(windows.count)[0]
        null_score = tf.math.unsorted_segment_min(
            start_logits[:, 0] + end_logits[:, 0], windows.example, num_examples
        )
        # Subtracted one logit at a time, as the original.
        odds = null_score - tf.gather_nd(start_logits, start) - tf.gather_nd(end_logits, end)
        has_answer &= odds <= settings.null_score_diff_threshold
    return BestSpans(
        first_piece=tf.gather_nd(doc_position, start),
        last_piece=tf.gather_nd(doc_position, end),
        score=best_score,
        has_answer=has_answer,
    )
