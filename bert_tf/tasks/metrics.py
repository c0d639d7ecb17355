"""Evaluation metrics of the fine-tuning tasks, computed as their benchmarks define them.

Classification and regression metrics come from scikit-learn and scipy, entity-level NER
scores from seqeval. SQuAD exact match and F1 follow the official evaluation scripts
(v1.1 and v2.0): answers are normalised (lower case, punctuation and the articles
a/an/the removed, whitespace collapsed) before comparing, F1 is over bags of tokens, and
each question takes its best score over the gold answers.

Example:

>>> from bert_tf.tasks import metrics
>>> metrics.classification_metrics([1, 0, 1, 1], [1, 0, 0, 1], ("accuracy", "f1"))
{'accuracy': 0.75, 'f1': 0.8}
>>> metrics.squad_exact_match("The Eiffel Tower!", "eiffel tower")
1.0
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np

# --- classification and regression ----------------------------------------------------

CLASSIFICATION_METRICS = ("accuracy", "f1", "matthews_corrcoef")
REGRESSION_METRICS = ("pearson", "spearman")


def classification_metrics(
    labels: Sequence[int], predictions: Sequence[int], names: Sequence[str] = ("accuracy",)
) -> dict[str, float]:
    """Computes the named metrics of integer class predictions against integer labels.

    `f1` is the binary F1 of class 1 (as GLUE reports it for MRPC and QQP).
    """
    from sklearn import metrics as sk

    labels = np.asarray(labels)
    predictions = np.asarray(predictions)
    results = {}
    for name in names:
        if name == "accuracy":
            results[name] = float(sk.accuracy_score(labels, predictions))
        elif name == "f1":
            results[name] = float(sk.f1_score(labels, predictions, average="binary", zero_division=0))
        elif name == "matthews_corrcoef":
            results[name] = float(sk.matthews_corrcoef(labels, predictions))
        else:
            raise ValueError(f"unknown classification metric {name!r}; use one of {CLASSIFICATION_METRICS}")
    return results


def regression_metrics(labels: Sequence[float], predictions: Sequence[float]) -> dict[str, float]:
    """Pearson and Spearman correlation (as GLUE reports them for STS-B)."""
    from scipy import stats

    labels = np.asarray(labels, dtype=np.float64)
    predictions = np.asarray(predictions, dtype=np.float64)
    return {
        "pearson": float(stats.pearsonr(predictions, labels)[0]),
        "spearman": float(stats.spearmanr(predictions, labels)[0]),
    }


# --- named entities ---------------------------------------------------------------------


def ner_metrics(labels: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level precision, recall and F1 (CoNLL-2003 style, as seqeval computes them)."""
    from seqeval import metrics as sq

    labels = [list(sentence) for sentence in labels]
    predictions = [list(sentence) for sentence in predictions]
    return {
        "precision": float(sq.precision_score(labels, predictions)),
        "recall": float(sq.recall_score(labels, predictions)),
        "f1": float(sq.f1_score(labels, predictions)),
        "accuracy": float(sq.accuracy_score(labels, predictions)),
    }


# --- SQuAD (official evaluation scripts v1.1 and v2.0) ---------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and articles, collapse whitespace (official scripts)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction: str, gold: str) -> float:
    """Token-bag F1 of two answers after normalisation.

    When either side is empty (a SQuAD 2.0 "no answer"), F1 is 1 if both are empty and
    0 otherwise, as in the v2.0 script; for non-empty answers v1.1 and v2.0 agree.
    """
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _gold_answers(qa: Mapping) -> list[str]:
    # v2.0: answers that normalise to "" do not count; an unanswerable question's only
    # gold answer is "".
    answers = [answer["text"] for answer in qa.get("answers", []) if normalize_answer(answer["text"])]
    return answers or [""]


def squad_scores(
    dataset: Sequence[Mapping],
    predictions: Mapping[str, str],
    null_odds: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Scores predictions on a SQuAD dataset the way the official scripts do.

    Args:
      dataset: the `data` list of a SQuAD JSON file (articles → paragraphs → qas).
      predictions: question id → predicted answer text ("" for no answer).
      null_odds: question id → null score difference (SQuAD 2.0); when given, also
        reports `best_exact`/`best_f1` and the thresholds that reach them, the values to
        use as `null_score_diff_threshold`.

    Returns:
      `exact_match` and `f1` in percent over all questions (missing predictions score 0),
      `total`, and for SQuAD 2.0 data also `HasAns_*`/`NoAns_*` breakdowns.
    """
    exact, f1, has_answer = {}, {}, {}
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qid = qa["id"]
                golds = _gold_answers(qa)
                has_answer[qid] = golds != [""]
                prediction = predictions.get(qid)
                if prediction is None:
                    exact[qid] = f1[qid] = 0.0
                    continue
                exact[qid] = max(squad_exact_match(prediction, gold) for gold in golds)
                f1[qid] = max(squad_f1(prediction, gold) for gold in golds)
    total = len(exact)
    if not total:
        raise ValueError("the SQuAD dataset has no questions to score")
    results = {
        "exact_match": 100.0 * sum(exact.values()) / total,
        "f1": 100.0 * sum(f1.values()) / total,
        "total": total,
    }
    has = [qid for qid, answerable in has_answer.items() if answerable]
    no = [qid for qid, answerable in has_answer.items() if not answerable]
    if no:  # SQuAD 2.0 data: break the scores down as the v2.0 script does
        for prefix, qids in (("HasAns", has), ("NoAns", no)):
            if qids:
                results[f"{prefix}_exact"] = 100.0 * sum(exact[q] for q in qids) / len(qids)
                results[f"{prefix}_f1"] = 100.0 * sum(f1[q] for q in qids) / len(qids)
                results[f"{prefix}_total"] = len(qids)
    if null_odds is not None:
        for name, scores in (("exact", exact), ("f1", f1)):
            best, threshold = _best_null_threshold(predictions, scores, null_odds, has_answer)
            results[f"best_{name}"] = best
            results[f"best_{name}_thresh"] = threshold
    return results


def _best_null_threshold(predictions, scores, null_odds, has_answer) -> tuple[float, float]:
    """The threshold on the null odds that maximises the score (v2.0 script's search).

    Questions are visited in increasing null odds; answering a question (instead of
    abstaining) changes the total by its score when it has an answer, and by -1 when it
    has none but a non-empty answer was predicted.
    """
    current = best = float(sum(1 for qid in scores if not has_answer[qid]))
    best_threshold = 0.0
    for qid in sorted(scores, key=lambda q: null_odds.get(q, 0.0)):
        if has_answer[qid]:
            current += scores[qid]
        elif predictions.get(qid):
            current -= 1
        if current > best:
            best, best_threshold = current, float(null_odds.get(qid, 0.0))
    return 100.0 * best / len(scores), best_threshold
