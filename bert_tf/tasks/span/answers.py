"""SQuAD answers from start/end logits, as TensorFlow ops: the one post-processing.

Evaluation (`bert_tf.tasks.span.postprocess`) and the task SavedModel
(`bert_tf.serving.task`) both run these ops on the windows' logits, so a SavedModel
answers what evaluation scores. The rules are the original run_squad.py's:

- `ranked_spans`: in each window, the `n_best_size` highest start logits and the
  `n_best_size` highest end logits (the lower position first on a tie) pair into
  candidate spans; a span is kept when both ends are context pieces of the window, its
  start has its max context there, end >= start and it is at most `max_answer_length`
  pieces long. The candidates of a question are ranked by start + end logit (float64, as
  the original's Python floats), ties in the order the original lists them (window, then
  start rank, then end rank).
- `null_answers` (SQuAD 2.0): the lowest [CLS] start + end logit over the windows.
- `answer_texts`: the original's `get_final_text`. The span's pieces, joined and
  de-"##"ed, are looked up (first occurrence, spaces included) in the basic-tokenized text
  of the span's doc tokens joined by single spaces; if found, and that tokenized text has
  as many characters as the doc tokens once spaces are removed, the characters found are
  cut from the doc tokens' text; otherwise the doc tokens' whole text is the answer.

Example (one window `[CLS] where ? [SEP] in paris . [SEP]`, doc tokens "In Paris."):

>>> tokens = tf.constant([["[CLS]", "where", "?", "[SEP]", "in", "paris", ".", "[SEP]"]])
>>> to_orig = tf.constant([[-1, -1, -1, -1, 0, 1, 1, -1]])
>>> start = tf.constant([[0, 0, 0, 0, 1, 5, 0, 0]], tf.float32)
>>> end = tf.constant([[0, 0, 0, 0, 1, 5, 2, 0]], tf.float32)
>>> spans = ranked_spans(start, end, to_orig, to_orig >= 0, tf.constant([8]), tf.constant([0]), 1,
...     n_best_size=20, max_answer_length=30)
>>> spans.start.to_list(), spans.end.to_list()  # (5, 5) scores 10, (5, 6) 7, (4, 5) 6, ...
([[5, 5, 4, 4, 4, 6]], [[5, 6, 5, 6, 4, 6]])
>>> best = best_answers(spans, None, n_best_size=20)
>>> from bert_tf.basic_tokenizer import BasicTokenizer
>>> texts = answer_texts(tokens, to_orig, best.window, best.start, best.end,
...     tf.ragged.constant([["In", "Paris."]]), tf.constant([0]), BasicTokenizer().tokenize)
>>> texts.text.numpy().tolist()
[b'Paris']
"""

from __future__ import annotations

import typing
from collections.abc import Callable

import numpy as np
import tensorflow as tf

# The original starts its search for the lowest null score at this "large and positive" score.
_NULL_SCORE_START = 1000000.0
# The characters Python's str.split() splits on (the original cleans the span's text with it).
_PYTHON_WHITESPACE = (
    "[\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
    "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]+"
)
_SPACE = 32  # the only character get_final_text removes before aligning


class RankedSpans(typing.NamedTuple):
    """The candidate spans of each question, best first: each ragged [examples, (candidates)]."""

    window: tf.Tensor  # int64 row of the window in the logits
    start: tf.Tensor  # int64 first and last position in that window
    end: tf.Tensor
    start_logit: tf.Tensor  # float64
    end_logit: tf.Tensor


class NullAnswers(typing.NamedTuple):
    """SQuAD 2.0: the null ([CLS]) answer of each question, [examples] float64."""

    score: tf.Tensor  # the lowest start + end logit at [CLS] over its windows
    start_logit: tf.Tensor  # that window's [CLS] logits (0 when there is none)
    end_logit: tf.Tensor


class AnswerTexts(typing.NamedTuple):
    """get_final_text of each span: the text and where it lies among the span's doc tokens."""

    text: tf.Tensor  # tf.string [n]
    first_word: tf.Tensor  # int64 [n] doc token of the text's first character
    first_char: tf.Tensor  # int64 [n] that character's code point offset in its doc token
    last_word: tf.Tensor  # int64 [n] doc token of the text's last character
    last_char: tf.Tensor  # int64 [n] that character's offset in its doc token (inclusive)


