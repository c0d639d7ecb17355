"""Strategy creation from flags; --tpu wiring with a mocked resolver."""

import os
from unittest import mock

import tensorflow as tf

from bert_tf.training import distribute


class GetStrategyTest(tf.test.TestCase):
    def test_default_and_one_device(self):
        self.assertIs(distribute.get_strategy(), tf.distribute.get_strategy())
        self.assertIsInstance(distribute.get_strategy("one_device"), tf.distribute.OneDeviceStrategy)

    def test_mirrored_over_visible_devices(self):
        strategy = distribute.get_strategy("mirrored")
        self.assertIsInstance(strategy, tf.distribute.MirroredStrategy)
        self.assertGreaterEqual(strategy.num_replicas_in_sync, 1)

    def test_tpu_name_reaches_resolver_and_strategy(self):
        resolver = mock.sentinel.resolver
        with (
            mock.patch.object(
                tf.distribute.cluster_resolver, "TPUClusterResolver", return_value=resolver
            ) as make,
            mock.patch.object(tf.config, "experimental_connect_to_cluster") as connect,
            mock.patch.object(tf.tpu.experimental, "initialize_tpu_system") as initialize,
            mock.patch.object(tf.distribute, "TPUStrategy") as tpu_strategy,
        ):
            strategy = distribute.get_strategy(tpu="my-tpu")
            make.assert_called_once_with(tpu="my-tpu")
            connect.assert_called_once_with(resolver)
            initialize.assert_called_once_with(resolver)
            tpu_strategy.assert_called_once_with(resolver)
            self.assertIs(strategy, tpu_strategy.return_value)
            # --strategy=tpu --tpu=local is the TPU VM form.
            distribute.get_strategy("tpu", tpu="local")
            make.assert_called_with(tpu="local")

    def test_bad_requests_say_what_to_change(self):
        with self.assertRaisesRegex(distribute.StrategyError, "unknown strategy 'parameter_server'"):
            distribute.get_strategy("parameter_server")
        with self.assertRaisesRegex(distribute.StrategyError, "--tpu=x needs --strategy=tpu"):
            distribute.get_strategy("mirrored", tpu="x")
        with self.assertRaisesRegex(distribute.StrategyError, "--num_gpus=4 but TensorFlow sees 0 GPU"):
            distribute.get_strategy("mirrored", num_gpus=4)
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("TF_CONFIG", None)
            with self.assertRaisesRegex(
                distribute.StrategyError, "TF_CONFIG environment variable, which is not set"
            ):
                distribute.get_strategy("multi_worker")

    def test_tpu_name_that_cannot_be_resolved_says_how_to_name_the_tpu(self):
        # Off Google Cloud a TPU name cannot be resolved: the real resolver's lookup fails
        # with a network error (no metadata server here), which must become one line naming
        # --tpu and the ways to reach a TPU.
        with self.assertRaises(distribute.StrategyError) as caught:
            distribute.get_strategy(tpu="my-tpu")
        message = str(caught.exception)
        for part in ("--tpu=my-tpu", "--tpu=local", "grpc://", "credentials"):
            self.assertIn(part, message)
