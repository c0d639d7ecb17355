"""One post-LayerNorm Transformer block, as in the original BERT."""

from __future__ import annotations

import keras

from bert_tf.layers.activations import get_activation, truncated_normal
from bert_tf.layers.attention import BertSelfAttention
from bert_tf.layers.base import ConfiguredLayer
from bert_tf.layers.remat import rematerialized, seed_generators


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerBlock(ConfiguredLayer):
    """Self-attention and feed-forward, each followed by dropout, residual add and LayerNorm.

    `attention_output = LayerNorm(x + dropout(attention(x)))`, then
    `LayerNorm(attention_output + dropout(dense(act(dense(attention_output)))))`.
    LayerNorm (epsilon 1e-12) computes in float32 under mixed precision.

    Example:

    >>> import numpy as np
    >>> from bert_tf.layers.attention import attention_bias
    >>> block = TransformerBlock(hidden_size=16, num_attention_heads=4, intermediate_size=32)
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> tuple(block(x, attention_bias(np.ones((2, 5)))).shape)
    (2, 5, 16)
    """

    config_fields = (
        "hidden_size",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "initializer_range",
    )

    def __init__(
        self,
        hidden_size: int,
        num_attention_heads: int,
        intermediate_size: int,
        hidden_act: str = "gelu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        policy = self.dtype_policy
        self.attention = BertSelfAttention(
            hidden_size,
            num_attention_heads,
            dropout_rate=attention_probs_dropout_prob,
            initializer_range=initializer_range,
            dtype=policy,
            name="attention",
        )
        self.attention_dropout = keras.layers.Dropout(
            hidden_dropout_prob, dtype=policy, name="attention_dropout"
        )
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=policy, name="attention_layer_norm"
        )
        self.intermediate_dense = keras.layers.Dense(
            intermediate_size,
            activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range),
            dtype=policy,
            name="intermediate_dense",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=truncated_normal(initializer_range),
            dtype=policy,
            name="output_dense",
        )
        self.output_dropout = keras.layers.Dropout(hidden_dropout_prob, dtype=policy, name="output_dropout")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=policy, name="output_layer_norm"
        )

    def build(self, hidden_states_shape=None, bias_shape=None):
        hidden = (None, None, self.hidden_size)
        self.attention.build(hidden)
        self.attention_layer_norm.build(hidden)
        self.intermediate_dense.build(hidden)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(hidden)
        self.built = True

    # Whether training recomputes the block's activations in the backward pass instead of
    # keeping them (`rematerialize`): less memory for long sequences, more compute.
    remat = False

    def call(self, hidden_states, bias, training=None):
        if training and self.remat:
            return rematerialized(
                lambda hidden, bias: self._forward(hidden, bias, True),
                seed_generators(self),
                hidden_states,
                bias,
            )
        return self._forward(hidden_states, bias, training)

    def _forward(self, hidden_states, bias, training):
        attention_output = self.attention(hidden_states, bias, training=training)
        attention_output = self.attention_dropout(attention_output, training=training)
        attention_output = self.attention_layer_norm(hidden_states + attention_output)
        intermediate = self.intermediate_dense(attention_output)  # [batch, seq, intermediate]
        layer_output = self.output_dropout(self.output_dense(intermediate), training=training)
        return self.output_layer_norm(attention_output + layer_output)

    def compute_output_shape(self, hidden_states_shape, bias_shape=None):
        return hidden_states_shape


def rematerialize(model: keras.Model, enabled: bool = True) -> int:
    """Makes training recompute each Transformer block's activations of `model` in the backward
    pass instead of keeping them (`--remat`): the memory of one block's activations instead of
    all of them, for about a third more compute. The weights and outputs are unchanged, and so
    are the gradients (dropout draws the same masks again). Returns the number of blocks."""
    blocks = [layer for layer in model._flatten_layers() if isinstance(layer, TransformerBlock)]
    for block in blocks:
        block.remat = enabled
    return len(blocks)
