"""Windows: a text longer than a row read as overlapping windows, as run_squad reads contexts.

A text of n pieces, with room for `max_pieces` of them in a row, is read in windows of up
to `max_pieces` pieces starting every min(max_pieces, doc_stride) pieces, until one reaches
its end (a text that fits, or an empty one, is one window). A piece read by several windows
belongs to the one where it has the most context: min(pieces left, pieces right) + 0.01 *
window length, the first on a tie (run_squad's `_check_is_max_context`).

SQuAD windows its contexts (`bert_tf.preprocessing.spans`); classification, regression and
token tagging window their (last) text when given a `doc_stride`
(`bert_tf.preprocessing.classifier`, `bert_tf.preprocessing.tagger`). Every window is a row
of its own, with `example_index` naming its text's row of the batch; `pool_windows`
combines the windows' outputs into one per text.

Example (one example, a 10-piece text, windows of up to 4 pieces every 3):

>>> windows = doc_windows(tf.constant([10], tf.int64), tf.constant([4], tf.int64), doc_stride=3)
>>> windows.start.numpy().tolist(), windows.length.numpy().tolist()
([0, 3, 6], [4, 4, 4])
"""

from __future__ import annotations

import typing

import numpy as np
import tensorflow as tf


class Windows(typing.NamedTuple):
    """The windows of a batch of texts, all examples' windows in one list [w]."""

    example: tf.Tensor  # [w] the example (row of the batch) each window reads
    index: tf.Tensor  # [w] its number among that example's windows
    start: tf.Tensor  # [w] its first piece
    length: tf.Tensor  # [w] its number of pieces
    count: tf.Tensor  # [b] windows per example (at least 1)
    first_window: tf.Tensor  # [b] the first window of each example in the list

    def per_example(self, values: tf.Tensor) -> tf.RaggedTensor:
        """[w] -> [b, (windows)]."""
        return tf.RaggedTensor.from_row_lengths(values, self.count)


def doc_windows(num_pieces: tf.Tensor, max_pieces: tf.Tensor, doc_stride: int) -> Windows:
    """The windows of each example: [b] text lengths and [b] window sizes (int64)."""
    step = tf.minimum(max_pieces, doc_stride)
    count = 1 + (tf.maximum(num_pieces - max_pieces, 0) + step - 1) // step  # [b]
    index = tf.ragged.range(count)  # [b, (windows)]
    example = index.value_rowids()
    start = index.flat_values * tf.gather(step, example)
    length = tf.minimum(tf.gather(max_pieces, example), tf.gather(num_pieces, example) - start)
    return Windows(example, index.flat_values, start, length, count, index.row_starts())


def take_windows(pieces: tf.RaggedTensor, windows: Windows) -> tf.RaggedTensor:
    """The pieces [b, (n)] (ids, or anything aligned with them) of every window: [w, (length)]."""
    first = tf.gather(pieces.row_starts(), windows.example) + windows.start
    index = tf.ragged.range(first, first + windows.length)  # [w, (length)] into the flat pieces
    return tf.gather(pieces.flat_values, index)


def is_max_context(windows: Windows, doc_position: tf.Tensor) -> tf.Tensor:
    """[w, n] bool: whether window w gives the piece at `doc_position[w, i]` (a position in
    its example's text) the most context; False where the window does not hold it."""
    starts = tf.gather(windows.per_example(windows.start).to_tensor(), windows.example)  # [w, windows]
    lengths = tf.gather(windows.per_example(windows.length).to_tensor(), windows.example)  # padding: 0
    starts, lengths = starts[:, None, :], lengths[:, None, :]  # [w, 1, windows]
    position = doc_position[:, :, None]  # [w, n, 1]
    last = starts + lengths - 1
    holds = (starts <= position) & (position <= last)  # [w, n, windows]
    context = tf.cast(tf.minimum(position - starts, last - position), tf.float64)
    score = tf.where(holds, context + 0.01 * tf.cast(lengths, tf.float64), -np.inf)
    best = tf.reduce_max(score, axis=2, keepdims=True)
    number = tf.range(tf.shape(score, out_type=tf.int64)[2])
    first_best = tf.reduce_min(tf.where(tf.equal(score, best) & holds, number, tf.int64.max), axis=2)
    return tf.equal(first_best, windows.index[:, None])


def check_doc_stride(doc_stride: int | None, room: int) -> int | None:
    """`doc_stride` (None: no windows) if it is a positive number of pieces below `room`, the
    pieces a window holds; else ValueError (windows `room` apart or more would not overlap)."""
    if doc_stride is None:
        return None
    if not 0 < doc_stride < room:
        raise ValueError(
            f"doc_stride must be in [1, {room - 1}] (a window holds {room} pieces), got {doc_stride}"
        )
    return int(doc_stride)


POOLINGS = ("mean", "max")  # how the windows of a long text combine


def pool_windows(outputs, example_index, num_examples, pooling: str = "mean") -> tf.Tensor:
    """Window outputs [w, ...] -> one per example [num_examples, ...]: the mean or the max
    (`pooling`) of its windows' outputs, in float32. Every example has a window."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be 'mean' or 'max', got {pooling!r}")
    outputs = tf.cast(outputs, tf.float32)
    pool = tf.math.unsorted_segment_mean if pooling == "mean" else tf.math.unsorted_segment_max
    return pool(outputs, example_index, num_examples)
