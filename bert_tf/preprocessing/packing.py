"""Packing: several instances (or fine-tuning examples) in one row of `max_seq_length`.

Pretraining (`pipelines.dataset`) and fine-tuning (`bert_tf.tasks.streams`) both pack with
this module, which is why it lives below both. The model side of a packed row, each token
seeing only its own example, is `bert_tf.layers.example_mask`; a single example's
`[CLS] A [SEP] B [SEP]` layout is `bert_tf.preprocessing.segments`.

Instances (each `[CLS] A [SEP] B [SEP]` with its own masked-LM predictions and NSP label)
are short more often than not: document ends, `short_seq_prob`, short documents. Padded
to the row length they waste a third of the compute on a corpus of short documents.
Packing puts several instances in one row and the model keeps them apart
(`bert_tf.layers.example_mask`): positions restart and attention stays within each instance,
so every instance is computed exactly as if it were alone. Fine-tuning packs each batch
of classification examples the same way (`pack_sequences`): the batch keeps its
examples, so it trains on exactly what the padded batch would, with less padding.

The packer: first-fit decreasing over a bounded buffer. The stream is cut into buffers
of `buffer_size` instances; each buffer's instances are sorted by length, longest first,
and each goes into the first row that still has room for its tokens, its predictions and
one more instance. Why this one rather than a histogram-based packer (which pairs
lengths from a histogram of the whole data set): a row has three budgets at once (tokens,
masked-LM predictions, NSP slots), which first-fit checks per instance directly, while a
length histogram sees only the first; it needs no pass over the data beforehand, so it
works on endless streams (raw text masked on the fly, repeated records); and on a buffer
of a thousand instances it packs close to the bound (first-fit decreasing uses at most
11/9 of the optimal number of rows, and in practice only the last rows of each buffer are
left part-full). Memory is bounded by the buffer. It runs as graph ops (a `tf.while_loop`
over the sorted buffer, then scatters), so it is deterministic and parallel like the rest
of the pipeline.

A packed row has the original feature names with these meanings (see
`bert_tf.layers.example_mask`):

- input_ids, segment_ids int [max_seq_length]: the instances one after the other, then 0;
- input_mask int [max_seq_length]: the instance number (1, 2, ...) of each real token, 0
  on padding;
- masked_lm_positions, masked_lm_ids, masked_lm_weights [max_predictions_per_row]: the
  predictions of all the row's instances (positions within the row);
- next_sentence_positions, next_sentence_labels int, next_sentence_weights float
  [max_instances_per_row]: each instance's [CLS] position and label; weight 0.0 on
  unused slots.

Example:

>>> import tensorflow as tf
>>> from bert_tf.preprocessing import packing
>>> instances = tf.data.Dataset.from_tensor_slices({
...     "input_ids": [[2, 7, 3, 0], [2, 8, 9, 3], [2, 5, 3, 0]],
...     "input_mask": [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 0]],
...     "segment_ids": [[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]],
...     "masked_lm_positions": [[1], [2], [1]], "masked_lm_ids": [[6], [4], [6]],
...     "masked_lm_weights": [[1.0], [1.0], [1.0]], "next_sentence_labels": [[0], [1], [1]]})
>>> rows = packing.pack_instances(instances.batch(3), max_seq_length=8,
...                               max_predictions_per_row=2, max_instances_per_row=2)
>>> [row["input_mask"].numpy().tolist() for row in rows]
[[1, 1, 1, 1, 2, 2, 2, 0], [1, 1, 1, 0, 0, 0, 0, 0]]
"""

from __future__ import annotations

import tensorflow as tf

DEFAULT_BUFFER_SIZE = 1024
DEFAULT_MAX_INSTANCES_PER_ROW = 8
PACKED_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_positions",
    "next_sentence_labels",
    "next_sentence_weights",
)
FLOAT_FEATURES = frozenset({"masked_lm_weights", "next_sentence_weights"})

# The input that marks packed rows: each example's [CLS] among the rows' tokens, flattened.
PACKED_POSITIONS = "cls_positions"


