"""The family's losses, on its model's vectors [batch, texts, hidden] (any Keras backend).

- `MultipleNegativesRankingLoss`: each anchor (text 0) against every positive (text 1) and
  hard negative (texts 2..) of the batch, as sentence-transformers' loss of that name:
  cosine similarity times `scale` (20), cross-entropy towards its own positive. A positive
  of another example that is the same text as the anchor's own (`text_keys`, the labels) is
  not counted as a negative. `symmetric` adds the positives' cross-entropy over the anchors,
  and takes the mean of both (MultipleNegativesSymmetricRankingLoss).
- `CoSENTLoss`: scored pairs (text 0, text 1, score): log(1 + sum over pairs (i, j) with
  score_i < score_j of exp(scale * (cos_i - cos_j))), scale 20 (CoSENT, as sentence-transformers).
- `CosineSimilarityLoss`: the squared error of the pair's cosine and its score.

Each returns one value per example (the batch's losses are a batch's, so each example holds
the batch's value where the loss is not a sum over examples), which Keras averages.
"""

from __future__ import annotations

import keras
from keras import ops


def _unit(vectors):
    return vectors / ops.maximum(ops.norm(vectors, axis=-1, keepdims=True), 1e-12)


def _cross_entropy_to_diagonal(scores):
    """-log softmax(scores)[i, i]: scores [batch, candidates], example i's right answer is column i."""
    batch = ops.shape(scores)[0]
    diagonal = ops.take_along_axis(scores, ops.reshape(ops.arange(batch), (-1, 1)), axis=1)[:, 0]
    return ops.logsumexp(scores, axis=1) - diagonal


@keras.saving.register_keras_serializable(package="bert_tf")
class MultipleNegativesRankingLoss(keras.losses.Loss):
    """In-batch negatives; labels: `text_keys` of each example's positive [batch, 2]; vectors
    [batch, texts >= 2, hidden] (see the module docstring)."""

    def __init__(self, scale: float = 20.0, symmetric: bool = False, name: str = "mnrl", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale, self.symmetric = scale, symmetric

    def call(self, y_true, y_pred):
        vectors = _unit(ops.cast(y_pred, "float32"))
        anchors, positives = vectors[:, 0], vectors[:, 1]  # [batch, hidden]
        batch = ops.shape(anchors)[0]
        # [batch, batch]: positive j is the same text as positive i, another example's
        same = ops.all(ops.equal(y_true[:, None, :], y_true[None, :, :]), axis=-1)
        duplicate = ops.logical_and(same, ops.logical_not(ops.eye(batch, dtype="bool")))
        to_positives = self.scale * ops.matmul(anchors, ops.transpose(positives))  # [batch, batch]
        to_positives = ops.where(duplicate, -1e9, to_positives)
        negatives = ops.reshape(ops.transpose(vectors[:, 2:], (1, 0, 2)), (-1, ops.shape(vectors)[-1]))
        to_negatives = self.scale * ops.matmul(anchors, ops.transpose(negatives))  # [batch, batch * hard]
        loss = _cross_entropy_to_diagonal(ops.concatenate([to_positives, to_negatives], axis=1))
        if self.symmetric:  # each positive against the batch's anchors
            backward = ops.where(
                duplicate, -1e9, ops.transpose(self.scale * ops.matmul(anchors, ops.transpose(positives)))
            )
            loss = (loss + _cross_entropy_to_diagonal(backward)) / 2.0
        return loss

    def get_config(self) -> dict:
        return {**super().get_config(), "scale": self.scale, "symmetric": self.symmetric}


def pair_cosines(y_pred):
    """The cosine of each example's two texts: vectors [batch, 2, hidden] -> [batch]."""
    vectors = _unit(ops.cast(y_pred, "float32"))
    return ops.sum(vectors[:, 0] * vectors[:, 1], axis=-1)


@keras.saving.register_keras_serializable(package="bert_tf")
class CoSENTLoss(keras.losses.Loss):
    """Scored pairs, ranked: labels the scores [batch]; vectors [batch, 2, hidden]."""

    def __init__(self, scale: float = 20.0, name: str = "cosent", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = scale

    def call(self, y_true, y_pred):
        scores = self.scale * pair_cosines(y_pred)  # [batch]
        labels = ops.reshape(ops.cast(y_true, "float32"), (-1,))
        differences = scores[:, None] - scores[None, :]  # [i, j]: s_i - s_j
        differences = ops.where(labels[:, None] < labels[None, :], differences, -1e12)
        flat = ops.concatenate([ops.zeros((1,)), ops.reshape(differences, (-1,))], axis=0)
        return ops.ones_like(scores) * ops.logsumexp(flat)

    def get_config(self) -> dict:
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="bert_tf")
class CosineSimilarityLoss(keras.losses.Loss):
    """Scored pairs: (cosine - score)^2; labels the scores [batch]; vectors [batch, 2, hidden]."""

    def __init__(self, name: str = "cosine_similarity_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        return ops.square(pair_cosines(y_pred) - ops.reshape(ops.cast(y_true, "float32"), (-1,)))
