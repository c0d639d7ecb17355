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
from bert_tf.preprocessing.windows import doc_windows, is_max_context, take_windows

IGNORE_LABEL = -1


class TokenTaggerPreprocessor(LabelledPreprocessor):
    """Features of word sequences for a token classifier.

    `x` is ragged tf.string [batch, (words)] (a CoNLL sentence), or tf.string [batch] of
    raw text, split into words as the tokenizer's BasicTokenizer splits. `y` holds the
    words' tags, ragged [batch, (words)] strings of `label_list` (or their indices).
    Besides the model inputs, `features` returns `word_positions`, ragged int32
    [batch, (words)]: where each word's first piece is in the row (-1 when it was cut),
    to read predictions back per word (`word_logits`), `num_words` [batch] and `trimmed`
    [batch] bool.

    With `doc_stride` (`bert_tf.preprocessing.windows`) nothing is cut: a sentence longer
    than a row is read in overlapping windows of sequence_length - 2 pieces, every
    `doc_stride` pieces, one row per window (`example_index` [windows] names its
    sentence). Training labels every word whose first piece is in the window;
    `word_positions` [windows, (words of its sentence)] holds a word only in the window
    where its first piece has the most context (run_squad's rule), so each word is read
    from exactly one window.
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
        if self.doc_stride is not None:
            return self._window_features(pieces)
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
        packed["num_words"] = tf.cast(kept.row_lengths(), tf.int32)
        packed["_pieces"] = pieces
        packed["_kept"] = kept
        return packed

    def _window_features(self, pieces: tf.RaggedTensor) -> dict[str, tf.Tensor]:
        text = pieces.merge_dims(1, 2)  # [b, (p)]
        room = tf.fill(tf.shape(text.row_lengths()), tf.constant(self.sequence_length - 2, tf.int64))
        windows = doc_windows(text.row_lengths(), room, self.doc_stride)
        packed = combine_segments(
            [take_windows(text, windows)], self.sequence_length, *self.special_ids, self.pad_to_multiple_of
        )
        _, first = self._kept(pieces)  # [b, (w)] each word's first piece, 1 + its place in the text
        window_first = tf.gather(first - 1, windows.example)  # [w, (words)] first piece in the text
        dense_first = window_first.to_tensor(default_value=-1)
        best = is_max_context(windows, dense_first)  # [w, words]: False where the window lacks it
        position = tf.where(best, dense_first - windows.start[:, None] + 1, -1)  # +1: [CLS]
        packed["word_positions"] = tf.RaggedTensor.from_tensor(
            tf.cast(position, tf.int32), lengths=window_first.row_lengths()
        )
        packed["num_words"] = tf.cast(window_first.row_lengths(), tf.int32)
        packed["example_index"] = tf.cast(windows.example, tf.int32)
        packed["trimmed"] = tf.zeros_like(windows.example, tf.bool)  # windows cut nothing
        packed["_pieces"] = pieces
        packed["_windows"] = windows
        return packed

    def labels(self, y, features) -> tf.Tensor:
        """Piece labels int32 [rows, length]: the tag on first pieces, -1 elsewhere."""
        pieces = features["_pieces"]
        tags = self.lookup(self._labels, y, self.label_list) if self.label_list else tf.cast(y, tf.int32)
        counts = pieces.row_lengths(axis=2)  # [b, (w)]
        position = tf.ragged.range(counts.flat_values)  # [all words, (pieces)]: 0 = first piece
        word_tag = tf.repeat(tags.flat_values, counts.flat_values)
        first = position.with_flat_values(tf.where(tf.equal(position.flat_values, 0), word_tag, IGNORE_LABEL))
        if "_windows" in features:
            piece_labels = take_windows(counts.with_flat_values(first).merge_dims(1, 2), features["_windows"])
        else:
            piece_labels = tf.ragged.boolean_mask(counts.with_flat_values(first), features["_kept"])
            piece_labels = piece_labels.merge_dims(1, 2)
        ignore = tf.fill([piece_labels.nrows(), 1], tf.constant(IGNORE_LABEL, tf.int32))
        rows = tf.concat([ignore, tf.cast(piece_labels, tf.int32), ignore], axis=1)
        return pad_rows(rows, tf.shape(features["input_ids"])[1], IGNORE_LABEL)


def word_logits(logits: tf.Tensor, features: dict, words: tf.RaggedTensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Each word's logits, read at its first piece: (logits [all words, labels], read [all
    words] bool: False for a word cut by sequence_length), the words of `words` [b, (w)]
    flattened, from the rows' `logits` [rows, length, labels] and their `features`. With
    windows, a word is read in the one window where `word_positions` holds it."""
    positions = features["word_positions"]  # [rows, (words of the row's text)]
    row = positions.value_rowids()
    example = (
        tf.gather(tf.cast(features["example_index"], tf.int64), row) if "example_index" in features else row
    )
    word = tf.range(tf.size(positions.flat_values, tf.int64)) - tf.gather(positions.row_starts(), row)
    target = tf.gather(words.row_starts(), example) + word  # [rows' words] index into the texts' words
    found = positions.flat_values >= 0
    where = tf.stack([row, tf.cast(positions.flat_values, tf.int64)], axis=1)
    num_words = tf.reshape(tf.size(words.flat_values, tf.int64), [1])
    target = tf.boolean_mask(target, found)[:, None]
    values = tf.gather_nd(logits, tf.boolean_mask(where, found))  # [found, labels]
    shape = tf.concat([num_words, tf.shape(logits, out_type=tf.int64)[2:]], axis=0)
    return tf.scatter_nd(target, values, shape), tf.scatter_nd(
        target, tf.ones_like(target[:, 0], tf.bool), num_words
    )
