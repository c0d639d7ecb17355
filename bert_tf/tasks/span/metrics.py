"""SQuAD's scores: exact match and F1 by the rules of the official evaluation script of the
data's version (v1.1 or v2.0); `squad_scores` says which rule comes from which script.

Example:

>>> from bert_tf.tasks.span import metrics
>>> metrics.squad_exact_match("The Eiffel Tower!", "eiffel tower")
1.0
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

# --- SQuAD (official evaluation scripts v1.1 and v2.0) ---------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and articles, collapse whitespace (both scripts)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_exact_match(prediction: str, gold: str) -> float:
    """1.0 when the two answers are equal after normalisation (both scripts)."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction: str, gold: str, version_2_with_negative: bool = True) -> float:
    """Token-bag F1 of two answers after normalisation.

    The scripts differ only when an answer normalises to empty: the v2.0 script scores
    1 when both are empty (two "no answer"s agree) and 0 when one is; the v1.1 script
    scores 0 whenever no token is shared, so two empty answers score 0 there
    (`version_2_with_negative=False`).
    """
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if version_2_with_negative and (not prediction_tokens or not gold_tokens):
        return float(prediction_tokens == gold_tokens)
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset: Sequence[Mapping]):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def is_squad_v2(dataset: Sequence[Mapping]) -> bool:
    """Whether a SQuAD `data` list is SQuAD 2.0: a question marked `is_impossible`
    (every 2.0 file has the field) or one without answers (every 1.1 question has one)."""
    return any("is_impossible" in qa or not qa.get("answers") for qa in _questions(dataset))


def squad_scores(
    dataset: Sequence[Mapping],
    predictions: Mapping[str, str],
    null_odds: Mapping[str, float] | None = None,
    *,
    version_2_with_negative: bool | None = None,
    null_odds_threshold: float = 1.0,
) -> dict[str, float]:
    """Scores predictions on a SQuAD dataset exactly as the official script of its version.

    SQuAD 1.1 (the v1.1 script's rules): a question's score is its best over all its gold
    answer texts; `exact_match` and `f1` are percentages over all questions.

    SQuAD 2.0 (the v2.0 script's rules):
    - a question is answerable (counted in `HasAns_*`) when its raw `answers` list is not
      empty, whatever the texts normalise to; `is_impossible` is not read;
    - its gold answers are the texts that do not normalise to "", or [""] when none is
      left, so only an empty prediction matches a question whose answers are all
      articles or punctuation;
    - with `null_odds` (the script's `--na-prob-file`), a question whose null odds exceed
      `null_odds_threshold` (its `--na-prob-thresh`, 1.0 by default) counts as answered
      "no answer" in `exact_match`, `f1` and the breakdowns; pass `math.inf` for the
      scores of the predictions as they are;
    - `best_exact`/`best_f1` come from visiting the questions of `null_odds` in increasing
      order of odds (ties in the dict's order), from abstaining everywhere: each question
      answered adds its score if answerable, or -1 if unanswerable and its prediction
      is not ""; the best running total, over all questions, and the odds where it was
      reached (`best_*_thresh`, the `null_score_diff_threshold` to use) are reported.

    A question without a prediction scores 0 in every figure (the v1.1 script's rule; the
    v2.0 script stops on it).

    Args:
      dataset: the `data` list of a SQuAD JSON file (articles → paragraphs → qas).
      predictions: question id → predicted answer text ("" for no answer).
      null_odds: question id → null score − best span score (SQuAD 2.0), one for every
        predicted question.
      version_2_with_negative: which script's rules to follow; by default SQuAD 2.0 when
        `null_odds` is given or `is_squad_v2(dataset)`.
      null_odds_threshold: see above (SQuAD 2.0 with `null_odds` only).

    Returns:
      `exact_match`, `f1` (percent) and `total`; for SQuAD 2.0 also `HasAns_*`/`NoAns_*`
      (exact, f1, total) when such questions exist, and the `best_*` figures with
      `null_odds`.
    """
    if version_2_with_negative is None:
        version_2_with_negative = null_odds is not None or is_squad_v2(dataset)
    if not version_2_with_negative:
        if null_odds is not None:
            raise ValueError(
                "null odds were given for SQuAD 1.1 scoring; they only exist for SQuAD 2.0 "
                "(pass version_2_with_negative=True, or drop null_odds)"
            )
        return _squad_v1_scores(dataset, predictions)
    return _squad_v2_scores(dataset, predictions, null_odds, null_odds_threshold)


