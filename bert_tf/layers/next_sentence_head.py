"""The next sentence prediction head."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.layers.activations import truncated_normal
from bert_tf.layers.base import ConfiguredLayer


@keras.saving.register_keras_serializable(package="bert_tf")
class NextSentenceHead(ConfiguredLayer):
    """`cls/seq_relationship`: a 2-way float32 classifier on the pooled output.

    The pooled output is [batch, hidden], or [batch, instances, hidden] for packed rows.

    Class 0 = B is the actual next sentence, class 1 = B is random (the original labels).
    The original stores the weights as [2, hidden]; this layer's kernel is its transpose.

    Example:

    >>> import numpy as np
    >>> tuple(NextSentenceHead()(np.random.rand(3, 16).astype("float32")).shape)
    (3, 2)
    """

    config_fields = ("initializer_range",)

    def __init__(self, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            2, kernel_initializer=truncated_normal(initializer_range), dtype=self.dtype_policy, name="dense"
        )

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output):
        return ops.cast(self.dense(pooled_output), "float32")

    def compute_output_shape(self, pooled_output_shape):
        return (*pooled_output_shape[:-1], 2)

    def compute_output_spec(self, pooled_output):
        return keras.KerasTensor(self.compute_output_shape(pooled_output.shape), dtype="float32")
