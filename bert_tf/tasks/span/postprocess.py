"""SQuAD post-processing: start/end logits of every window → answer text per question.

The original run_squad.py's `write_predictions`, on the ops the task SavedModel runs too
(`bert_tf.tasks.span.answers`), so that a SavedModel answers what evaluation scores: for
each question, the `n_best_size` highest start and end logits of each window form
candidate spans (inside the context, end ≥ start, at most `max_answer_length` pieces,
starting where the window has the most context for that piece); candidates are ranked
by start + end logit, their text is the original's `get_final_text`, and duplicates are
dropped. For SQuAD 2.0 the null answer (`[CLS]`, the lowest-scoring null over the
windows) competes too, and the question is answered "" when null score − best span score
> `null_score_diff_threshold`.

Example (window pieces `[CLS] where ? [SEP] in paris [SEP]`, context "In Paris."):

>>> from bert_tf.tasks.span.squad import SquadExample, SquadFeature
>>> from bert_tf.tasks.span.postprocess import postprocess
>>> example = SquadExample("q1", "where?", ["In", "Paris."])
>>> feature = SquadFeature(1, 0, 0, ["[CLS]", "where", "?", "[SEP]", "in", "paris", ".", "[SEP]"],
...     {4: 0, 5: 1, 6: 1}, {4: True, 5: True, 6: True}, [], [], [])
>>> start = [0, 0, 0, 0, 1, 5, 0, 0]; end = [0, 0, 0, 0, 1, 5, 2, 0]
>>> predictions, nbest, null_odds = postprocess([example], [feature], [start], [end])
>>> predictions
{'q1': 'Paris'}
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.basic_tokenizer import BasicTokenizer
from bert_tf.tasks.span import answers as squad_answers
from bert_tf.tasks.span.squad import SquadExample, SquadFeature


@functools.lru_cache(maxsize=2)
def _basic_tokenizer(lower_case: bool) -> BasicTokenizer:
    return BasicTokenizer(lower_case=lower_case)


_MATRIX = tf.TensorSpec([None, None], tf.int64)
_VECTOR = tf.TensorSpec([None], tf.int64)


@functools.lru_cache(maxsize=4)
def _ranked_spans(n_best_size: int, max_answer_length: int):
    """squad_answers.ranked_spans as one graph (eager ragged ops cost seconds here)."""

    def ranked(start_logits, end_logits, token_to_orig, max_context, num_tokens, example_index, num_examples):
        return squad_answers.ranked_spans(
            start_logits,
            end_logits,
            token_to_orig,
            max_context,
            num_tokens,
            example_index,
            num_examples,
            n_best_size=n_best_size,
            max_answer_length=max_answer_length,
        )

    logits = tf.TensorSpec([None, None], tf.float64)
    return tf.function(  # plain graph code: no AutoGraph conversion (seconds per trace)
        ranked,
        input_signature=[
            logits,
            logits,
            _MATRIX,
            tf.TensorSpec([None, None], tf.bool),
            _VECTOR,
            _VECTOR,
            tf.TensorSpec([], tf.int64),
        ],
        autograph=False,
    )


@functools.lru_cache(maxsize=2)
def _answer_texts(lower_case: bool):
    """squad_answers.answer_texts with the basic tokenizer of `lower_case`, as one graph."""
    split_words = _basic_tokenizer(lower_case).tokenize

    def texts(token_strings, token_ids, token_to_orig, window, start, end, doc_words, example_index):
        # Only the spans' windows become strings: [n, seq].
        tokens = tf.gather(token_strings, tf.gather(token_ids, window))
        return squad_answers.answer_texts(
            tokens,
            tf.gather(token_to_orig, window),
            tf.range(tf.shape(window, out_type=tf.int64)[0]),
            start,
            end,
            doc_words,
            tf.gather(example_index, window),
            split_words,
        )

    words = tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1, row_splits_dtype=tf.int64)
    signature = [
        tf.TensorSpec([None], tf.string),
        _MATRIX,
        _MATRIX,
        _VECTOR,
        _VECTOR,
        _VECTOR,
        words,
        _VECTOR,
    ]
    return tf.function(texts, input_signature=signature, autograph=False)


def _softmax(scores: Sequence[float]) -> list[float]:
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [value / total for value in exps]


def final_text(predicted: str, original: str, lower_case: bool) -> str:
    """The original get_final_text of one span: `predicted` (the span's pieces joined,
    "##" removed) projected onto `original` (its doc tokens joined by spaces); see
    `bert_tf.tasks.span.answers`."""
    words = tf.strings.split(tf.constant([original]), sep=" ")
    texts = squad_answers.final_texts(tf.constant([predicted]), words, _basic_tokenizer(lower_case).tokenize)
    return texts.text.numpy()[0].decode()  # eager: for single spans (tests, examples)


class _Windows:
    """The features as the arrays `squad_answers` reads: [windows, seq], padded."""

    def __init__(self, features, start_logits, end_logits) -> None:
        count = len(features)
        seq = max([len(feature.tokens) for feature in features], default=1)
        # The pieces as numbers into `token_strings` (the distinct pieces): 4 million strings
        # for SQuAD dev would cost hundreds of MB.
        number = {"[PAD]": 0}
        self.token_ids = np.zeros([count, seq], np.int64)
        self.token_to_orig = np.full([count, seq], -1, np.int64)
        self.max_context = np.zeros([count, seq], bool)
        self.start_logits = np.zeros([count, seq], np.float64)
        self.end_logits = np.zeros([count, seq], np.float64)
        self.num_tokens = np.zeros([count], np.int64)
        self.example_index = np.zeros([count], np.int64)
        for row, feature in enumerate(features):
            length = len(feature.tokens)
            self.token_ids[row, :length] = [number.setdefault(token, len(number)) for token in feature.tokens]
            for position, word in feature.token_to_orig_map.items():
                self.token_to_orig[row, position] = word
                self.max_context[row, position] = feature.token_is_max_context.get(position, False)
            # float32 logits are read exactly as float32 (the model's), float64 as given.
            for logits, target in (
                (start_logits[row], self.start_logits),
                (end_logits[row], self.end_logits),
            ):
                values = np.asarray(logits)
                values = values.astype(np.float32) if values.dtype != np.float64 else values
                kept = min(length, values.shape[0])
                target[row, :kept] = values[:kept]
            self.num_tokens[row] = length
            self.example_index[row] = feature.example_index
        self.token_strings = list(number)


def postprocess(
    examples: Sequence[SquadExample],
    features: Sequence[SquadFeature],
    start_logits: Sequence[Sequence[float]],
    end_logits: Sequence[Sequence[float]],
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    lower_case: bool = True,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> tuple[dict[str, str], dict[str, list[dict]], dict[str, float]]:
    """Answers from logits (one row per feature, aligned with `features`).

    Returns (predictions: qas_id → text, nbest: qas_id → ranked candidates with text,
    probability, start_logit, end_logit, null_odds: qas_id → null score − best span score,
    only for SQuAD 2.0). A question without any valid span is answered "" (the original
    writes the placeholder "empty"; the SavedModel answers "" too).
    """
    if len(features) != len(start_logits) or len(features) != len(end_logits):
        raise ValueError(
            f"{len(features)} features but {len(start_logits)} start / {len(end_logits)} end logit rows"
        )
    windows = _Windows(features, start_logits, end_logits)
    num_examples = len(examples)
    ranked = _ranked_spans(n_best_size, max_answer_length)(
        windows.start_logits,
        windows.end_logits,
        windows.token_to_orig,
        windows.max_context,
        windows.num_tokens,
        windows.example_index,
        tf.constant(num_examples, tf.int64),
    )
    splits = ranked.window.row_splits.numpy()
    window, start, end, start_logit, end_logit = (values.flat_values.numpy() for values in ranked)
    if version_2_with_negative:
        null = squad_answers.null_answers(
            windows.start_logits, windows.end_logits, windows.example_index, num_examples
        )
        null_score, null_start, null_end = (values.numpy() for values in null)
    else:
        null_score = null_start = null_end = None
    texts = _TextsOnDemand(examples, windows, window, start, end, lower_case)
    nbests = _nbest_lists(
        texts, splits, start_logit, end_logit, n_best_size, null_score, null_start, null_end
    )
    predictions, nbest_json, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        nbest = nbests[example_index]
        if not nbest:  # no valid span at all: "" (see the docstring)
            nbest.append(("", 0.0, 0.0))
        probabilities = _softmax([start + end for _, start, end in nbest])
        nbest_json[example.qas_id] = [
            {"text": text, "probability": probability, "start_logit": start, "end_logit": end}
            for (text, start, end), probability in zip(nbest, probabilities, strict=True)
        ]
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0][0]
            continue
        best_span = next((entry for entry in nbest if entry[0]), None)
        if best_span is None:
            predictions[example.qas_id] = ""
            null_odds[example.qas_id] = 0.0
            continue
        difference = float(null_score[example_index]) - best_span[1] - best_span[2]
        null_odds[example.qas_id] = difference
        predictions[example.qas_id] = "" if difference > null_score_diff_threshold else best_span[0]
    return predictions, nbest_json, null_odds


def _nbest_lists(texts, splits, start_logit, end_logit, n_best_size, null_score, null_start, null_end):
    """The original's n-best list per example: (text, start_logit, end_logit) candidates best
    first, each text once, at most n_best_size entries; with `null_score` (SQuAD 2.0) the null
    answer "" after the spans scoring at least as much, or last if it did not fit. Texts are
    computed in rounds, for the candidates that can still enter some list."""
    num_examples = len(splits) - 1
    nbests: list[list[tuple[str, float, float]]] = [[] for _ in range(num_examples)]
    seen: list[set[str]] = [set() for _ in range(num_examples)]
    cursor = splits[:-1].copy()
    null_position = np.full(num_examples, -1)
    with_null = null_score is not None
    if with_null:
        scores = start_logit + end_logit
        for example in range(num_examples):
            row = scores[splits[example] : splits[example + 1]]
            null_position[example] = splits[example] + int(np.sum(row >= null_score[example]))
    null_taken = np.zeros(num_examples, bool)
    pending = list(range(num_examples))
    while pending:
        wanted: list[int] = []
        blocked = []
        for example in pending:
            nbest, row_end = nbests[example], splits[example + 1]
            while len(nbest) < n_best_size:
                at = cursor[example]
                if with_null and not null_taken[example] and at == null_position[example]:
                    null_taken[example] = True
                    seen[example].add("")
                    nbest.append(("", float(null_start[example]), float(null_end[example])))
                    continue
                if at >= row_end:
                    break
                text = texts.get(at)
                if text is None:
                    wanted.extend(
                        c
                        for c in range(at, min(row_end, at + n_best_size - len(nbest)))
                        if texts.get(c) is None
                    )
                    blocked.append(example)
                    break
                cursor[example] += 1
                if text not in seen[example]:
                    seen[example].add(text)
                    nbest.append((text, float(start_logit[at]), float(end_logit[at])))
        texts.compute(wanted)
        pending = blocked
    if with_null:
        for example in range(num_examples):
            if "" not in seen[example]:
                nbests[example].append(("", float(null_start[example]), float(null_end[example])))
    return nbests


class _TextsOnDemand:
    """The get_final_text of ranked candidates, computed in batches when first needed."""

    def __init__(self, examples, windows: _Windows, window, start, end, lower_case: bool) -> None:
        self._window, self._start, self._end = window, start, end
        self._texts: dict[int, str] = {}
        self._windows = windows
        self._token_strings = tf.constant(windows.token_strings, tf.string)
        self._answer_texts = _answer_texts(lower_case)
        self._doc_words = None
        self._examples = examples

    def get(self, candidate: int) -> str | None:
        return self._texts.get(candidate)

    def compute(self, candidates: list[int]) -> None:
        if not candidates:
            return
        if self._doc_words is None:
            lengths = [len(example.doc_tokens) for example in self._examples]
            flat = [word for example in self._examples for word in example.doc_tokens]
            self._doc_words = tf.RaggedTensor.from_row_lengths(
                tf.constant(flat, tf.string, shape=[len(flat)]), tf.constant(lengths, tf.int64)
            )
        index = np.asarray(candidates, np.int64)
        texts = self._answer_texts(
            self._token_strings,
            self._windows.token_ids,
            self._windows.token_to_orig,
            self._window[index],
            self._start[index],
            self._end[index],
            self._doc_words,
            self._windows.example_index,
        )
        for candidate, text in zip(candidates, texts.text.numpy(), strict=True):
            self._texts[candidate] = text.decode()


def write_predictions(
    output_dir: str | os.PathLike,
    predictions: dict[str, str],
    nbest: dict[str, list[dict]],
    null_odds: dict[str, float] | None = None,
) -> list[str]:
    """Writes predictions.json, nbest_predictions.json (and null_odds.json for v2.0)."""
    fileio.makedirs(output_dir)
    outputs = [("predictions.json", predictions), ("nbest_predictions.json", nbest)]
    if null_odds:
        outputs.append(("null_odds.json", null_odds))
    paths = []
    for name, content in outputs:
        path = os.path.join(os.fspath(output_dir), name)
        with fileio.writing(path) as handle:
            json.dump(content, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        paths.append(path)
    return paths
