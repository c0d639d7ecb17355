"""SIGTERM in the loop: a checkpoint at the step reached, Preempted with the distinct exit
status, and a rerun that resumes to the weights of an uninterrupted run."""

import os
import signal
import tempfile

import keras
import tensorflow as tf

from bert_tf.training.loop import Phase, Trainer
from bert_tf.training.optimization import create_optimizer
from bert_tf.training.preemption import EXIT_PREEMPTED, Preempted, StopSignals


def _data(context):
    x = tf.random.stateless_normal([96, 3], seed=[1, 2])
    dataset = tf.data.Dataset.from_tensor_slices({"x": x, "y": tf.reduce_sum(x, 1)})
    return dataset.shuffle(96, seed=3).repeat().batch(8)


def _loss(features, outputs, totals):
    return {"loss": tf.reduce_sum((outputs[:, 0] - features["y"]) ** 2) / totals["examples"]}


def _trainer(model_dir: str) -> Trainer:
    keras.utils.set_random_seed(4)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    optimizer = create_optimizer(0.05, num_train_steps=30, num_warmup_steps=0, presummed_gradients=True)
    return Trainer(
        tf.distribute.get_strategy(),
        model,
        optimizer,
        _loss,
        model_dir,
        global_batch_size=8,
        steps_per_loop=5,
        save_checkpoints_steps=20,
        model_inputs=lambda features: features["x"],
        verbose=False,
    )


class PreemptionTest(tf.test.TestCase):
    def test_sigterm_saves_at_the_step_reached_and_the_rerun_matches(self):
        phases = [Phase("all", 0, 30, _data)]
        straight = _trainer(tempfile.mkdtemp())
        straight.train(phases)

        model_dir = tempfile.mkdtemp()
        interrupted = _trainer(model_dir)

        def terminate_at_10(step, metrics):
            if step == 10:
                os.kill(os.getpid(), signal.SIGTERM)

        with self.assertRaises(Preempted) as caught:
            interrupted.train(phases, on_loop_end=terminate_at_10)
        self.assertEqual(caught.exception.exit_code, EXIT_PREEMPTED)
        self.assertEqual(EXIT_PREEMPTED, 128 + signal.SIGTERM)
        self.assertIn("stopped on SIGTERM at step 10", str(caught.exception))
        self.assertTrue(tf.train.latest_checkpoint(model_dir).endswith("ckpt-10"))  # not a save step
        self.assertIs(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)  # handlers restored

        resumed = _trainer(model_dir)
        result = resumed.train(phases)
        self.assertEqual(result.history[0]["step"], 15)
        for want, got in zip(straight.model.weights, resumed.model.weights, strict=True):
            self.assertAllClose(got, want, atol=1e-6, rtol=0)

    def test_a_second_ctrl_c_stops_at_once(self):
        with StopSignals() as signals, self.assertRaises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            self.assertEqual(signals.received, "SIGINT")
            os.kill(os.getpid(), signal.SIGINT)
