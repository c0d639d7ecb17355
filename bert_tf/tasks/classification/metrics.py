"""Multi-label classification's scores (scikit-learn's F1 over every (example, label))."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def multi_label_metrics(labels, predictions, label_list: Sequence[str]) -> dict[str, float]:
    """micro_f1, macro_f1, subset_accuracy and "f1/<label>" of multi-hot predictions against
    multi-hot labels ([examples, labels], 0/1), as scikit-learn computes them (an F1 with
    nothing predicted nor labelled is 0).

    >>> multi_label_metrics([[1, 0], [1, 1]], [[1, 0], [0, 1]], ["a", "b"])
    {'micro_f1': 0.8, 'macro_f1': 0.8333333333333333, 'subset_accuracy': 0.5, 'f1/a': 0.6666666666666666, 'f1/b': 1.0}
    """
    from sklearn import metrics as sk

    labels = np.asarray(labels).astype(int)
    predictions = np.asarray(predictions).astype(int)
    per_label = sk.f1_score(labels, predictions, average=None, zero_division=0)
    return {
        "micro_f1": float(sk.f1_score(labels, predictions, average="micro", zero_division=0)),
        "macro_f1": float(sk.f1_score(labels, predictions, average="macro", zero_division=0)),
        "subset_accuracy": float(sk.accuracy_score(labels, predictions)),
        **{f"f1/{name}": float(value) for name, value in zip(label_list, per_label, strict=True)},
    }
