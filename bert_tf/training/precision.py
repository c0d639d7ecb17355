"""Choosing the Keras dtype policy: `auto` picks the fastest one that trains as well (light module).

- TPUs, and GPUs of compute capability 8.0 or more (A100, H100, ...): `mixed_bfloat16`;
- older GPUs: `mixed_float16` (with loss scaling);
- CPUs, and the JAX backend on a CPU: `float32`, Keras' own default, so that the command line
  and a Python `fit` (which follows Keras' global policy) train the same weights for a seed on
  any CPU. AVX512-BF16's dot-product instructions alone do not pay (a fine-tuning step runs
  about 1.4x faster in float32 than in mixed_bfloat16 there: bench/finetune_step.py); on a CPU
  with bfloat16 matrix units (AMX) `--mixed_precision=mixed_bfloat16`, asked for, is about 1.25x
  faster.

Example:

>>> resolve("float32")
'float32'
>>> resolve("auto") in POLICIES
True
"""

from __future__ import annotations

AUTO = "auto"
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def resolve(policy: str, strategy=None) -> str:
    """The dtype policy to train with: `policy` itself unless it is "auto" (see the module doc)."""
    if policy != AUTO:
        return policy
    import keras

    if keras.backend.backend() != "tensorflow":
        import jax

        return "float32" if jax.default_backend() == "cpu" else "mixed_bfloat16"
    import tensorflow as tf

    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "mixed_bfloat16"
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability", (0, 0))
        return "mixed_bfloat16" if tuple(capability) >= (8, 0) else "mixed_float16"
    return "float32"