def _float64(logits) -> tf.Tensor:
    logits = tf.convert_to_tensor(logits)
    return tf.cast(tf.cast(logits, tf.float32) if logits.dtype != tf.float64 else logits, tf.float64)


def ranked_spans(
    start_logits,
    end_logits,
    token_to_orig,
    token_is_max_context,
    num_tokens,
    example_index,
    num_examples,
    *,
    n_best_size: int,
    max_answer_length: int,
) -> RankedSpans:
    """The valid candidate spans of every question, ranked as the original ranks them.

    Args:
      start_logits, end_logits: [windows, seq] logits of every window.
      token_to_orig: [windows, seq] int, the doc token of each context position, -1 elsewhere.
      token_is_max_context: [windows, seq] bool, whether the window has the position's max context.
      num_tokens: [windows] int, the window's pieces before padding (positions beyond are
        never ranked, as they are not in the original's windows).
      example_index: [windows] int, the question of each window; a question's windows are
        in the order they read its context (they need not be adjacent).
      num_examples: the number of questions.
    """
    start_logits, end_logits = _float64(start_logits), _float64(end_logits)  # [w, seq]
    token_to_orig = tf.cast(token_to_orig, tf.int64)
    example_index = tf.cast(example_index, tf.int64)
    seq_length = tf.shape(start_logits, out_type=tf.int64)[1]
    positions = tf.range(seq_length)
    real = positions[None, :] < tf.cast(num_tokens, tf.int64)[:, None]  # [w, seq]
    k = tf.minimum(tf.cast(n_best_size, tf.int64), seq_length)
    # top_k lists equal values lower index first, as the original's stable sort does.
    starts = tf.cast(
        tf.math.top_k(tf.where(real, start_logits, -np.inf), k=tf.cast(k, tf.int32)).indices, tf.int64
    )
    ends = tf.cast(
        tf.math.top_k(tf.where(real, end_logits, -np.inf), k=tf.cast(k, tf.int32)).indices, tf.int64
    )

    def at(values, index):  # values[w, index[w, i]]
        return tf.gather(values, index, batch_dims=1)

    can_start = (
        at(real, starts)
        & (at(token_to_orig, starts) >= 0)
        & at(tf.cast(token_is_max_context, tf.bool), starts)
    )
    can_end = at(real, ends) & (at(token_to_orig, ends) >= 0)
    start, end = starts[:, :, None], ends[:, None, :]  # [w, k, 1], [w, 1, k]
    valid = (
        can_start[:, :, None] & can_end[:, None, :] & (end >= start) & (end - start + 1 <= max_answer_length)
    )
    start_logit = tf.broadcast_to(at(start_logits, starts)[:, :, None], tf.shape(valid))  # [w, k, k]
    end_logit = tf.broadcast_to(at(end_logits, ends)[:, None, :], tf.shape(valid))
    window = tf.broadcast_to(tf.range(tf.shape(valid, out_type=tf.int64)[0])[:, None, None], tf.shape(valid))
    # The valid pairs in the original's listing order (window, start rank, end rank).
    pick = tf.where(valid)  # [candidates, 3]
    window = tf.gather_nd(window, pick)
    start = tf.gather_nd(tf.broadcast_to(start, tf.shape(valid)), pick)
    end = tf.gather_nd(tf.broadcast_to(end, tf.shape(valid)), pick)
    start_logit, end_logit = tf.gather_nd(start_logit, pick), tf.gather_nd(end_logit, pick)
    example = tf.gather(example_index, window)
    # Best score first, ties kept in listing order (stable sorts), then grouped by question.
    order = tf.argsort(-(start_logit + end_logit), stable=True)
    order = tf.gather(order, tf.argsort(tf.gather(example, order), stable=True))

    def per_example(values):
        return tf.RaggedTensor.from_value_rowids(
            tf.gather(values, order), tf.gather(example, order), nrows=tf.cast(num_examples, tf.int64)
        )

    return RankedSpans(*(per_example(v) for v in (window, start, end, start_logit, end_logit)))