def _squad_v1_scores(dataset, predictions) -> dict[str, float]:
    exact = f1 = 0.0
    total = 0
    for qa in _questions(dataset):
        total += 1
        golds = [answer["text"] for answer in qa.get("answers", [])]
        if not golds:
            raise ValueError(
                f"SQuAD question {qa['id']!r} has no gold answer, which SQuAD 1.1 scoring needs; "
                "score SQuAD 2.0 data as such (version_2_with_negative=True; the squad_v2 task)"
            )
        prediction = predictions.get(qa["id"])
        if prediction is None:
            continue
        exact += max(squad_exact_match(prediction, gold) for gold in golds)
        f1 += max(squad_f1(prediction, gold, version_2_with_negative=False) for gold in golds)
    if not total:
        raise ValueError("the SQuAD dataset has no questions to score")
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total, "total": total}


def _squad_v2_scores(dataset, predictions, null_odds, null_odds_threshold) -> dict[str, float]:
    # Keyed by question id, as the v2.0 script is: a repeated id counts once.
    raw_exact, raw_f1, has_answer = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        answers = [answer["text"] for answer in qa.get("answers", [])]
        has_answer[qid] = bool(answers)
        golds = [text for text in answers if normalize_answer(text)] or [""]
        prediction = predictions.get(qid)
        if prediction is None:
            raw_exact[qid] = raw_f1[qid] = 0.0
            continue
        raw_exact[qid] = max(squad_exact_match(prediction, gold) for gold in golds)
        raw_f1[qid] = max(squad_f1(prediction, gold) for gold in golds)
    if not has_answer:
        raise ValueError("the SQuAD dataset has no questions to score")
    predicted = [qid for qid in has_answer if qid in predictions]

    exact, f1 = raw_exact, raw_f1
    if null_odds is not None:
        missing = [qid for qid in predicted if qid not in null_odds]
        if missing:
            raise ValueError(
                f"null_odds has no value for {len(missing)} predicted questions (first {missing[0]!r}); "
                "give one per question, as squad_postprocess.postprocess returns them"
            )
        abstained = {qid for qid in predicted if null_odds[qid] > null_odds_threshold}
        exact, f1 = (
            {qid: float(not has_answer[qid]) if qid in abstained else score for qid, score in scores.items()}
            for scores in (raw_exact, raw_f1)
        )

    overall = _percentages(exact, f1, list(has_answer))
    results = {"exact_match": overall["exact"], "f1": overall["f1"], "total": overall["total"]}
    for prefix, answerable in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has in has_answer.items() if has == answerable]
        if qids:
            results.update(
                {f"{prefix}_{name}": value for name, value in _percentages(exact, f1, qids).items()}
            )
    if null_odds is not None:
        for name, scores in (("exact", raw_exact), ("f1", raw_f1)):
            best, threshold = _best_null_threshold(predictions, scores, null_odds, has_answer)
            results[f"best_{name}"] = best
            results[f"best_{name}_thresh"] = threshold
    return results


def _percentages(exact, f1, qids) -> dict[str, float]:
    return {
        "exact": 100.0 * sum(exact[qid] for qid in qids) / len(qids),
        "f1": 100.0 * sum(f1[qid] for qid in qids) / len(qids),
        "total": len(qids),
    }


def _best_null_threshold(predictions, scores, null_odds, has_answer) -> tuple[float, float]:
    """The null-odds threshold that maximises the total score (the v2.0 script's search).

    From abstaining everywhere (every predicted unanswerable question right), questions
    are answered one by one in increasing null odds, in the order of `null_odds` for
    ties; questions not predicted, or not in the dataset, are passed over.
    """
    current = best = sum(1 for qid, has in has_answer.items() if not has and qid in predictions)
    best_threshold = 0.0
    for qid in sorted(null_odds, key=lambda q: null_odds[q]):
        if qid not in has_answer or qid not in predictions:
            continue
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        if current > best:
            best, best_threshold = current, null_odds[qid]
    return 100.0 * best / len(scores), float(best_threshold)
