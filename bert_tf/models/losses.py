"""Pretraining loss and metrics, exactly as the original run_pretraining.py defines them."""

from __future__ import annotations

from keras import ops


def pretraining_losses(features: dict, outputs: dict) -> dict:
    """Scalar float32 tensors {loss, masked_lm_loss, next_sentence_loss,
    masked_lm_accuracy, next_sentence_accuracy} for one batch.

    masked_lm_loss = sum(weights * cross_entropy) / (sum(weights) + 1e-5) over the
    predictions; next_sentence_loss is the mean 2-way cross-entropy (label 1 = random next);
    loss is their sum. The accuracies are weighted like the original's `tf.metrics.accuracy`.

    Example:

    >>> import numpy as np
    >>> features = {"masked_lm_ids": np.array([[3, 0]]), "masked_lm_weights": np.array([[1.0, 0.0]]),
    ...             "next_sentence_labels": np.array([[1]])}
    >>> outputs = {"mlm_logits": np.zeros((1, 2, 5), "float32"), "nsp_logits": np.zeros((1, 2), "float32")}
    >>> round(float(pretraining_losses(features, outputs)["masked_lm_loss"]), 4)  # log(5)
    1.6094
    """
    mlm_logits = ops.cast(outputs["mlm_logits"], "float32")  # [batch, P, vocab]
    nsp_logits = ops.cast(outputs["nsp_logits"], "float32")  # [batch, 2]
    masked_lm_ids = ops.cast(features["masked_lm_ids"], "int32")
    weights = ops.cast(features["masked_lm_weights"], "float32")
    next_sentence_labels = ops.reshape(ops.cast(features["next_sentence_labels"], "int32"), (-1,))

    per_prediction = ops.sparse_categorical_crossentropy(masked_lm_ids, mlm_logits, from_logits=True)
    weight_sum = ops.sum(weights)
    masked_lm_loss = ops.sum(per_prediction * weights) / (weight_sum + 1e-5)
    next_sentence_loss = ops.mean(
        ops.sparse_categorical_crossentropy(next_sentence_labels, nsp_logits, from_logits=True)
    )

    mlm_correct = ops.cast(ops.equal(ops.argmax(mlm_logits, axis=-1), masked_lm_ids), "float32")
    masked_lm_accuracy = ops.divide_no_nan(ops.sum(mlm_correct * weights), weight_sum)
    nsp_correct = ops.cast(ops.equal(ops.argmax(nsp_logits, axis=-1), next_sentence_labels), "float32")
    return {
        "loss": masked_lm_loss + next_sentence_loss,
        "masked_lm_loss": masked_lm_loss,
        "next_sentence_loss": next_sentence_loss,
        "masked_lm_accuracy": masked_lm_accuracy,
        "next_sentence_accuracy": ops.mean(nsp_correct),
    }
