"""Pretraining loss and metrics, exactly as the original run_pretraining.py defines them."""

from __future__ import annotations

from keras import ops


def pretraining_losses(features: dict, outputs: dict) -> dict:
    """Scalar float32 tensors {loss, masked_lm_loss, next_sentence_loss,
    masked_lm_accuracy, next_sentence_accuracy} for one batch.

    masked_lm_loss = sum(weights * cross_entropy) / (sum(weights) + 1e-5) over the
    predictions; next_sentence_loss is the mean 2-way cross-entropy (label 1 = random next)
    over the instances; loss is their sum. Packed rows (`bert_tf.preprocessing.packing`) give exactly the
    values of the same instances unpacked: their predictions are pooled the same way, and
    `next_sentence_weights` marks the real instances among each row's NSP slots. The accuracies are weighted like the original's `tf.metrics.accuracy`.

    Example:

    >>> import numpy as np
    >>> features = {"masked_lm_ids": np.array([[3, 0]]), "masked_lm_weights": np.array([[1.0, 0.0]]),
    ...             "next_sentence_labels": np.array([[1]])}
    >>> outputs = {"mlm_logits": np.zeros((1, 2, 5), "float32"), "nsp_logits": np.zeros((1, 2), "float32")}
    >>> round(float(pretraining_losses(features, outputs)["masked_lm_loss"]), 4)  # log(5)
    1.6094
    """
    mlm_logits = ops.cast(outputs["mlm_logits"], "float32")  # [batch, P, vocab]
    # [batch, 2], or [batch, instances, 2] for packed rows: one row per instance.
    nsp_logits = ops.reshape(ops.cast(outputs["nsp_logits"], "float32"), (-1, 2))
    masked_lm_ids = ops.cast(features["masked_lm_ids"], "int32")
    weights = ops.cast(features["masked_lm_weights"], "float32")
    next_sentence_labels = ops.reshape(ops.cast(features["next_sentence_labels"], "int32"), (-1,))
    nsp_weights = next_sentence_weights(features)  # [instances]
    instances = ops.sum(nsp_weights)

    per_prediction = ops.sparse_categorical_crossentropy(masked_lm_ids, mlm_logits, from_logits=True)
    weight_sum = ops.sum(weights)
    masked_lm_loss = ops.sum(per_prediction * weights) / (weight_sum + 1e-5)
    per_instance = ops.sparse_categorical_crossentropy(next_sentence_labels, nsp_logits, from_logits=True)
    # divide_no_nan: a batch of evaluation padding (weight 0 throughout) adds 0, not NaN.
    next_sentence_loss = ops.divide_no_nan(ops.sum(per_instance * nsp_weights), instances)

    mlm_correct = ops.cast(ops.equal(ops.argmax(mlm_logits, axis=-1), masked_lm_ids), "float32")
    masked_lm_accuracy = ops.divide_no_nan(ops.sum(mlm_correct * weights), weight_sum)
    nsp_correct = ops.cast(ops.equal(ops.argmax(nsp_logits, axis=-1), next_sentence_labels), "float32")
    return {
        "loss": masked_lm_loss + next_sentence_loss,
        "masked_lm_loss": masked_lm_loss,
        "next_sentence_loss": next_sentence_loss,
        "masked_lm_accuracy": masked_lm_accuracy,
        "next_sentence_accuracy": ops.divide_no_nan(ops.sum(nsp_correct * nsp_weights), instances),
    }


def next_sentence_weights(features: dict):
    """float32 [instances]: 1.0 for every real NSP instance of the batch.

    Packed batches carry `next_sentence_weights` [batch, instances] (0.0 on unused slots);
    an ordinary batch has one instance per row.
    """
    if "next_sentence_weights" in features:
        return ops.reshape(ops.cast(features["next_sentence_weights"], "float32"), (-1,))
    return ops.ones_like(ops.reshape(ops.cast(features["next_sentence_labels"], "float32"), (-1,)))
