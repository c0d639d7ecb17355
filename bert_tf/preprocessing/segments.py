"""Segments: token ids of one or two texts -> `[CLS] A [SEP] (B [SEP])` rows with their segment
ids and mask, trimmed and padded (graph ops, tensorflow-text only).

`combine_segments` is named after tensorflow-text's op for the same layout. ("Packing", in
`bert_tf.preprocessing.packing`, is another idea: several examples in one row.) Every
preprocessor of `bert_tf.preprocessing` builds its rows with it, for training and inside the
exported SavedModels alike.

Everything here is built from TensorFlow and tensorflow-text ops, so it traces into a
SavedModel that loads without bert_tf.

Trimming follows the original `_truncate_seq_pair` of run_classifier.py: while the pair
is too long, drop the last token of the longer segment (of the second one on a tie). For
two segments that is exactly what `tensorflow_text.RoundRobinTrimmer` computes (each
segment receives budget in turn, first segment first), which tests/export check against a
Python transcription of the original rule on random lengths. `WaterfallTrimmer` (trim the
last segment first) and `ShrinkLongestTrimmer` (different tie-breaking) do not match it.

Example:

>>> import tensorflow as tf
>>> packed = combine_segments([tf.ragged.constant([[7, 8, 9, 10]])], seq_length=5, cls_id=1, sep_id=2)
>>> packed["input_ids"].numpy().tolist(), packed["input_mask"].numpy().tolist()
([[1, 7, 8, 9, 2]], [[1, 1, 1, 1, 1]])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

MASK_TEXT = "[MASK]"


def flat_pieces(segment: tf.RaggedTensor) -> tf.RaggedTensor:
    """[batch, (words), (pieces)] or [batch, (pieces)] -> [batch, (pieces)] int64."""
    if segment.ragged_rank > 1:
        segment = segment.merge_dims(1, -1)
    return tf.cast(segment, tf.int64)


def padded_length(row_lengths: tf.Tensor, seq_length: int | tf.Tensor, pad_to_multiple_of: int | None):
    """The length a batch is padded to: `seq_length` (static), or with `pad_to_multiple_of`
    its longest row rounded up to that multiple, at most `seq_length`.

    Rounding keeps the number of distinct shapes small (a model traces once per shape):
    at most seq_length / pad_to_multiple_of of them.
    """
    if not pad_to_multiple_of:
        return seq_length
    longest = tf.reduce_max(tf.concat([tf.cast(row_lengths, tf.int64), [1]], axis=0))
    multiple = tf.constant(pad_to_multiple_of, tf.int64)
    rounded = (longest + multiple - 1) // multiple * multiple
    return tf.minimum(rounded, tf.cast(seq_length, tf.int64))


def pad_rows(rows: tf.RaggedTensor, length: int | tf.Tensor, value) -> tf.Tensor:
    """Ragged [batch, (n)] -> dense [batch, length], padded with `value` (rows must fit)."""
    dense = rows.to_tensor(default_value=tf.cast(value, rows.dtype))
    width = tf.shape(dense, out_type=tf.int64)[1]
    length = tf.cast(length, tf.int64)
    dense = tf.pad(dense, [[0, 0], [0, length - width]], constant_values=tf.cast(value, rows.dtype))
    if isinstance(length, int):
        dense.set_shape([None, length])
    return dense


def is_trimmed(segments: Sequence[tf.RaggedTensor], trimmed: Sequence[tf.RaggedTensor]) -> tf.Tensor:
    """[batch] bool: whether trimming cut anything from a row."""
    before = tf.add_n([segment.row_lengths() for segment in segments])
    after = tf.add_n([segment.row_lengths() for segment in trimmed])
    return tf.not_equal(before, after)


def combine_segments(
    segments: Sequence[tf.RaggedTensor],
    seq_length: int | tf.Tensor,
    cls_id: int,
    sep_id: int,
    pad_id: int = 0,
    pad_to_multiple_of: int | None = None,
    return_trimmed: bool = False,
) -> dict[str, tf.Tensor]:
    """Packs one or two tokenized segments as `[CLS] A [SEP] (B [SEP])`, trimmed and padded.

    Args:
      segments: one or two ragged id tensors [batch, (pieces)] (or [batch, (words),
        (pieces)]; the word dimension is merged).
      seq_length: the longest packed row (trimming budget); without
        `pad_to_multiple_of` also the length of every row (a Python int gives a static shape).
      cls_id, sep_id, pad_id: special-token ids from the vocab.
      pad_to_multiple_of: pad to the batch's longest row rounded up to this multiple
        (dynamic padding) instead of to `seq_length`.
      return_trimmed: also return `trimmed`, [batch] bool: whether trimming cut the row.

    Returns:
      {input_ids, input_mask, segment_ids}: int32 [batch, length]. Segment ids are 0
      for [CLS], A and its [SEP]; 1 for B and the last [SEP]; padding is 0 in all three
      (input_ids padding is pad_id).
    """
    if not 1 <= len(segments) <= 2:
        raise ValueError(f"BERT packs one or two segments, got {len(segments)}")
    segments = [flat_pieces(segment) for segment in segments]
    # [CLS] plus one [SEP] per segment are not part of the trimming budget.
    budget = seq_length - (len(segments) + 1)
    trimmed = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
    ids, segment_ids = tf_text.combine_segments(
        trimmed, start_of_sequence_id=cls_id, end_of_segment_id=sep_id
    )
    length = padded_length(ids.row_lengths(), seq_length, pad_to_multiple_of)
    input_ids, input_mask = tf_text.pad_model_inputs(ids, max_seq_length=length, pad_value=pad_id)
    segment_ids, _ = tf_text.pad_model_inputs(segment_ids, max_seq_length=length, pad_value=0)
    packed = {
        "input_ids": tf.cast(input_ids, tf.int32),
        "input_mask": tf.cast(input_mask, tf.int32),
        "segment_ids": tf.cast(segment_ids, tf.int32),
    }
    if return_trimmed:
        packed["trimmed"] = is_trimmed(segments, trimmed)
    return packed


def tokenize_with_mask_markers(
    tokenize: Callable[[tf.Tensor], tf.RaggedTensor], texts: tf.Tensor, mask_id: int
) -> tf.RaggedTensor:
    """Tokenizes `texts`, reading each literal "[MASK]" as the mask token.

    The tokenizer itself splits a typed "[MASK]" like any text ("[", "mask", "]"), as
    the original does. For fill-mask the user means the mask token, so the text is split
    on the literal (case-sensitive) "[MASK]", each part is tokenized, and `mask_id` goes
    between consecutive parts.

    Args:
      tokenize: strings [n] -> ragged int ids [n, (pieces)].
      texts: tf.string [batch].

    Returns:
      ragged int64 [batch, (pieces)].
    """
    parts = tf.strings.split(texts, sep=MASK_TEXT)  # [batch, (parts)]
    part_ids = flat_pieces(tokenize(parts.flat_values))  # [sum(parts), (pieces)]
    # Append the mask id after every part, then drop the one after each text's last part.
    mask_after = tf.fill([tf.shape(part_ids.row_splits)[0] - 1, 1], tf.constant(mask_id, tf.int64))
    with_masks = tf.concat([part_ids, tf.RaggedTensor.from_tensor(mask_after)], axis=1)
    pieces = parts.with_flat_values(with_masks).merge_dims(1, 2)  # [batch, (pieces)]
    return pieces[:, :-1]
