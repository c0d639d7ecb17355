"""Token tagging (NER): words and their tags in, word-piece features and piece labels out.

Each word is word-piece tokenized (a word of only removed characters becomes `[UNK]`, so
every word keeps a position); its tag labels its first piece, and the other pieces,
`[CLS]`, `[SEP]` and padding get `IGNORE_LABEL` (-1), which the loss and metrics skip.
Words that no longer fit in `sequence_length` are cut, with every word after them.

Example:

>>> import tensorflow as tf
>>> from bert_tf.tokenization import BertTokenizer
>>> preprocessor = TokenTaggerPreprocessor(
...     BertTokenizer("tests/fixtures/bert_uncased_vocab.txt"), 16, label_list=["O", "B-LOC"])
>>> x, y = preprocessor(tf.ragged.constant([["in", "unaffable"]]), tf.ragged.constant([["O", "B-LOC"]]))
>>> x["input_ids"].numpy().tolist(), y.numpy().tolist()
([[101, 1999, 14477, 20961, 3468, 102, 0, 0]], [[-1, 0, 1, -1, -1, -1, -1, -1]])
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.preprocessing.base import LabelledPreprocessor
from bert_tf.preprocessing.segments import combine_segments, flat_pieces, pad_rows

IGNORE_LABEL = -1


class TokenTaggerPreprocessor(LabelledPreprocessor):
    """Features of word sequences for a token classifier.

    `x` is ragged tf.string [batch, (words)] (a CoNLL sentence), or tf.string [batch] of
    raw text, split into words as the tokenizer's BasicTokenizer splits. `y` holds the
    words' tags, ragged [batch, (words)] strings of `label_list` (or their indices).
    Besides the model inputs, `features` returns `word_positions`, ragged int32
    [batch, (words)]: where each word's first piece is in the row (-1 when it was cut),
    to read predictions back per word, and `trimmed` [batch] bool.
    """

    def word_pieces(self, words: tf.RaggedTensor) -> tf.RaggedTensor:
        """Ragged strings [batch, (words)] -> ids [batch, (words), (pieces)], every word >= 1 piece."""
        pieces = flat_pieces(self.tokenizer.tokenize(words.flat_values))  # [all words, (pieces)]
        empty = tf.cast(tf.equal(pieces.row_lengths(), 0), tf.int64)
        unknown = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(empty)], tf.constant(self.tokenizer.unk_id, tf.int64)), empty
        )
        return words.with_flat_values(tf.concat([pieces, unknown], axis=1))

    def _kept(self, pieces: tf.RaggedTensor):
        """(kept [b, (w)] bool, first-piece position [b, (w)] int64) of the words that fit."""
        counts = pieces.row_lengths(axis=2)  # [b, (w)]
        flat = counts.flat_values
        row_start = tf.gather(tf.concat([[0], tf.cumsum(flat)], axis=0), counts.row_starts())
        before = tf.cumsum(flat, exclusive=True) - tf.repeat(row_start, counts.row_lengths())
        kept = before + flat <= self.sequence_length - 2  # [CLS] and [SEP] take two positions
        return counts.with_flat_values(kept), counts.with_flat_values(1 + before)

    def features(self, x) -> dict[str, tf.Tensor]:
        if not isinstance(x, tf.RaggedTensor):
            x = self.tokenizer.split_words(tf.convert_to_tensor(x, tf.string))
        pieces = self.word_pieces(x)  # [b, (w), (p)]
        kept, first = self._kept(pieces)
        packed = combine_segments(
            [tf.ragged.boolean_mask(pieces, kept).merge_dims(1, 2)],
            self.sequence_length,
            *self.special_ids,
            self.pad_to_multiple_of,
        )
        packed["trimmed"] = ~tf.reduce_all(kept, axis=1)
        positions = tf.where(kept.flat_values, first.flat_values, tf.constant(-1, tf.int64))
        packed["word_positions"] = kept.with_flat_values(tf.cast(positions, tf.int32))
        packed["_pieces"] = pieces
        packed["_kept"] = kept
        return packed

    def labels(self, y, features) -> tf.Tensor:
        """Piece labels int32 [batch, length]: the tag on first pieces, -1 elsewhere."""
        pieces, kept = features["_pieces"], features["_kept"]
        tags = self.lookup(self._labels, y, self.label_list) if self.label_list else tf.cast(y, tf.int32)
        counts = pieces.row_lengths(axis=2)  # [b, (w)]
        position = tf.ragged.range(counts.flat_values)  # [all words, (pieces)]: 0 = first piece
        word_tag = tf.repeat(tags.flat_values, counts.flat_values)
        first = position.with_flat_values(tf.where(tf.equal(position.flat_values, 0), word_tag, IGNORE_LABEL))
        piece_labels = tf.ragged.boolean_mask(counts.with_flat_values(first), kept).merge_dims(1, 2)
        ignore = tf.fill([piece_labels.nrows(), 1], tf.constant(IGNORE_LABEL, tf.int32))
        rows = tf.concat([ignore, tf.cast(piece_labels, tf.int32), ignore], axis=1)
        return pad_rows(rows, tf.shape(features["input_ids"])[1], IGNORE_LABEL)
