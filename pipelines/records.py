"""TFRecord formats of pretraining data: encoding, parsing and checking.

Two formats, both `tf.train.Example`s with the original feature names:

- masked (the original release's, fixed masks): input_ids, input_mask, segment_ids
  (int64 [max_seq_length]), masked_lm_positions, masked_lm_ids (int64
  [max_predictions_per_seq]), masked_lm_weights (float [max_predictions_per_seq]),
  next_sentence_labels (int64 [1], 1 = random next). Padding is 0.
- unmasked (for dynamic masking, drawn fresh each epoch by `pretraining_dataset`): the
  same without the three masked_lm_* features.

Examples are serialized in the graph with `tf.io.encode_proto`, so encoding runs in
parallel `tf.data` maps instead of a Python loop over protocol buffers.

Example:

>>> import tensorflow as tf
>>> from pipelines import records
>>> features = {"input_ids": tf.constant([[101, 7, 102, 8, 102]], tf.int64),
...             "input_mask": tf.ones([1, 5], tf.int64), "segment_ids": tf.constant([[0, 0, 0, 1, 1]], tf.int64),
...             "next_sentence_labels": tf.constant([[0]], tf.int64)}
>>> serialized = records.encode_examples(features)
>>> parsed = tf.io.parse_example(serialized, records.feature_spec(5, masked=False))
>>> parsed["segment_ids"].numpy().tolist()
[[0, 0, 0, 1, 1]]
"""

from __future__ import annotations

import tensorflow as tf

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
FEATURE_ORDER = (*SEQUENCE_FEATURES, *PREDICTION_FEATURES, "next_sentence_labels")
FLOAT_FEATURES = frozenset({"masked_lm_weights"})


class RecordFormatError(ValueError):
    """A TFRecord file does not hold the pretraining features the caller asked for."""


def feature_spec(max_seq_length: int, max_predictions_per_seq: int = 20, *, masked: bool = True) -> dict:
    """The `tf.io.parse_example` spec of either format."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in SEQUENCE_FEATURES}
    if masked:
        spec["masked_lm_positions"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
        spec["masked_lm_ids"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
        spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def _encode(message_type: str, field: str, values: tf.Tensor, sizes: tf.Tensor) -> tf.Tensor:
    return tf.io.encode_proto(
        sizes=tf.reshape(tf.cast(sizes, tf.int32), [-1, 1]),
        values=[values],
        field_names=[field],
        message_type=message_type,
    )


def encode_examples(features: dict[str, tf.Tensor]) -> tf.Tensor:
    """Serializes a batch of dense features ([batch, length] each) into tf.train.Examples.

    Integer features become Int64List, `masked_lm_weights` a FloatList; features are
    written in the original order. Returns tf.string [batch].
    """
    names = [name for name in FEATURE_ORDER if name in features]
    unknown = set(features) - set(names)
    if unknown:
        raise ValueError(
            f"cannot encode unknown features {sorted(unknown)}; expected some of {FEATURE_ORDER}"
        )
    batch_size = tf.shape(features[names[0]])[0]
    feature_messages = []
    for name in names:
        values = features[name]
        length = tf.shape(values)[1]
        if name in FLOAT_FEATURES:
            values_list = _encode(
                "tensorflow.FloatList", "value", tf.cast(values, tf.float32), tf.fill([batch_size], length)
            )
            feature = _encode("tensorflow.Feature", "float_list", values_list[:, None], tf.ones([batch_size]))
        else:
            values_list = _encode(
                "tensorflow.Int64List", "value", tf.cast(values, tf.int64), tf.fill([batch_size], length)
            )
            feature = _encode("tensorflow.Feature", "int64_list", values_list[:, None], tf.ones([batch_size]))
        feature_messages.append(feature)
    num_features = len(names)
    features_flat = tf.reshape(tf.stack(feature_messages, axis=1), [-1, 1])  # [batch × features, 1]
    keys = tf.reshape(tf.tile(tf.constant(names)[tf.newaxis, :], [batch_size, 1]), [-1, 1])
    entries = tf.io.encode_proto(
        sizes=tf.ones([tf.shape(keys)[0], 2], tf.int32),
        values=[keys, features_flat],
        field_names=["key", "value"],
        message_type="tensorflow.Features.FeatureEntry",
    )
    feature_map = _encode(
        "tensorflow.Features",
        "feature",
        tf.reshape(entries, [-1, num_features]),
        tf.fill([batch_size], num_features),
    )
    return _encode("tensorflow.Example", "features", feature_map[:, None], tf.ones([batch_size]))


def peek_format(path: str) -> dict[str, int] | None:
    """Feature name → length of the first record of a TFRecord file.

    Returns None when the file is not a TFRecord file of tf.train.Examples (e.g. a text
    file) and {} when it has no record.
    """
    try:
        for record in tf.data.TFRecordDataset(path).take(1):
            example = tf.train.Example.FromString(record.numpy())
            return {
                name: len(feature.int64_list.value)
                + len(feature.float_list.value)
                + len(feature.bytes_list.value)
                for name, feature in example.features.feature.items()
            }
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
        return None
    except Exception as error:  # a protobuf DecodeError: framed records that are not Examples
        if type(error).__name__ == "DecodeError":
            return None
        raise
    return {}


def check_format(
    path: str, lengths: dict[str, int], max_seq_length: int, max_predictions_per_seq: int
) -> bool:
    """Checks a record's features against the requested lengths; returns whether it is masked.

    Raises RecordFormatError with what was found and what to do.
    """
    missing = [name for name in (*SEQUENCE_FEATURES, "next_sentence_labels") if name not in lengths]
    if missing:
        raise RecordFormatError(
            f"{path}: records lack the pretraining features {missing} (found {sorted(lengths)}); "
            "write them with `python -m pipelines.create_pretraining_data`"
        )
    for name in SEQUENCE_FEATURES:
        if lengths[name] != max_seq_length:
            raise RecordFormatError(
                f"{path}: {name} has length {lengths[name]} but max_seq_length is {max_seq_length}; "
                f"pass max_seq_length={lengths[name]} or regenerate the records with --max_seq_length={max_seq_length}"
            )
    masked = "masked_lm_positions" in lengths
    if masked:
        for name in PREDICTION_FEATURES:
            if lengths.get(name) != max_predictions_per_seq:
                raise RecordFormatError(
                    f"{path}: {name} has length {lengths.get(name)} but max_predictions_per_seq is "
                    f"{max_predictions_per_seq}; pass max_predictions_per_seq={lengths.get(name)} or regenerate "
                    f"the records with --max_predictions_per_seq={max_predictions_per_seq}"
                )
    return masked
