"""Multiple choice (SWAG, RACE): one score per (context, choice) pair."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.models.encoder import BertEncoder
from bert_tf.tasks.task_model import TaskModel, encoder_inputs, task_dense


class _MergeChoices(keras.layers.Layer):
    """[batch, choices, seq] -> [batch * choices, seq] (shapes known only at run time)."""

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, input_shape):
        return (None, input_shape[-1])


class _SplitChoices(keras.layers.Layer):
    """Scores [batch * choices, 1] -> [batch, choices], the shape taken from the input ids."""

    def call(self, scores, input_ids):
        return ops.reshape(scores, ops.shape(input_ids)[:2])

    def compute_output_shape(self, scores_shape, input_ids_shape):
        return tuple(input_ids_shape[:2])


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(TaskModel):
    """Inputs [batch, choices, seq]; every choice is encoded on its own, scored from its
    pooled output by dropout -> dense(1); float32 logits [batch, choices].

    Example:

    >>> import numpy as np
    >>> from bert_tf.config import load_config
    >>> from bert_tf.models import BertEncoder
    >>> model = BertMultipleChoice(BertEncoder(load_config("bert_tiny").replace(vocab_size=100)))
    >>> ids = np.array([[[1, 7, 2, 8, 2], [1, 7, 2, 9, 2], [1, 7, 2, 5, 2]]])
    >>> model({"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids}).shape
    TensorShape([1, 3])
    """

    config_fields = ("dropout_rate",)

    def __init__(
        self, encoder: BertEncoder, dropout_rate: float = 0.1, name: str = "bert_multiple_choice", **kwargs
    ):
        dropout = keras.layers.Dropout(dropout_rate, name="dropout")
        scorer = task_dense(encoder, 1, "scorer")
        inputs = encoder_inputs(encoder, extra_dims=1)
        merge = _MergeChoices(name="merge_choices")
        flat = {name: merge(tensor) for name, tensor in inputs.items()}
        pooled = encoder(flat)["pooled_output"]  # [batch * choices, hidden]
        scores = ops.cast(scorer(dropout(pooled)), "float32")
        # float32 like the scores: under a mixed global policy the layer would cast them back.
        logits = _SplitChoices(name="split_choices", dtype="float32")(scores, inputs["input_ids"])
        super().__init__(inputs=inputs, outputs=logits, name=name, **kwargs)
        self.encoder = encoder
        self.dropout_rate = dropout_rate
