"""What the task models share: a functional model over a serialized encoder, a dense head."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.layers.activations import truncated_normal
from bert_tf.models.encoder import ENCODER_INPUTS, BertEncoder, keep_inputs


def encoder_inputs(encoder: BertEncoder, extra_dims: int = 0) -> dict:
    """Keras inputs named like the encoder's; extra_dims adds leading dims (choices)."""
    shape = (None,) * (1 + extra_dims)
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in ENCODER_INPUTS}


def task_dense(encoder: BertEncoder, units: int, name: str) -> keras.layers.Dense:
    return keras.layers.Dense(
        units,
        kernel_initializer=truncated_normal(encoder.config.initializer_range),
        dtype=encoder.dtype_policy,
        name=name,
    )


class TaskModel(keras.Model):
    """Base of the task models: a functional Keras model over a shared `BertEncoder`.

    Subclasses build their graph in `__init__`, set `self.encoder`, and name their other
    constructor arguments in `config_fields`; `get_config` serializes the encoder with
    them. Features the graph does not take (labels riding along in the input dict) are
    dropped before the call.
    """

    config_fields: tuple[str, ...] = ()
    # Heads on the sequence output only (spans, tags) leave the pooler without a gradient:
    # it is left out of what `fit` trains, so Keras does not warn about it on every run
    # nor keep optimizer moments for it. The encoder itself is not changed (it may be
    # shared with another head), and its pooler weights are still saved and exported.
    uses_pooler: bool = True

    @property
    def trainable_weights(self) -> list:
        return self._without_unused_pooler(super().trainable_weights)

    @property
    def trainable_variables(self) -> list:  # what optimizers are built with, also on loading
        return self._without_unused_pooler(super().trainable_variables)

    def _without_unused_pooler(self, weights: list) -> list:
        if self.uses_pooler:
            return weights
        pooler = {id(weight) for weight in self.encoder.pooler_dense.weights}
        return [weight for weight in weights if id(weight) not in pooler]

    def call(self, inputs, training=None, mask=None):
        return super().call(keep_inputs(inputs, ENCODER_INPUTS), training=training, mask=mask)

    def get_config(self) -> dict:
        return {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "name": self.name,
            "trainable": self.trainable,
            **{field: getattr(self, field) for field in self.config_fields},
        }

    @classmethod
    def from_config(cls, config: dict):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


class DenseHeadModel(TaskModel):
    """dropout -> dense(num_classes) on one of the encoder's outputs: float32 logits.

    Subclasses name the output (`encoder_output`) and their default model name.
    """

    config_fields = ("num_classes", "dropout_rate")
    encoder_output = "pooled_output"
    default_name = "bert_dense_head"

    def __init__(
        self,
        encoder: BertEncoder,
        num_classes: int,
        dropout_rate: float = 0.1,
        name: str | None = None,
        **kwargs,
    ):
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        dropout = keras.layers.Dropout(dropout_rate, name="dropout")
        classifier = task_dense(encoder, num_classes, "classifier")
        inputs = encoder_inputs(encoder)
        features = encoder(inputs)[self.encoder_output]
        logits = ops.cast(classifier(dropout(features)), "float32")
        super().__init__(inputs=inputs, outputs=logits, name=name or self.default_name, **kwargs)
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