def null_answers(start_logits, end_logits, example_index, num_examples) -> NullAnswers:
    """The null answer of each question: its window with the lowest [CLS] start + end logit
    (the first of those on a tie); a question whose windows all score 1e6 or more keeps the
    original's starting score 1e6 with logits 0."""
    start_logits, end_logits = _float64(start_logits)[:, 0], _float64(end_logits)[:, 0]  # [w]
    example_index = tf.cast(example_index, tf.int64)
    num_examples = tf.cast(num_examples, tf.int64)
    scores = start_logits + end_logits
    lowest = tf.math.unsorted_segment_min(scores, example_index, num_examples)  # [b]
    window = tf.range(tf.shape(scores, out_type=tf.int64)[0])
    is_lowest = tf.equal(scores, tf.gather(lowest, example_index))
    first = tf.math.unsorted_segment_min(
        tf.where(is_lowest, window, tf.int64.max), example_index, num_examples
    )
    found = lowest < _NULL_SCORE_START
    first = tf.where(found, first, 0)
    return NullAnswers(
        score=tf.where(found, lowest, _NULL_SCORE_START),
        start_logit=tf.where(found, tf.gather(start_logits, first), 0.0),
        end_logit=tf.where(found, tf.gather(end_logits, first), 0.0),
    )


def piece_text(pieces: tf.RaggedTensor) -> tf.Tensor:
    """[n, (pieces)] piece strings -> [n] their text as the original cleans it: joined by
    spaces, "##" removed, whitespace runs made one space, stripped."""
    text = tf.strings.reduce_join(pieces, axis=1, separator=" ")
    text = tf.strings.regex_replace(text, " ##", "")
    text = tf.strings.regex_replace(text, "##", "")
    text = tf.strings.regex_replace(text, _PYTHON_WHITESPACE, " ")
    return tf.strings.regex_replace(text, "^ | $", "")


def _per_row(values: tf.Tensor, rows: tf.RaggedTensor) -> tf.Tensor:
    """[n] -> one value per element of ragged `rows` [n, (k)], flat: the row's value.

    Flat arithmetic instead of ragged broadcasting, whose shape checks cost seconds per trace.
    """
    return tf.gather(values, rows.value_rowids())


def _take(rows: tf.RaggedTensor, index: tf.Tensor) -> tf.Tensor:
    """rows[i, index[i]] (index in range)."""
    return tf.gather(rows.flat_values, rows.row_starts() + index)


def _row_sum(values: tf.Tensor, rows: tf.RaggedTensor) -> tf.Tensor:
    """Sums of flat `values` laid out as `rows` [n, (k)] -> [n]."""
    return tf.math.unsorted_segment_sum(values, rows.value_rowids(), rows.nrows())


def _find(tok: tf.RaggedTensor, pred: tf.RaggedTensor, tok_position: tf.Tensor, n) -> tf.Tensor:
    """tok_text.find(pred_text) per row of code points [n, (chars)]: the first position, or
    int64 max where pred is not in tok. `tok_position` is each flat character's position in its row."""
    pred_length = pred.row_lengths()
    # The positions holding pred's first character, checked whole.
    padded = tf.concat([pred.flat_values, [-1]], axis=0)  # an empty prediction's "first character": -1
    first_char = tf.gather(
        padded, tf.where(pred_length > 0, pred.row_starts(), tf.size(pred.flat_values, tf.int64))
    )
    fits = tok_position + _per_row(pred_length, tok) <= _per_row(tok.row_lengths(), tok)
    is_candidate = fits & tf.equal(tok.flat_values, _per_row(first_char, tok))
    candidate = tf.boolean_mask(tok_position, is_candidate)  # [c]
    row = tf.boolean_mask(tok.value_rowids(), is_candidate)  # [c]
    # Each candidate's characters against pred's: [c, (pred chars)], flat.
    compared = tf.ragged.range(tf.gather(pred_length, row))
    offset, of_candidate = compared.flat_values, compared.value_rowids()
    tok_char = tf.gather(
        tok.flat_values, tf.gather(tf.gather(tok.row_starts(), row) + candidate, of_candidate) + offset
    )
    pred_char = tf.gather(
        pred.flat_values, tf.gather(tf.gather(pred.row_starts(), row), of_candidate) + offset
    )
    mismatches = tf.math.unsorted_segment_sum(
        tf.cast(tf.not_equal(tok_char, pred_char), tf.int64),
        of_candidate,
        tf.shape(candidate, out_type=tf.int64)[0],
    )
    return tf.math.unsorted_segment_min(tf.where(mismatches == 0, candidate, tf.int64.max), row, n)


