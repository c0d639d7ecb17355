"""The masked language model head, with output weights tied to the word embeddings."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.layers.activations import get_activation, truncated_normal
from bert_tf.layers.base import ConfiguredLayer
from bert_tf.layers.embeddings import BertEmbeddings


def gather_positions(sequence, positions):
    """[batch, seq, hidden] gathered at int [batch, P] positions -> [batch, P, hidden]."""
    batch, seq, hidden = ops.shape(sequence)[0], ops.shape(sequence)[1], ops.shape(sequence)[2]
    positions = ops.cast(positions, "int32")
    offsets = ops.arange(batch, dtype="int32")[:, None] * ops.cast(seq, "int32")
    flat = ops.reshape(sequence, (-1, hidden))
    gathered = ops.take(flat, ops.reshape(positions + offsets, (-1,)), axis=0)
    return ops.reshape(gathered, (batch, -1, hidden))


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(ConfiguredLayer):
    """`cls/predictions`: gather the masked positions, dense + activation + LayerNorm, tied logits.

    Only the `masked_lm_positions` are projected onto the vocabulary (never every position),
    and the logits come back in float32: `transform(x) @ word_embeddings^T + output_bias`.

    Example:

    >>> import numpy as np
    >>> embeddings = BertEmbeddings(vocab_size=100, hidden_size=16)
    >>> embeddings.build()
    >>> head = MaskedLMHead(embeddings)
    >>> sequence = np.random.rand(2, 8, 16).astype("float32")
    >>> tuple(head(sequence, np.array([[1, 3], [2, 0]])).shape)
    (2, 2, 100)
    """

    config_fields = ("hidden_act", "initializer_range")

    def __init__(
        self,
        embeddings: BertEmbeddings,
        hidden_act: str = "gelu",
        initializer_range: float = 0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.embeddings = embeddings
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.transform_dense = keras.layers.Dense(
            embeddings.hidden_size,
            activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=self.dtype_policy, name="layer_norm"
        )

    def build(self, sequence_output_shape=None, masked_lm_positions_shape=None):
        hidden = (None, None, self.embeddings.hidden_size)
        self.transform_dense.build(hidden)
        self.layer_norm.build(hidden)
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.embeddings.vocab_size,), initializer="zeros", autocast=False
        )
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        hidden = gather_positions(sequence_output, masked_lm_positions)  # [batch, P, hidden]
        hidden = self.layer_norm(self.transform_dense(hidden))
        table = ops.cast(self.embeddings.word_embeddings, self.compute_dtype)  # [vocab, hidden]
        logits = ops.matmul(hidden, ops.transpose(table))  # [batch, P, vocab]
        return ops.cast(logits, "float32") + self.output_bias

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return (*masked_lm_positions_shape, self.embeddings.vocab_size)

    def compute_output_spec(self, sequence_output, masked_lm_positions):
        shape = self.compute_output_shape(sequence_output.shape, masked_lm_positions.shape)
        return keras.KerasTensor(shape, dtype="float32")

    def get_config(self):
        return {**super().get_config(), "embeddings": keras.saving.serialize_keras_object(self.embeddings)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["embeddings"] = keras.saving.deserialize_keras_object(config["embeddings"])
        return cls(**config)
