"""`--mixed_precision=auto`: the policy for the hardware, from what the CPU and GPUs say."""

import os
import tempfile
from unittest import mock

import tensorflow as tf

from bert_tf.training import precision


def cpuinfo(flags: str) -> str:
    path = os.path.join(tempfile.mkdtemp(), "cpuinfo")
    with open(path, "w") as handle:
        handle.write(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    return path


class PrecisionTest(tf.test.TestCase):
    def test_bfloat16_units_are_read_from_the_cpu_flags(self):
        self.assertTrue(precision.cpu_has_bfloat16_units(cpuinfo("fpu avx2 avx512_bf16 amx_bf16 amx_tile")))
        # AVX512-BF16 without AMX: float32 is the faster there (bench/finetune_step.py).
        self.assertFalse(precision.cpu_has_bfloat16_units(cpuinfo("fpu sse avx2 avx512f avx512_bf16")))
        self.assertFalse(precision.cpu_has_bfloat16_units(cpuinfo("fpu sse avx2 avx512f avx512bw")))
        self.assertFalse(precision.cpu_has_bfloat16_units("/no/such/cpuinfo"))

    def test_auto_by_device(self):
        self.assertEqual(precision.resolve("mixed_float16"), "mixed_float16")  # an explicit policy stays
        for has_units, expected in ((True, "mixed_bfloat16"), (False, "float32")):
            with mock.patch.object(precision, "cpu_has_bfloat16_units", return_value=has_units):
                self.assertEqual(precision.resolve("auto", tf.distribute.get_strategy()), expected)
        for capability, expected in (((7, 0), "mixed_float16"), ((9, 0), "mixed_bfloat16")):
            with (
                mock.patch.object(tf.config, "list_physical_devices", return_value=["gpu0"]),
                mock.patch.object(
                    tf.config.experimental,
                    "get_device_details",
                    return_value={"compute_capability": capability},
                ),
            ):
                self.assertEqual(precision.resolve("auto"), expected)
        tpu = mock.Mock(spec=tf.distribute.TPUStrategy)
        self.assertEqual(precision.resolve("auto", tpu), "mixed_bfloat16")


if __name__ == "__main__":
    tf.test.main()
