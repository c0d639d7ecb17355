"""Activation functions by the names `bert_config.json` uses."""

from __future__ import annotations

from collections.abc import Callable

import keras
from keras import ops


def _in_float32(x, function):
    """`function(x)` computed in float32 for half-precision `x`, returned in x's dtype: GELU's
    half a dozen elementwise ops (and their gradients) then cost one cast each way and round
    once, where on a CPU each bfloat16 op converts its operands to float32 and back anyway."""
    dtype = keras.backend.standardize_dtype(x.dtype)
    if dtype not in ("bfloat16", "float16"):
        return function(x)
    return ops.cast(function(ops.cast(x, "float32")), dtype)


def gelu(x):
    """GELU, tanh approximation: the `gelu` of the original modeling.py."""
    return _in_float32(x, lambda x: ops.gelu(x, approximate=True))


def gelu_exact(x):
    """GELU with erf: what Hugging Face configs call `gelu` (`gelu_exact` in ours)."""
    return _in_float32(x, lambda x: ops.gelu(x, approximate=False))


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
