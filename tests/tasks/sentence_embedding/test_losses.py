"""The family's losses against a NumPy transcription of their definitions, on random vectors."""

import numpy as np
import tensorflow as tf
from scipy.special import logsumexp

from bert_tf.tasks.sentence_embedding import losses
from bert_tf.tasks.sentence_embedding.preprocessor import text_keys


def _unit(vectors):
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def mnrl_reference(vectors, positives, scale=20.0, symmetric=False):
    """Per example: -log softmax over [the batch's positives, its hard negatives] at its own
    positive, leaving out other examples' positives that are the same text."""
    v = _unit(vectors.astype(np.float64))
    batch, texts, _ = v.shape
    candidates = [(j, v[j, 1]) for j in range(batch)] + [
        (None, v[j, t]) for t in range(2, texts) for j in range(batch)
    ]
    result = []
    for i in range(batch):
        logits = [
            scale * v[i, 0] @ vector
            for j, vector in candidates
            if j is None or j == i or positives[j] != positives[i]
        ]
        forward = logsumexp(logits) - scale * v[i, 0] @ v[i, 1]
        if symmetric:
            back = [scale * v[j, 0] @ v[i, 1] for j in range(batch) if j == i or positives[j] != positives[i]]
            forward = (forward + logsumexp(back) - scale * v[i, 0] @ v[i, 1]) / 2
        result.append(forward)
    return np.mean(result)


def cosent_reference(vectors, scores, scale=20.0):
    v = _unit(vectors.astype(np.float64))
    cosines = scale * (v[:, 0] * v[:, 1]).sum(-1)
    terms = [0.0] + [
        cosines[i] - cosines[j]
        for i in range(len(scores))
        for j in range(len(scores))
        if scores[i] < scores[j]
    ]
    return logsumexp(terms)


class LossesTest(tf.test.TestCase):
    def test_multiple_negatives_ranking_against_numpy(self):
        rng = np.random.default_rng(0)
        for texts, symmetric in [(2, False), (3, False), (2, True), (4, False)]:
            vectors = rng.normal(size=(8, texts, 16)).astype(np.float32)
            # Examples 1, 4 and 6 share a positive text: not each other's negatives.
            positives = ["p0", "same", "p2", "p3", "same", "p5", "same", "p7"]
            labels = text_keys(tf.constant(positives)).numpy()
            got = losses.MultipleNegativesRankingLoss(20.0, symmetric=symmetric)(labels, vectors)
            self.assertAllClose(got, mnrl_reference(vectors, positives, symmetric=symmetric), atol=1e-4)

    def test_duplicates_are_not_negatives(self):
        rng = np.random.default_rng(1)
        vectors = rng.normal(size=(4, 2, 8)).astype(np.float32)
        vectors[3, 1] = vectors[0, 1]  # the same positive text, so the same vector
        distinct = text_keys(tf.constant(["a", "b", "c", "d"])).numpy()
        duplicated = text_keys(tf.constant(["a", "b", "c", "a"])).numpy()
        loss = losses.MultipleNegativesRankingLoss()
        # Counting the duplicate as a negative raises the loss; leaving it out is the reference.
        self.assertGreater(float(loss(distinct, vectors)), float(loss(duplicated, vectors)))
        self.assertAllClose(
            loss(duplicated, vectors), mnrl_reference(vectors, ["a", "b", "c", "a"]), atol=1e-4
        )

    def test_cosent_and_cosine_against_numpy(self):
        rng = np.random.default_rng(2)
        vectors = rng.normal(size=(10, 2, 12)).astype(np.float32)
        scores = rng.uniform(size=10).astype(np.float32)
        scores[3] = scores[5]  # ties make no term
        self.assertAllClose(
            losses.CoSENTLoss(20.0)(scores, vectors), cosent_reference(vectors, scores), atol=1e-4
        )
        v = _unit(vectors.astype(np.float64))
        cosine = (v[:, 0] * v[:, 1]).sum(-1)
        self.assertAllClose(
            losses.CosineSimilarityLoss()(scores, vectors), np.mean((cosine - scores) ** 2), atol=1e-5
        )
