"""records.encode_examples writes exactly the bytes protobuf writes for the same Example."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pipelines import records


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _protobuf_bytes(row: dict[str, np.ndarray]) -> tuple[bytes, tf.train.Example]:
    """The Example protobuf writes with the features in `row`'s order, and the message.

    Each feature entry is serialized by protobuf (a one-entry `Features`); serialized
    messages concatenate as a merge, so joined they are the map in that order, and the
    Example around them is field 1 holding them.
    """
    entries = b""
    for name, values in row.items():
        if name in records.FLOAT_FEATURES:
            feature = tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))
        else:
            feature = tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))
        entries += tf.train.Features(feature={name: feature}).SerializeToString()
    message = tf.train.Example(features=tf.train.Features.FromString(entries))
    return b"\x0a" + _varint(len(entries)) + entries, message


class EncodeExamplesTest(tf.test.TestCase):
    def _check(self, features: dict[str, np.ndarray]) -> None:
        encoded = records.encode_examples({name: tf.constant(value) for name, value in features.items()})
        encoded = encoded.numpy().tolist()
        self.assertLen(encoded, len(next(iter(features.values()))))
        for index, got in enumerate(encoded):
            row = {name: features[name][index] for name in records.FEATURE_ORDER if name in features}
            expected, message = _protobuf_bytes(row)
            self.assertEqual(got, expected)
            self.assertEqual(tf.train.Example.FromString(got), message)
            parsed = message.features.feature
            for name, values in row.items():
                kind = "float_list" if name in records.FLOAT_FEATURES else "int64_list"
                self.assertAllClose(getattr(parsed[name], kind).value, values)

    def test_random_pretraining_records(self):
        rng = np.random.default_rng(0)
        for batch, seq, predictions in ((1, 5, 1), (7, 128, 20), (3, 512, 76)):
            self._check(
                {
                    "input_ids": rng.integers(0, 120_000, [batch, seq]),
                    "input_mask": rng.integers(0, 2, [batch, seq]),
                    "segment_ids": rng.integers(0, 2, [batch, seq]),
                    "masked_lm_positions": rng.integers(0, seq, [batch, predictions]),
                    "masked_lm_ids": rng.integers(0, 120_000, [batch, predictions]),
                    "masked_lm_weights": rng.random([batch, predictions]).astype(np.float32),
                    "next_sentence_labels": rng.integers(0, 2, [batch, 1]),
                }
            )

    def test_lengths_past_two_byte_varints_and_extreme_values(self):
        # 3,000 ten-byte varints: feature and message lengths need three-byte varints.
        rng = np.random.default_rng(1)
        values = rng.integers(-(2**63), 2**63 - 1, [2, 3000], dtype=np.int64)
        values[0, :4] = [0, -1, 2**63 - 1, -(2**63)]
        self._check({"input_ids": values, "next_sentence_labels": np.array([[0], [1]])})

    def test_unmasked_records_and_unknown_features(self):
        self._check({"input_ids": np.array([[101, 7, 102]]), "next_sentence_labels": np.array([[1]])})
        with self.assertRaisesRegex(ValueError, "unknown features"):
            records.encode_examples({"input_ids": tf.zeros([1, 3], tf.int64), "labels": tf.zeros([1, 1])})


if __name__ == "__main__":
    tf.test.main()
