"""What the task models share: holding a serialized encoder and building a dense head."""

from __future__ import annotations

import keras

from bert_tf.layers.activations import truncated_normal
from bert_tf.models.encoder import ENCODER_INPUTS, BertEncoder


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


def task_config(model: keras.Model, **fields) -> dict:
    return {
        "encoder": keras.saving.serialize_keras_object(model.encoder),
        "name": model.name,
        "trainable": model.trainable,
        **fields,
    }


def task_from_config(cls, config: dict):
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
    return cls(**config)
