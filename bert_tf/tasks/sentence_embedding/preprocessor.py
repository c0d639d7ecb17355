"""Texts -> features: each text packed alone, `[CLS] text [SEP]`, as sentence-transformers does."""

from __future__ import annotations

import tensorflow as tf

from bert_tf.preprocessing.base import MODEL_INPUTS, Preprocessor
from bert_tf.preprocessing.segments import combine_segments

# Buckets of the two hashes that tell one positive text from another (float32 holds them exactly).
_HASH_BUCKETS = 2**24


def text_keys(texts: tf.Tensor) -> tf.Tensor:
    """Two hashes of each text, float32 [batch, 2]: equal rows are equal texts (a chance of
    2**-48 otherwise), what the in-batch loss finds a positive's duplicates by."""
    keys = [tf.strings.to_hash_bucket_strong(texts, _HASH_BUCKETS, key) for key in ([1, 2], [3, 4])]
    return tf.cast(tf.stack(keys, axis=1), tf.float32)


class TextsPreprocessor(Preprocessor):
    """(text [batch], ...) -> features [batch, texts, length], every text packed on its own.

    Args:
      scored: whether labels are the pairs' scores; otherwise (in-batch negatives) a batch's
        labels are `text_keys` of its second texts, the positives.

    Features: the model inputs, `trimmed` [batch] (any of the example's texts cut at
    `sequence_length`), and with two texts or more `positive_keys` [batch, 2].
    """

    def __init__(self, tokenizer, sequence_length: int, pad_to_multiple_of: int | None, scored: bool = False):
        super().__init__(tokenizer, sequence_length, pad_to_multiple_of)
        self.scored = scored

    def features(self, x) -> dict[str, tf.Tensor]:
        x = tuple(x) if isinstance(x, (tuple, list)) else (x,)
        count = len(x)
        texts = tf.reshape(tf.stack(x, axis=1), [-1])  # [batch * texts]: an example's texts in a row
        packed = combine_segments(
            [self.tokenizer.tokenize(texts)],
            self.sequence_length,
            *self.special_ids,
            self.pad_to_multiple_of,
            return_trimmed=True,
        )
        length = tf.shape(packed["input_ids"])[1]
        features = {name: tf.reshape(packed[name], [-1, count, length]) for name in MODEL_INPUTS}
        features["trimmed"] = tf.reduce_any(tf.reshape(packed["trimmed"], [-1, count]), axis=1)
        if count > 1:
            features["positive_keys"] = text_keys(x[1])
        return features

    def labels(self, y, features=None) -> tf.Tensor:
        return tf.cast(y, tf.float32) if self.scored else features["positive_keys"]
