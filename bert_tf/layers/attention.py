"""Multi-head self-attention with BERT's additive padding mask."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.layers.activations import truncated_normal
from bert_tf.layers.base import ConfiguredLayer

# The original adds -10000 (not -inf) to the scores of padding keys; a fully padded row
# then still gets a finite, uniform softmax, exactly as in the released models.
MASK_ADDER = -10000.0


def attention_bias(input_mask):
    """[batch, seq] 1/0 mask -> float32 additive bias [batch, 1, 1, seq] for the scores."""
    input_mask = ops.cast(input_mask, "float32")
    # expand_dims, not [:, None, None, :]: LiteRT's built-in ops have no strided slice that adds axes
    return ops.expand_dims(1.0 - input_mask, (1, 2)) * MASK_ADDER


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSelfAttention(ConfiguredLayer):
    """Self-attention and its output projection: `attention/self/*` and `attention/output/dense`.

    Scores are scaled by 1/sqrt(head_size), the mask bias is added and the softmax is taken
    in float32 whatever the compute dtype; dropout acts on the attention probabilities.
    Without active dropout (inference, or a rate of 0) the same math runs through
    `keras.ops.dot_product_attention`, which backends may fuse.

    Example:

    >>> import numpy as np
    >>> layer = BertSelfAttention(hidden_size=16, num_attention_heads=4)
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    >>> tuple(layer(x, attention_bias(mask)).shape)
    (2, 5, 16)
    """

    config_fields = ("hidden_size", "num_attention_heads", "dropout_rate", "initializer_range")

    def __init__(
        self,
        hidden_size: int,
        num_attention_heads: int,
        dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size {hidden_size} is not divisible by num_attention_heads {num_attention_heads}"
            )
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

        def dense(name):
            return keras.layers.Dense(
                hidden_size,
                kernel_initializer=truncated_normal(initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output_dense")
        self.probs_dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy, name="probs_dropout")

    def build(self, hidden_states_shape=None, bias_shape=None):
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build((None, None, self.hidden_size))
        self.built = True

    def call(self, hidden_states, bias, training=None):
        batch, seq = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        # [batch, seq, hidden] -> [batch, seq, heads, head_size]; one shape for the three,
        # read once (a traced graph then holds one shape computation per layer, not four).
        heads = (batch, seq, self.num_attention_heads, self.head_size)
        query = ops.reshape(self.query(hidden_states), heads)
        key = ops.reshape(self.key(hidden_states), heads)
        value = ops.reshape(self.value(hidden_states), heads)
        scale = 1.0 / float(self.head_size) ** 0.5
        # Keras casts float inputs to the compute dtype; the bias is added in float32.
        bias = ops.cast(bias, "float32")
        if training and self.dropout_rate > 0:
            scores = ops.einsum("bqnd,bknd->bnqk", query, key)  # [batch, heads, seq, seq]
            scores = ops.cast(scores, "float32") * scale + bias
            probs = ops.softmax(scores, axis=-1)
            probs = self.probs_dropout(probs, training=training)
            probs = ops.cast(probs, self.compute_dtype)
            context = ops.einsum("bnqk,bknd->bqnd", probs, value)
        else:
            context = ops.dot_product_attention(
                query, key, value, bias=ops.cast(bias, self.compute_dtype), scale=scale
            )
        context = ops.reshape(context, (batch, seq, self.hidden_size))
        return self.output_dense(context)

    def compute_output_shape(self, hidden_states_shape, bias_shape=None):
        return hidden_states_shape
