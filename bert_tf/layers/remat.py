"""Rematerialization: a block's activations recomputed in the backward pass instead of kept.

`keras.remat` (the backend's `jax.checkpoint` or `tf.recompute_grad`) runs a function again
when gradients are taken. Run again as is, a function with dropout draws new masks, because
each Dropout layer's seed generator has moved on, so the gradients would belong to other
masks than the forward pass used (on TensorFlow, Keras' own `RematScope` does this). Here
the generators' states go in as inputs and come out as outputs. The recomputation starts
from the states the forward pass started from and draws the same masks. The caller's
generators end where the forward pass left them, on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import keras


def seed_generators(layer: keras.layers.Layer) -> list:
    """The seed generators of `layer` and the layers in it (its Dropout layers')."""
    found = []
    for sublayer in [layer, *layer._flatten_layers(include_self=False)]:
        generator = getattr(sublayer, "seed_generator", None)
        if generator is not None and all(generator is not other for other in found):
            found.append(generator)
    return found


def rematerialized(function: Callable, generators: Sequence, *args):
    """`function(*args)` (a tensor or a nest of tensors), its activations recomputed in the
    backward pass with the same random draws (`generators`: every seed generator it uses)."""
    count = len(args)

    def replay(*inputs):
        for generator, state in zip(generators, inputs[count:], strict=True):
            generator.state.assign(state)
        return function(*inputs[:count]), [generator.state.value for generator in generators]

    outputs, states = keras.remat(replay)(*args, *[generator.state.value for generator in generators])
    for generator, state in zip(generators, states, strict=True):
        generator.state.assign(state)
    return outputs
