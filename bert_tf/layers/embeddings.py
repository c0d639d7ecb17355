"""Word + token type + position embeddings, summed, then LayerNorm and dropout."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.layers.activations import truncated_normal
from bert_tf.layers.base import ConfiguredLayer


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(ConfiguredLayer):
    """The input embeddings of BERT.

    The three tables are summed (positions 0..seq-1, or `position_ids` when given) in float32 even under a mixed
    precision policy, normalised with LayerNorm (epsilon 1e-12) and passed through dropout.
    The word table is also the output matrix of the masked LM head (tied weights).

    Example:

    >>> import numpy as np
    >>> layer = BertEmbeddings(vocab_size=100, hidden_size=16, max_position_embeddings=32)
    >>> tuple(layer(np.array([[2, 5, 7]]), np.array([[0, 0, 1]])).shape)
    (1, 3, 16)
    """

    config_fields = (
        "vocab_size",
        "hidden_size",
        "max_position_embeddings",
        "type_vocab_size",
        "initializer_range",
        "dropout_rate",
    )

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        initializer_range: float = 0.02,
        dropout_rate: float = 0.1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")

    def build(self, input_ids_shape=None, segment_ids_shape=None, position_ids_shape=None):
        initializer = truncated_normal(self.initializer_range)
        # autocast=False: the tables stay float32 when read, so the sum is float32.
        self.word_embeddings = self.add_weight(
            name="word_embeddings",
            shape=(self.vocab_size, self.hidden_size),
            initializer=initializer,
            autocast=False,
        )
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings",
            shape=(self.type_vocab_size, self.hidden_size),
            initializer=initializer,
            autocast=False,
        )
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=initializer,
            autocast=False,
        )
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_ids, segment_ids, position_ids=None, training=None):
        seq_length = ops.shape(input_ids)[1]
        words = ops.take(self.word_embeddings, input_ids, axis=0)  # [batch, seq, hidden]
        token_types = ops.take(self.token_type_embeddings, segment_ids, axis=0)
        table = ops.convert_to_tensor(self.position_embeddings)
        if position_ids is None:
            positions = ops.slice(table, (0, 0), (seq_length, self.hidden_size))[None]  # [1, seq, hidden]
        else:  # packed rows: positions restart for every instance
            positions = ops.take(table, ops.cast(position_ids, "int32"), axis=0)  # [batch, seq, hidden]
        embeddings = words + token_types + positions
        embeddings = self.layer_norm(embeddings)
        return self.dropout(embeddings, training=training)

    def compute_output_shape(self, input_ids_shape, segment_ids_shape=None, position_ids_shape=None):
        return (*input_ids_shape, self.hidden_size)
