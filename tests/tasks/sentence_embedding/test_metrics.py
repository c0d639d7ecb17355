"""Retrieval and correlation scores against scikit-learn and SciPy on random scores."""

import numpy as np
import tensorflow as tf
from scipy import stats
from sklearn import metrics as sk

from bert_tf.tasks import metrics as task_metrics
from bert_tf.tasks.sentence_embedding import metrics


class MetricsTest(tf.test.TestCase):
    def test_retrieval_against_scikit_learn(self):
        rng = np.random.default_rng(0)
        for queries, candidates in [(50, 40), (30, 8), (200, 200)]:
            similarities = rng.normal(size=(queries, candidates))
            relevant = rng.integers(0, candidates, size=queries)
            got = metrics.retrieval_metrics(similarities, relevant)
            labels = np.arange(candidates)
            for k in (1, 10):
                want = (
                    sk.top_k_accuracy_score(relevant, similarities, k=k, labels=labels)
                    if k < candidates
                    else 1.0
                )
                self.assertAllClose(got[f"recall_at_{k}"], want)
            # One relevant candidate: its label-ranking average precision is 1 / its rank.
            onehot = np.eye(candidates)[relevant]
            reciprocal = np.array(
                [
                    sk.label_ranking_average_precision_score(onehot[i : i + 1], similarities[i : i + 1])
                    for i in range(queries)
                ]
            )
            self.assertAllClose(got["mrr_at_10"], np.where(reciprocal >= 0.1 - 1e-12, reciprocal, 0.0).mean())

    def test_spearman_against_scipy(self):
        rng = np.random.default_rng(1)
        scores, cosines = rng.uniform(size=100), rng.uniform(-1, 1, size=100)
        self.assertAllClose(
            task_metrics.regression_metrics(scores, cosines)["spearman"],
            stats.spearmanr(cosines, scores).statistic,
        )

    def test_top_k_and_distinct_positives(self):
        rng = np.random.default_rng(2)
        similarities = rng.normal(size=(5, 30))
        best, values = metrics.top_k(similarities)
        self.assertAllEqual(best, np.argsort(-similarities, axis=1)[:, :10])
        self.assertAllClose(values, -np.sort(-similarities, axis=1)[:, :10])
        first_rows, relevant = metrics.positives_index(["a", "b", "a", "c", "b"])
        self.assertEqual(first_rows, [0, 1, 3])
        self.assertAllEqual(relevant, [0, 1, 0, 2, 1])