def final_texts(predicted: tf.Tensor, doc_words: tf.RaggedTensor, split_words: Callable) -> AnswerTexts:
    """get_final_text of `predicted` [n] (cleaned piece text) in the doc tokens [n, (words)].

    `split_words` is the basic tokenizer of the model's casing (strings [n] -> normalized
    words [n, (words)]). Positions are code points, as the original's Python strings.
    """
    original = tf.strings.reduce_join(doc_words, axis=1, separator=" ")  # [n] orig_text
    tokenized = tf.strings.reduce_join(split_words(original), axis=1, separator=" ")  # [n] tok_text
    orig = tf.strings.unicode_decode(original, "UTF-8")  # [n, (chars)]
    tok = tf.strings.unicode_decode(tokenized, "UTF-8")
    pred = tf.strings.unicode_decode(predicted, "UTF-8")
    pred_length = pred.row_lengths()
    n = tf.shape(predicted, out_type=tf.int64)[0]

    tok_position = tf.ragged.range(tok.row_lengths()).flat_values  # flat, like tok.flat_values
    found_at = _find(tok, pred, tok_position, n)  # [n]
    found = found_at < tf.int64.max
    start_position = tf.where(found, found_at, 0)

    # Align the two texts without their spaces: the k-th non-space characters correspond.
    def non_space_positions(chars):  # [n, (non-space chars)] positions of the non-space chars
        kept = tf.not_equal(chars.flat_values, _SPACE)
        positions = tf.ragged.range(chars.row_lengths()).flat_values
        return tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(positions, kept), tf.boolean_mask(chars.value_rowids(), kept), nrows=n
        )

    orig_kept, tok_kept = non_space_positions(orig), non_space_positions(tok)
    same_length = tf.equal(orig_kept.row_lengths(), tok_kept.row_lengths())
    tok_space = tf.equal(tok.flat_values, _SPACE)
    spaces_before = _row_sum(
        tf.cast(tok_space & (tok_position < _per_row(start_position, tok)), tf.int64), tok
    )
    pred_kept = pred_length - _row_sum(tf.cast(tf.equal(pred.flat_values, _SPACE), tf.int64), pred)
    ns_start = start_position - spaces_before
    ns_end = ns_start + pred_kept - 1
    ok = found & same_length & (pred_length > 0)
    last_kept = tf.maximum(orig_kept.row_lengths() - 1, 0)
    orig_start = _take(orig_kept, tf.clip_by_value(tf.where(ok, ns_start, 0), 0, last_kept))
    orig_end = _take(orig_kept, tf.clip_by_value(tf.where(ok, ns_end, 0), 0, last_kept))
    # Otherwise the doc tokens' whole text, as the original.
    orig_start = tf.where(ok, orig_start, 0)
    orig_end = tf.where(ok, orig_end, orig.row_lengths() - 1)
    text = tf.strings.substr(
        original,
        tf.cast(orig_start, tf.int32),
        tf.cast(orig_end - orig_start + 1, tf.int32),
        unit="UTF8_CHAR",
    )

    # Where the text lies: the doc token holding each end, and the offset inside it.
    word_length = tf.cast(tf.strings.length(doc_words.flat_values, unit="UTF8_CHAR"), tf.int64)
    before = tf.cumsum(word_length + 1, exclusive=True)  # flat, over all rows
    row_base = tf.gather(tf.concat([before, [0]], axis=0), doc_words.row_starts())
    word_start = before - _per_row(row_base, doc_words)  # in its row's orig_text

    def word_and_char(position):
        word = _row_sum(tf.cast(word_start <= _per_row(position, doc_words), tf.int64), doc_words) - 1
        return word, position - tf.gather(word_start, doc_words.row_starts() + word)

    first_word, first_offset = word_and_char(orig_start)
    last_word, last_offset = word_and_char(orig_end)
    return AnswerTexts(text, first_word, first_offset, last_word, last_offset)


