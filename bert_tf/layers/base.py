"""What the layers share: a config made of the constructor arguments they keep."""

from __future__ import annotations

import keras


class ConfiguredLayer(keras.layers.Layer):
    """A layer whose config is Keras' own (name, dtype, trainable) plus the constructor
    arguments named in `config_fields`, each kept as an attribute of the same name, so
    that `cls.from_config(layer.get_config())` builds the same layer."""

    config_fields: tuple[str, ...] = ()

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({field: getattr(self, field) for field in self.config_fields})
        return config
