"""`--mixed_precision=auto`: the policy for the hardware, from what the CPU and GPUs say."""

from unittest import mock

import tensorflow as tf

from bert_tf.training import precision


class PrecisionTest(tf.test.TestCase):
    def test_auto_by_device(self):
        self.assertEqual(precision.resolve("mixed_float16"), "mixed_float16")  # an explicit policy stays
        with mock.patch.object(tf.config, "list_physical_devices", return_value=[]):  # a CPU, AMX or not
            self.assertEqual(precision.resolve("auto", tf.distribute.get_strategy()), "float32")
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
