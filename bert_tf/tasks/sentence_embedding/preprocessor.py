"""Texts -> features: each text packed alone, `[CLS] text [SEP]`, as sentence-transformers does;
with `doc_stride`, a long text as windows of it (`bert_tf.preprocessing.windows`)."""

from __future__ import annotations

import tensorflow as tf

from bert_tf.preprocessing.base import MODEL_INPUTS, Preprocessor
from bert_tf.preprocessing.segments import combine_segments, flat_pieces
from bert_tf.preprocessing.windows import check_doc_stride, doc_windows, take_windows

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
      doc_stride: read a text longer than a row as overlapping windows starting every this
        many pieces, each window a row of its own (None: cut it, as sentence-transformers does).
      rows: single texts as rows [batch, length], to be packed (`bert_tf.preprocessing.packing`).

    Features: the model inputs, `trimmed` [batch] (any of the example's texts cut at
    `sequence_length`), and with two texts or more `positive_keys` [batch, 2]. With
    `doc_stride` the inputs are [windows, 1, length], one row per window of every text, with
    `example_index` [windows] (the example) and `text_index` [windows] (which of its texts).
    """

    def __init__(
        self,
        tokenizer,
        sequence_length: int,
        pad_to_multiple_of: int | None,
        scored: bool = False,
        doc_stride: int | None = None,
        rows: bool = False,
    ):
        super().__init__(tokenizer, sequence_length, pad_to_multiple_of)
        self.scored, self.rows = scored, rows
        self.doc_stride = check_doc_stride(doc_stride, self.sequence_length - 2)

    @property
    def windowed(self) -> bool:
        return self.doc_stride is not None

    def features(self, x) -> dict[str, tf.Tensor]:
        x = tuple(x) if isinstance(x, (tuple, list)) else (x,)
        count = len(x)
        texts = tf.reshape(tf.stack(x, axis=1), [-1])  # [batch * texts]: an example's texts in a row
        pieces = self.tokenizer.tokenize(texts)
        if self.doc_stride is not None:
            features = self._windows(flat_pieces(pieces), count)
        else:
            packed = combine_segments(
                [pieces],
                self.sequence_length,
                *self.special_ids,
                self.pad_to_multiple_of,
                return_trimmed=True,
            )
            length = tf.shape(packed["input_ids"])[1]
            shape = [-1, length] if self.rows and count == 1 else [-1, count, length]
            features = {name: tf.reshape(packed[name], shape) for name in MODEL_INPUTS}
            features["trimmed"] = tf.reduce_any(tf.reshape(packed["trimmed"], [-1, count]), axis=1)
        if count > 1:
            features["positive_keys"] = text_keys(x[1])
            if self.doc_stride is not None:  # a window's labels are its example's
                features["positive_keys"] = tf.gather(features["positive_keys"], features["example_index"])
        return features

    def _windows(self, pieces: tf.RaggedTensor, count: int) -> dict[str, tf.Tensor]:
        """Every text's windows ([batch * texts, (pieces)] in), each a row [windows, 1, length]."""
        room = tf.fill(tf.shape(pieces.row_lengths()), tf.cast(self.sequence_length - 2, tf.int64))
        windows = doc_windows(pieces.row_lengths(), room, self.doc_stride)
        packed = combine_segments(
            [take_windows(pieces, windows)], self.sequence_length, *self.special_ids, self.pad_to_multiple_of
        )
        features = {name: packed[name][:, None, :] for name in MODEL_INPUTS}
        text = tf.cast(windows.example, tf.int32)  # [windows]: the text of the batch each reads
        features["example_index"], features["text_index"] = text // count, text % count
        features["trimmed"] = tf.zeros_like(text, tf.bool)  # windows cut nothing
        return features

    def labels(self, y, features=None) -> tf.Tensor:
        if not self.scored:
            return features["positive_keys"]
        y = tf.cast(y, tf.float32)
        return tf.gather(y, features["example_index"]) if "example_index" in features else y