def answer_texts(
    tokens, token_to_orig, window, start, end, doc_words, example_index, split_words
) -> AnswerTexts:
    """The text of spans (`window`, `start`, `end` [n], as `ranked_spans` gives them).

    `tokens` [windows, seq] are the windows' piece strings, `token_to_orig` [windows, seq]
    their doc tokens, `doc_words` [examples, (doc tokens)] the questions' contexts split on
    whitespace, `example_index` [windows] the question of each window. `first_word` and
    `last_word` of the result count from the question's first doc token.
    """
    tokens = tf.convert_to_tensor(tokens, tf.string)
    seq_length = tf.shape(tokens, out_type=tf.int64)[1]
    window, start, end = (tf.cast(v, tf.int64) for v in (window, start, end))
    to_orig = tf.cast(token_to_orig, tf.int64)
    row_start = window * seq_length
    pieces = tf.gather(tf.reshape(tokens, [-1]), tf.ragged.range(row_start + start, row_start + end + 1))
    first_word = tf.gather_nd(to_orig, tf.stack([window, start], axis=1))
    last_word = tf.gather_nd(to_orig, tf.stack([window, end], axis=1))
    example = tf.gather(tf.cast(example_index, tf.int64), window)
    words_start = tf.gather(doc_words.row_starts(), example)
    words = tf.gather(
        doc_words.flat_values, tf.ragged.range(words_start + first_word, words_start + last_word + 1)
    )
    texts = final_texts(piece_text(pieces), words, split_words)
    return texts._replace(first_word=texts.first_word + first_word, last_word=texts.last_word + first_word)


class BestAnswers(typing.NamedTuple):
    """The answer of each question, [examples] (what evaluation's predictions.json holds)."""

    window: tf.Tensor  # int64: the best span (0 where there is none)
    start: tf.Tensor
    end: tf.Tensor
    score: tf.Tensor  # float64 start + end logit of the best span (-inf: none)
    has_span: tf.Tensor  # bool: a valid span exists (and is in the n-best list)
    has_answer: tf.Tensor  # bool: has_span and, SQuAD 2.0, null odds <= the threshold
    null_odds: tf.Tensor  # float64 SQuAD 2.0 null score - best span score (0 without a span)


def best_answers(
    ranked: RankedSpans,
    null: NullAnswers | None,
    *,
    n_best_size: int,
    null_score_diff_threshold: float = 0.0,
) -> BestAnswers:
    """The first span of each question's ranking, and for SQuAD 2.0 (`null` given) whether
    it beats the null answer: null score - its start logit - its end logit <= threshold."""
    count = ranked.window.row_lengths()
    has_span = count > 0

    def first(values, default):
        padded = tf.concat([values.flat_values, [default]], axis=0)
        return tf.gather(
            padded, tf.where(has_span, values.row_starts(), tf.size(values.flat_values, tf.int64))
        )

    window, start, end = first(ranked.window, 0), first(ranked.start, 0), first(ranked.end, 0)
    start_logit, end_logit = first(ranked.start_logit, 0.0), first(ranked.end_logit, 0.0)
    score = tf.where(has_span, start_logit + end_logit, -np.inf)
    if null is None:
        return BestAnswers(window, start, end, score, has_span, has_span, tf.zeros_like(score))
    # The null answer ranks after the spans scoring at least as much; with n_best_size 1 it
    # can fill the n-best list alone, which then holds no span.
    has_span &= (n_best_size > 1) | ~(score < null.score)
    null_odds = tf.where(has_span, null.score - start_logit - end_logit, 0.0)
    has_answer = has_span & (null_odds <= null_score_diff_threshold)
    return BestAnswers(window, start, end, score, has_span, has_answer, null_odds)
