"""Span extraction (SQuAD): question and context in, one feature per context window out.

The rules of the original run_squad.py, as TensorFlow ops over a whole batch:

- The context is split on whitespace into words (" \\t\\r\\n" and U+202F), each word is
  word-piece tokenized; the question is cut to `max_query_length` pieces.
- Windows: the context's pieces are read in windows of sequence_length - len(question) - 3
  pieces (`[CLS] question [SEP] window [SEP]`), starting every min(window, doc_stride)
  pieces, until one reaches the end of the context. (An empty context gets one empty
  window, where the original makes none, so that every question has a row.)
- Max context: a piece read by several windows is scored only in the one where it has the
  most context, min(pieces left, pieces right) + 0.01 * window length (the first on a tie).
- Training answers (text and character offset in the context) become the first and last
  piece of the answer's words, narrowed to the pieces of the answer text itself where
  they occur inside; a window that does not hold the whole answer, and an unanswerable
  question (answer offset -1), point at `[CLS]` (0, 0).

Example (one example, a 10-piece context, windows of up to 4 pieces every 3):

>>> windows = doc_windows(tf.constant([10], tf.int64), tf.constant([4], tf.int64), doc_stride=3)
>>> windows.start.numpy().tolist(), windows.length.numpy().tolist()
([0, 3, 6], [4, 4, 4])
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.preprocessing.base import Preprocessor
from bert_tf.preprocessing.segments import combine_segments, flat_pieces
from bert_tf.preprocessing.windows import doc_windows, is_max_context, take_windows

# The original run_squad's whitespace for splitting a context into words.
CONTEXT_WHITESPACE = "[ \\t\\r\\n\\x{202F}]+"


class SpanPreprocessor(Preprocessor):
    """Window features of (question, context) pairs for a span labeler.

    `x` is a pair of tf.string [batch] tensors (question, context); `y` (training) a pair
    (answer text tf.string [batch], answer start int [batch]: the answer's character offset
    in the context, -1 for an unanswerable question). The output has one row per window
    ([windows] instead of [batch]); the labels are `{"start_logits": [windows],
    "end_logits": [windows]}` positions. `features` also returns, per window,
    `example_index` (its question's row of the batch), `token_to_orig` [windows, length]
    (the context word of each position, -1 outside the context), `token_is_max_context`
    [windows, length] and `trimmed` (the question was cut), which post-processing reads.

    Args:
      tokenizer: a `bert_tf.tokenization.BertTokenizer`.
      sequence_length: packed length of a window.
      doc_stride, max_query_length: as the original run_squad (128 and 64).
      pad_to_multiple_of: dynamic padding (see `Preprocessor`).
    """

    def __init__(
        self,
        tokenizer,
        sequence_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
        pad_to_multiple_of: int | None = 8,
        name: str | None = None,
    ) -> None:
        super().__init__(tokenizer, sequence_length, pad_to_multiple_of, name=name)
        if sequence_length < 5:
            raise ValueError(f"sequence_length {sequence_length} leaves no room for a question and a context")
        if doc_stride < 1 or max_query_length < 1:
            raise ValueError(
                f"doc_stride ({doc_stride}) and max_query_length ({max_query_length}) must be positive"
            )
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)

    @property
    def windowed(self) -> bool:
        return True  # a long context makes several windows

    def context_words(self, context: tf.Tensor):
        """(words, begin, end byte offsets), ragged [batch, (words)]: the original's split."""
        return tf_text.regex_split_with_offsets(context, CONTEXT_WHITESPACE)

    def features(self, x) -> dict[str, tf.Tensor]:
        question, context = (tf.convert_to_tensor(text, tf.string) for text in x)
        query = flat_pieces(self.tokenizer.tokenize(question))
        trimmed = query.row_lengths() > self.max_query_length
        query = query[:, : self.max_query_length]  # [b, (q)]
        words, _, _ = self.context_words(context)
        pieces = words.with_flat_values(flat_pieces(self.tokenizer.tokenize(words.flat_values)))
        context_pieces = pieces.merge_dims(1, 2)  # [b, (p)]
        # As the original, a question may leave no room only if it is that long.
        max_pieces = self.sequence_length - 3 - query.row_lengths()
        check = tf.debugging.assert_positive(
            max_pieces,
            message=f"sequence length {self.sequence_length} leaves no room for the context after a question "
            f"of up to max_query_length={self.max_query_length} pieces (CLS, question, SEP, context, SEP); "
            "raise the sequence length (--max_seq_length) or lower --max_query_length",
        )
        with tf.control_dependencies([check]):
            max_pieces = tf.identity(max_pieces)
        windows = doc_windows(context_pieces.row_lengths(), max_pieces, self.doc_stride)
        window_query, window_context = (
            tf.gather(query, windows.example),
            take_windows(context_pieces, windows),
        )
        packed = combine_segments(
            [window_query, window_context], self.sequence_length, *self.special_ids, self.pad_to_multiple_of
        )
        length = tf.shape(packed["input_ids"], out_type=tf.int64)[1]
        positions = tf.range(length)[None, :]  # [1, length]
        offset = window_query.row_lengths() + 2  # [w] first context position: [CLS] question [SEP]
        in_context = (positions >= offset[:, None]) & (positions < (offset + windows.length)[:, None])
        doc_position = windows.start[:, None] + positions - offset[:, None]  # [w, length]
        word_of_piece = word_index_of_pieces(pieces)  # [b, (p)]
        flat_index = tf.gather(context_pieces.row_starts(), windows.example)[:, None] + doc_position
        flat_index = tf.where(in_context, flat_index, 0)
        orig = tf.gather(tf.concat([word_of_piece.flat_values, [-1]], axis=0), flat_index)
        packed.update(
            example_index=tf.cast(windows.example, tf.int32),
            token_to_orig=tf.cast(tf.where(in_context, orig, -1), tf.int32),
            token_is_max_context=in_context & is_max_context(windows, doc_position),
            trimmed=tf.gather(trimmed, windows.example),
            _windows=windows,
            _query_length=window_query.row_lengths(),
            _context=context,
            _pieces=pieces,
        )
        return packed

    def labels(self, y, features) -> dict[str, tf.Tensor]:
        """{"start_logits", "end_logits"}: int32 [windows] answer positions (0: [CLS])."""
        answer_text, answer_start = y
        answer_text = tf.convert_to_tensor(answer_text, tf.string)
        answer_start = tf.cast(answer_start, tf.int64)
        context, pieces, windows = features["_context"], features["_pieces"], features["_windows"]
        first_piece, last_piece = answer_pieces(
            self.tokenizer, context, self.context_words(context)[1], pieces, answer_text, answer_start
        )
        possible = answer_start >= 0
        start = tf.gather(first_piece, windows.example)  # [w] in the context's pieces
        end = tf.gather(last_piece, windows.example)
        inside = (
            tf.gather(possible, windows.example)
            & (windows.start <= start)
            & (end <= windows.start + windows.length - 1)
        )
        offset = features["_query_length"] + 2 - windows.start
        return {
            "start_logits": tf.cast(tf.where(inside, start + offset, 0), tf.int32),
            "end_logits": tf.cast(tf.where(inside, end + offset, 0), tf.int32),
        }


def word_index_of_pieces(pieces: tf.RaggedTensor) -> tf.RaggedTensor:
    """[batch, (words), (pieces)] -> for each piece, the index of its word in its text."""
    word_ids = tf.ragged.range(pieces.row_lengths())  # [b, (w)]: 0..words-1
    counts = pieces.row_lengths(axis=2).flat_values
    flat = tf.repeat(word_ids.flat_values, counts)
    return tf.RaggedTensor.from_row_lengths(flat, tf.reduce_sum(pieces.row_lengths(axis=2), axis=1))


def answer_pieces(tokenizer, context, word_begin, pieces, answer_text, answer_start):
    """([b], [b]) first and last piece of each answer in its context's pieces (int64).

    The answer's first and last characters give its first and last word (a character
    between words belongs to the word before it, as the original's char_to_word_offset);
    their pieces are narrowed to the first run of pieces equal to the answer text's own
    pieces, when there is one inside. Rows with `answer_start` < 0 get (0, 0).
    """
    possible = answer_start >= 0
    start_char = tf.maximum(answer_start, 0)
    num_chars = tf.cast(tf.strings.length(answer_text, unit="UTF8_CHAR"), tf.int64)
    last_char = tf.maximum(start_char + num_chars - 1, start_char)

    def byte_offset(chars):
        prefix = tf.strings.substr(
            context, tf.zeros_like(chars, tf.int32), tf.cast(chars, tf.int32), unit="UTF8_CHAR"
        )
        return tf.cast(tf.strings.length(prefix), tf.int64)

    def word_at(byte):  # the last word beginning at or before `byte`
        return tf.reduce_sum(tf.cast(word_begin <= byte[:, None], tf.int64), axis=1) - 1

    first_word = tf.maximum(word_at(byte_offset(start_char)), 0)
    last_word = tf.maximum(word_at(byte_offset(last_char)), first_word)
    counts = pieces.row_lengths(axis=2)  # [b, (w)]
    starts = tf.cumsum(counts, axis=1, exclusive=True)  # [b, (w)] first piece of each word
    num_pieces = tf.reduce_sum(counts, axis=1)
    first = _take(starts, first_word)
    last = tf.where(last_word + 1 < counts.row_lengths(), _take(starts, last_word + 1) - 1, num_pieces - 1)
    # Narrow to the answer's own pieces: the first start c in [first, last - m + 1] with
    # context[c : c + m] == answer.
    answer = flat_pieces(tokenizer.tokenize(answer_text))  # [b, (m)]
    m = answer.row_lengths()
    candidates = tf.ragged.range(first, tf.maximum(first, last - m + 2))  # [b, (k)]
    example = candidates.value_rowids()
    flat_candidates = candidates.flat_values
    offsets = tf.ragged.range(tf.gather(m, example))  # [candidates, (m)]
    context_flat = pieces.merge_dims(1, 2)
    at = tf.gather(context_flat.row_starts(), example)[:, None] + flat_candidates[:, None] + offsets
    wanted = tf.gather(answer, example)
    equal = tf.reduce_all(tf.equal(tf.gather(context_flat.flat_values, at), wanted), axis=1)
    equal &= tf.gather(m, example) > 0
    match = candidates.with_flat_values(tf.where(equal, flat_candidates, tf.int64.max))
    best = tf.reduce_min(match, axis=1)  # int64.max where nothing matched
    found = best < tf.int64.max
    first, last = tf.where(found, best, first), tf.where(found, best + m - 1, last)
    return tf.where(possible, first, 0), tf.where(possible, last, 0)


def _take(rows: tf.RaggedTensor, index: tf.Tensor) -> tf.Tensor:
    """rows[i, index[i]] for every row i of ragged [b, (n)]; 0 where index[i] is not in the row."""
    inside = (index >= 0) & (index < rows.row_lengths())
    padded = tf.concat([rows.flat_values, tf.zeros([1], rows.dtype)], axis=0)
    flat_index = tf.where(inside, rows.row_starts() + index, tf.size(rows.flat_values, out_type=tf.int64))
    return tf.gather(padded, flat_index)
