"""Activation functions by the names `bert_config.json` uses."""

from __future__ import annotations

from collections.abc import Callable

import keras
from keras import ops


def gelu(x):
    """GELU, tanh approximation: the `gelu` of the original modeling.py."""
    return ops.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU with erf: what Hugging Face configs call `gelu` (`gelu_exact` in ours)."""
    return ops.gelu(x, approximate=False)


_ACTIVATIONS: dict[str, Callable] = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": ops.relu,
    "tanh": ops.tanh,
    "linear": lambda x: x,
}


def get_activation(name: str) -> Callable:
    """Returns the activation function for a `hidden_act` name of `bert_config.json`."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; use one of {sorted(_ACTIVATIONS)}") from None


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    """The original's initializer: normal(0, stddev) truncated at two standard deviations."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
