"""Scores that mean something for search: retrieval ranks of pairs, Spearman of scored pairs.

Every dev anchor is ranked against all the dev positives (each distinct positive text once),
by cosine similarity; its right answer is its own positive. MRR@10 is the mean of 1/rank
where the rank is at most 10 (0 otherwise), recall@k the share of anchors whose positive is
in their top k.

>>> import numpy as np
>>> similarities = np.array([[0.9, 0.1, 0.5], [0.8, 0.3, 0.7], [0.0, 0.2, 0.1]])
>>> retrieval_metrics(similarities, np.array([0, 2, 2]))
{'mrr_at_10': 0.6666666666666666, 'recall_at_1': 0.3333333333333333, 'recall_at_10': 1.0}
"""

from __future__ import annotations

import numpy as np

TOP_K = 10


def unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def ranks(similarities: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """The 1-based rank of each query's relevant candidate: similarities [queries, candidates],
    relevant [queries] (its column). Ties are counted against it."""
    similarities = np.asarray(similarities)
    own = similarities[np.arange(len(relevant)), relevant][:, None]
    return 1 + (similarities > own).sum(axis=1) + ((similarities == own).sum(axis=1) - 1)


def retrieval_metrics(similarities: np.ndarray, relevant: np.ndarray) -> dict[str, float]:
    """MRR@10, recall@1 and recall@10 (see the module docstring)."""
    rank = ranks(similarities, np.asarray(relevant))
    return {
        "mrr_at_10": float(np.where(rank <= TOP_K, 1.0 / rank, 0.0).mean()),
        "recall_at_1": float((rank <= 1).mean()),
        "recall_at_10": float((rank <= TOP_K).mean()),
    }


def positives_index(positives: list[str]) -> tuple[list[int], np.ndarray]:
    """(the first row of each distinct positive text, each row's column among those)."""
    columns: dict[str, int] = {}
    first_rows = []
    relevant = np.empty(len(positives), np.int64)
    for row, text in enumerate(positives):
        if text not in columns:
            columns[text] = len(first_rows)
            first_rows.append(row)
        relevant[row] = columns[text]
    return first_rows, relevant


def top_k(similarities: np.ndarray, k: int = TOP_K) -> tuple[np.ndarray, np.ndarray]:
    """(columns [queries, k] best first, their similarities)."""
    k = min(k, similarities.shape[1])
    best = np.argpartition(-similarities, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(similarities, best, axis=1), axis=1, kind="stable")
    best = np.take_along_axis(best, order, axis=1)
    return best, np.take_along_axis(similarities, best, axis=1)
