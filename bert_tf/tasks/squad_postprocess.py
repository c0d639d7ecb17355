"""SQuAD post-processing: start/end logits of every window → answer text per question.

As the original run_squad.py: for each question, the `n_best_size` highest start and
end logits of each window form candidate spans (inside the context, end ≥ start, at most
`max_answer_length` pieces, starting where the window has the most context for that
piece); candidates are ranked by start + end logit, their pieces are mapped back to the
original context text, and duplicates are dropped. For SQuAD 2.0 the null answer
(`[CLS]`, the lowest-scoring null over the windows) competes too, and the question is
answered "" when null score − best span score > `null_score_diff_threshold`.

Example (window pieces `[CLS] where ? [SEP] in paris [SEP]`, context "In Paris."):

>>> from bert_tf.tasks.squad import SquadExample, SquadFeature
>>> from bert_tf.tasks.squad_postprocess import postprocess
>>> example = SquadExample("q1", "where?", ["In", "Paris."])
>>> feature = SquadFeature(1, 0, 0, ["[CLS]", "where", "?", "[SEP]", "in", "paris", ".", "[SEP]"],
...     {4: 0, 5: 1, 6: 1}, {4: True, 5: True, 6: True}, [], [], [])
>>> start = [0, 0, 0, 0, 1, 5, 0, 0]; end = [0, 0, 0, 0, 1, 5, 2, 0]
>>> predictions, nbest, null_odds = postprocess([example], [feature], [start], [end])
>>> predictions
{'q1': 'Paris'}
"""

from __future__ import annotations

import collections
import json
import math
import os
import unicodedata
from collections.abc import Sequence

import numpy as np

from bert_tf import fileio
from bert_tf.tasks.squad import SquadExample, SquadFeature

_Candidate = collections.namedtuple("_Candidate", "feature_index start end start_logit end_logit")


def _top_indexes(logits: Sequence[float], n: int) -> list[int]:
    order = sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)
    return order[:n]


def _softmax(scores: Sequence[float]) -> list[float]:
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [value / total for value in exps]


def _comparable(text: str, lower_case: bool) -> tuple[str, list[int]]:
    """`text` as the tokenizer sees it, without whitespace, and each char's source index.

    Lower-casing and accent stripping can change the number of characters ("İ" lower-cases
    to two), so the map is kept per character rather than assuming equal lengths.
    """
    chars, sources = [], []
    for index, char in enumerate(text):
        if char.isspace():
            continue
        if lower_case:
            normalized = unicodedata.normalize("NFD", char.lower())
            normalized = "".join(c for c in normalized if unicodedata.category(c) != "Mn")
        else:
            normalized = char
        for piece in normalized:
            chars.append(piece)
            sources.append(index)
    return "".join(chars), sources


def final_text(predicted: str, original: str, lower_case: bool) -> str:
    """Projects the predicted (normalised, word-piece) text back onto the original text.

    `original` is the whitespace-separated doc tokens the predicted pieces came from
    ("Smith's," for the prediction "smith"): the predicted characters are located in the
    normalised original (whitespace ignored) and the matching original characters are
    returned, with their case, accents and inner spacing. If the prediction cannot be
    found (it contains `[UNK]`, say), the whole original span is returned, as in the
    original get_final_text.
    """
    target = "".join(predicted.split())
    normalized, sources = _comparable(original, lower_case)
    position = normalized.find(target) if target else -1
    if position < 0:
        return original
    return original[sources[position] : sources[position + len(target) - 1] + 1]


def _piece_text(pieces: Sequence[str]) -> str:
    text = " ".join(pieces).replace(" ##", "").replace("##", "")
    return " ".join(text.split())


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
    only for SQuAD 2.0).
    """
    if len(features) != len(start_logits) or len(features) != len(end_logits):
        raise ValueError(
            f"{len(features)} features but {len(start_logits)} start / {len(end_logits)} end logit rows"
        )
    by_example: dict[int, list[int]] = collections.defaultdict(list)
    for feature_index, feature in enumerate(features):
        by_example[feature.example_index].append(feature_index)

    predictions, nbest_json, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        candidates = []
        null_score, null_feature, null_start, null_end = math.inf, 0, 0.0, 0.0
        for feature_index in by_example.get(example_index, []):
            feature = features[feature_index]
            starts = [float(x) for x in np.asarray(start_logits[feature_index])]
            ends = [float(x) for x in np.asarray(end_logits[feature_index])]
            if version_2_with_negative and starts[0] + ends[0] < null_score:
                null_score, null_feature = starts[0] + ends[0], feature_index
                null_start, null_end = starts[0], ends[0]
            num_tokens = len(feature.tokens)
            for start in _top_indexes(starts, n_best_size):
                for end in _top_indexes(ends, n_best_size):
                    if start >= num_tokens or end >= num_tokens:
                        continue
                    if start not in feature.token_to_orig_map or end not in feature.token_to_orig_map:
                        continue
                    if not feature.token_is_max_context.get(start, False):
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    candidates.append(_Candidate(feature_index, start, end, starts[start], ends[end]))
        if version_2_with_negative and null_score < math.inf:
            candidates.append(_Candidate(null_feature, 0, 0, null_start, null_end))
        candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)

        seen, nbest = set(), []
        for candidate in candidates:
            if len(nbest) >= n_best_size:
                break
            if candidate.start > 0:
                feature = features[candidate.feature_index]
                pieces = feature.tokens[candidate.start : candidate.end + 1]
                orig_start = feature.token_to_orig_map[candidate.start]
                orig_end = feature.token_to_orig_map[candidate.end]
                original = " ".join(example.doc_tokens[orig_start : orig_end + 1])
                text = final_text(_piece_text(pieces), original, lower_case)
            else:
                text = ""
            if text in seen:
                continue
            seen.add(text)
            nbest.append((text, candidate.start_logit, candidate.end_logit))
        if version_2_with_negative and "" not in seen:
            nbest.append(("", null_start, null_end))
        if not nbest:  # no valid span at all: keep the output well-formed
            nbest.append(("empty", 0.0, 0.0))

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
        difference = null_score - best_span[1] - best_span[2]
        null_odds[example.qas_id] = difference
        predictions[example.qas_id] = "" if difference > null_score_diff_threshold else best_span[0]
    return predictions, nbest_json, null_odds


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
