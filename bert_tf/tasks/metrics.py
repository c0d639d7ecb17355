"""Metrics over classes and scores, shared by the families: as the benchmarks compute them.

Accuracy, F1 of the positive class 1, Matthews correlation from scikit-learn; Pearson and
Spearman correlation from scipy, as the GLUE baselines compute them. A family's own
metrics live in its package (multi-label F1, entity F1, SQuAD's exact match and F1).

Example:

>>> from bert_tf.tasks import metrics
>>> metrics.classification_metrics([1, 0, 1, 1], [1, 0, 0, 1], ("accuracy", "f1"))
{'accuracy': 0.75, 'f1': 0.8}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# --- classification and regression ----------------------------------------------------

CLASSIFICATION_METRICS = ("accuracy", "f1", "matthews_corrcoef")
REGRESSION_METRICS = ("pearson", "spearman")


def classification_metrics(
    labels: Sequence[int], predictions: Sequence[int], names: Sequence[str] = ("accuracy",)
) -> dict[str, float]:
    """Computes the named metrics of integer class predictions against integer labels.

    `f1` is the binary F1 of class 1, the positive class (MRPC's "paraphrase", QQP's
    "duplicate"), 0 when nothing is predicted or labelled positive; `matthews_corrcoef`
    is 0 when either side holds a single class.
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