def default_max_predictions_per_row(max_predictions_per_seq: int, max_instances_per_row: int) -> int:
    """The per-row prediction budget when none is given: the per-instance one, scaled.

    An instance predicts round(15%) of its tokens, at least 1, so a row full of short
    instances needs a little more than a row holding one long instance; a quarter more
    (and at least one per possible instance beyond the first) rarely leaves a row
    short of budget.
    """
    return max_predictions_per_seq + max(max_instances_per_row - 1, (max_predictions_per_seq + 3) // 4)


def first_fit_decreasing(
    lengths: tf.Tensor,
    predictions: tf.Tensor,
    *,
    max_seq_length: int,
    max_predictions_per_row: int,
    max_instances_per_row: int,
) -> dict[str, tf.Tensor]:
    """Assigns each instance of a buffer to a row, first-fit decreasing by length.

    Args:
      lengths, predictions: int32 [n]: tokens and real masked-LM predictions per instance,
        each within the row's budget.

    Returns int32 tensors: `row`, `slot` (its index within the row), `token_offset` and
    `prediction_offset` (where its tokens and predictions start in the row), all [n]; and
    `num_rows`, a scalar. Rows 0 .. num_rows - 1 are used.
    """
    lengths = tf.cast(lengths, tf.int32)
    predictions = tf.cast(predictions, tf.int32)
    count = tf.shape(lengths)[0]
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    zeros = tf.zeros([count], tf.int32)  # at most one row per instance

    def place(rank, row_tokens, row_predictions, row_instances, assigned):
        item = order[rank]
        length, predicted = lengths[item], predictions[item]
        fits = (
            (row_tokens + length <= max_seq_length)
            & (row_predictions + predicted <= max_predictions_per_row)
            & (row_instances < max_instances_per_row)
        )
        row = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)  # the first row with room
        placement = tf.stack([row, row_instances[row], row_tokens[row], row_predictions[row]])
        assigned = tf.tensor_scatter_nd_update(assigned, [[item]], placement[tf.newaxis])
        at_row = [[row]]
        return (
            rank + 1,
            tf.tensor_scatter_nd_add(row_tokens, at_row, [length]),
            tf.tensor_scatter_nd_add(row_predictions, at_row, [predicted]),
            tf.tensor_scatter_nd_add(row_instances, at_row, [1]),
            assigned,
        )

    _, _, _, row_instances, assigned = tf.while_loop(
        lambda rank, *_: rank < count,
        place,
        (tf.constant(0), zeros, zeros, zeros, tf.zeros([count, 4], tf.int32)),
        parallel_iterations=1,
    )
    return {
        "row": assigned[:, 0],
        "slot": assigned[:, 1],
        "token_offset": assigned[:, 2],
        "prediction_offset": assigned[:, 3],
        "num_rows": tf.reduce_sum(tf.cast(row_instances > 0, tf.int32)),
    }


def place_tokens(
    features: dict[str, tf.Tensor],
    lengths: tf.Tensor,
    placement: dict[str, tf.Tensor],
    row_length: int | tf.Tensor,
) -> dict[str, tf.Tensor]:
    """The tokens of a batch moved into packed rows as `placement` says.

    Args:
      features: `input_ids`, `segment_ids` [n, seq] of the instances (real tokens first).
      lengths: int32 [n], the real tokens of each instance.
      placement: what `first_fit_decreasing` returns for these instances.

    Returns int32 `input_ids`, `segment_ids` and `input_mask` (instance numbers 1, 2, ...;
    0 on padding), each [num_rows, row_length].
    """
    # Instance i's token t goes to (row_i, token_offset_i + t).
    real = tf.sequence_mask(lengths, tf.shape(features["input_ids"])[1])  # [n, seq]
    token_row = tf.broadcast_to(placement["row"][:, tf.newaxis], tf.shape(real))
    token_column = placement["token_offset"][:, tf.newaxis] + tf.cumsum(tf.cast(real, tf.int32), axis=1) - 1
    token_index = tf.boolean_mask(tf.stack([token_row, token_column], axis=-1), real)  # [tokens, 2]
    row_shape = tf.stack([placement["num_rows"], row_length])

    def scatter_tokens(values):
        return tf.scatter_nd(token_index, tf.boolean_mask(tf.cast(values, tf.int32), real), row_shape)

    instance_number = tf.broadcast_to((placement["slot"] + 1)[:, tf.newaxis], tf.shape(real))
    return {
        "input_ids": scatter_tokens(features["input_ids"]),
        "input_mask": scatter_tokens(instance_number),
        "segment_ids": scatter_tokens(features["segment_ids"]),
    }


