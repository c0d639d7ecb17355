"""Choosing the Keras dtype policy: `auto` picks the fastest one that trains as well (light module).

- TPUs, and GPUs of compute capability 8.0 or more (A100, H100, ...): `mixed_bfloat16`;
- older GPUs: `mixed_float16` (with loss scaling);
- CPUs with bfloat16 matrix units (AMX): `mixed_bfloat16`;
- other CPUs, the AVX512-BF16 ones included, and the JAX backend on a CPU (XLA has no
  bfloat16 fast path there): `float32`. AVX512-BF16's dot-product instructions alone do not
  pay: on such a CPU a fine-tuning step runs about 1.4x faster in float32 than in
  mixed_bfloat16 (bench/finetune_step.py; figures in bench/README.md).

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
    """Whether the CPU has bfloat16 matrix units (Linux's flag amx_bf16)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as handle:
            flags = next((line for line in handle if line.startswith("flags")), "")
    except OSError:
        return False
    return "amx_bf16" in flags.split()


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
