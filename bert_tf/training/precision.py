"""Choosing the Keras dtype policy: `auto` picks the fastest one that trains as well (light module).

- TPUs, and GPUs of compute capability 8.0 or more (A100, H100, ...): `mixed_bfloat16`;
- older GPUs: `mixed_float16` (with loss scaling);
- CPUs with bfloat16 units (AMX or AVX512-BF16): `mixed_bfloat16`, which fine-tunes about
  1.5x faster than float32 there with the same dev accuracy (bench/README.md);
- other CPUs, and the JAX backend on a CPU (XLA has no bfloat16 fast path there):
  `float32`.

Example:

>>> resolve("float32")
'float32'
>>> resolve("auto") in POLICIES
True
"""

from __future__ import annotations

AUTO = "auto"
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def cpu_has_bfloat16_units(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU multiplies bfloat16 in hardware (Linux's flags amx_bf16, avx512_bf16)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as handle:
            flags = next((line for line in handle if line.startswith("flags")), "")
    except OSError:
        return False
    return bool({"amx_bf16", "avx512_bf16"} & set(flags.split()))


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
    return "mixed_bfloat16" if cpu_has_bfloat16_units() else "float32"