def pack_batch(
    features: dict[str, tf.Tensor],
    *,
    max_seq_length: int,
    max_predictions_per_row: int,
    max_instances_per_row: int,
) -> dict[str, tf.Tensor]:
    """Packs one buffer (a batch of instances, [n, ...] each) into rows [num_rows, ...].

    The instances have the features of an ordinary batch (any sequence length up to
    `max_seq_length`, any number of prediction slots); their real predictions are those
    with a nonzero weight.
    """
    input_mask = tf.cast(features["input_mask"], tf.int32)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    lengths = tf.reduce_sum(tf.cast(input_mask > 0, tf.int32), axis=1)  # [n]
    has_prediction = weights > 0
    predictions = tf.reduce_sum(tf.cast(has_prediction, tf.int32), axis=1)
    checks = [
        tf.debugging.assert_less_equal(
            lengths, max_seq_length, message="an instance is longer than max_seq_length"
        ),
        tf.debugging.assert_less_equal(
            predictions, max_predictions_per_row, message="an instance has more predictions than a row"
        ),
    ]
    with tf.control_dependencies(checks):
        placement = first_fit_decreasing(
            lengths,
            predictions,
            max_seq_length=max_seq_length,
            max_predictions_per_row=max_predictions_per_row,
            max_instances_per_row=max_instances_per_row,
        )
    num_rows, row = placement["num_rows"], placement["row"]
    packed = place_tokens(features, lengths, placement, max_seq_length)

    # Predictions: instance i's j-th real prediction goes to (row_i, prediction_offset_i + j),
    # its position moved by the instance's token offset.
    prediction_row = tf.broadcast_to(row[:, tf.newaxis], tf.shape(has_prediction))
    prediction_column = (
        placement["prediction_offset"][:, tf.newaxis]
        + tf.cumsum(tf.cast(has_prediction, tf.int32), axis=1)
        - 1
    )
    prediction_index = tf.boolean_mask(tf.stack([prediction_row, prediction_column], axis=-1), has_prediction)
    prediction_shape = tf.stack([num_rows, max_predictions_per_row])

    def scatter_predictions(values, dtype=tf.int32):
        return tf.scatter_nd(
            prediction_index, tf.boolean_mask(tf.cast(values, dtype), has_prediction), prediction_shape
        )

    moved_positions = (
        tf.cast(features["masked_lm_positions"], tf.int32) + placement["token_offset"][:, tf.newaxis]
    )
    packed["masked_lm_positions"] = scatter_predictions(moved_positions)
    packed["masked_lm_ids"] = scatter_predictions(features["masked_lm_ids"])
    packed["masked_lm_weights"] = scatter_predictions(weights, tf.float32)

    # NSP: one slot per instance, at its [CLS] (the instance's first token).
    slot_index = tf.stack([row, placement["slot"]], axis=1)  # [n, 2]
    slot_shape = tf.stack([num_rows, max_instances_per_row])
    labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    packed["next_sentence_positions"] = tf.scatter_nd(slot_index, placement["token_offset"], slot_shape)
    packed["next_sentence_labels"] = tf.scatter_nd(slot_index, labels, slot_shape)
    packed["next_sentence_weights"] = tf.scatter_nd(slot_index, tf.ones_like(labels, tf.float32), slot_shape)
    return packed


def pack_sequences(features: dict[str, tf.Tensor], *, row_length: int | tf.Tensor) -> dict[str, tf.Tensor]:
    """Packs a batch of sequences (one label each: classification, regression) into rows.

    The batch keeps its examples and their order; only their tokens move, first-fit
    decreasing into rows of `row_length`, so a batch of short texts takes a few rows
    instead of one padded row each. The model finds each example's `[CLS]` by
    `cls_positions`, so its outputs and labels stay [n, ...] in the batch's order.

    Args:
      features: `input_ids`, `input_mask` (1 on real tokens), `segment_ids` [n, seq].
      row_length: an int, or a scalar tensor such as the batch's own padded length
        (`seq`: rows no longer than the batch's, whose attention costs less than rows of
        max_seq_length); no sequence may be longer.

    Returns:
      `input_ids`, `segment_ids`, `input_mask` (instance numbers) int32 [rows,
      row_length], and `cls_positions` int32 [n]: example i's `[CLS]` in the rows
      flattened row by row (row * row_length + its offset in the row).
    """
    lengths = tf.reduce_sum(tf.cast(tf.cast(features["input_mask"], tf.int32) > 0, tf.int32), axis=1)
    check = tf.debugging.assert_less_equal(lengths, row_length, message="a sequence is longer than a row")
    with tf.control_dependencies([check]):
        placement = first_fit_decreasing(
            lengths,
            tf.zeros_like(lengths),
            max_seq_length=row_length,
            max_predictions_per_row=0,
            max_instances_per_row=row_length,  # no limit: every instance has a token
        )
    packed = place_tokens(features, lengths, placement, row_length)
    packed[PACKED_POSITIONS] = placement["row"] * row_length + placement["token_offset"]
    return packed


def pack_instances(
    batches: tf.data.Dataset,
    *,
    max_seq_length: int,
    max_predictions_per_row: int,
    max_instances_per_row: int = DEFAULT_MAX_INSTANCES_PER_ROW,
) -> tf.data.Dataset:
    """Packs a dataset of instance batches (each batch one buffer) into a dataset of rows.

    Rows come out unbatched, longest instances first within each buffer; shuffle and
    batch them after.
    """
    if max_instances_per_row < 1:
        raise ValueError(f"max_instances_per_row must be >= 1, got {max_instances_per_row}")

    # Plain graph code: skipping AutoGraph's conversion saves seconds of start-up.
    @tf.autograph.experimental.do_not_convert
    def pack(features):
        return pack_batch(
            features,
            max_seq_length=max_seq_length,
            max_predictions_per_row=max_predictions_per_row,
            max_instances_per_row=max_instances_per_row,
        )

    return batches.map(pack, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()


def fill_rate(batch: dict[str, tf.Tensor]) -> tf.Tensor:
    """The fraction of the positions of a batch (packed or not) that hold real tokens."""
    return tf.reduce_mean(tf.cast(tf.cast(batch["input_mask"], tf.int32) > 0, tf.float32))
