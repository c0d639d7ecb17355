"""The training loop on the real BertPretrainer: phase switch, crash and resume, a
non-finite loss, and the learning rate it reports."""

import os
import shutil
import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from bert_tf.config import load_config
from bert_tf.models import BertPretrainer
from bert_tf.models.pretrainer import example_features
from bert_tf.training import optimization, pretraining
from bert_tf.training.loop import NonFiniteLossError, Phase, Trainer
from bert_tf.training.progress import read_metrics
from bert_tf.training.settings import PretrainingConfig
from tests.harness import distributed_run

CONFIG = load_config("bert_tiny").replace(vocab_size=97)  # dropout on: resume must restore its RNG too
BATCH = 8


def make_trainer(model_dir, total_steps, save_every=2, steps_per_loop=2, seed=3):
    keras.utils.set_random_seed(seed)
    model = BertPretrainer(CONFIG)
    model(example_features(1, 16, 4))
    optimizer = optimization.create_optimizer(
        5e-3, num_train_steps=total_steps, num_warmup_steps=2, presummed_gradients=True
    )

    def loss_with_length(features, outputs, totals):
        metrics = pretraining.pretraining_loss_share(features, outputs, totals)
        # The sequence length the step trained on, to see where the phases switch.
        metrics["seq_length"] = tf.cast(tf.shape(features["input_ids"])[1], tf.float32)
        return metrics

    return Trainer(
        tf.distribute.get_strategy(),
        model,
        optimizer,
        loss_with_length,
        str(model_dir),
        global_batch_size=BATCH,
        totals_fn=pretraining.masked_lm_totals,
        model_inputs=pretraining.model_inputs,
        steps_per_loop=steps_per_loop,
        save_checkpoints_steps=save_every,
        verbose=False,
    )


def data(seq_length, predictions, poison_from_batch=None):
    def dataset_fn(context):
        dataset = distributed_run.synthetic_dataset(
            context, BATCH, seq_length, predictions, CONFIG.vocab_size
        )
        if poison_from_batch is None:
            return dataset

        def poison(index, features):
            bad = tf.where(index >= poison_from_batch, np.float32(np.nan), 0.0)
            return {**features, "masked_lm_weights": features["masked_lm_weights"] + bad}

        return dataset.enumerate().map(poison)

    return dataset_fn


def two_phases(total=10, switch=6):
    return [Phase("short", 0, switch, data(16, 4)), Phase("long", switch, total, data(32, 8))]


class TrainerTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.work = Path(tempfile.mkdtemp(prefix="bert_tf_loop_"))

    def test_phase_switch_resume_after_a_crash_learning_rate_and_logs(self):
        # Uninterrupted: 10 steps, phase 2 (sequence length 32) from step 6.
        trainer = make_trainer(self.work / "straight", total_steps=10, steps_per_loop=4)
        result = trainer.train(two_phases())
        self.assertEqual([h["step"] for h in result.history], [2, 4, 6, 8, 10])
        self.assertEqual([h["seq_length"] for h in result.history], [16, 16, 16, 32, 32])
        self.assertTrue(result.checkpoint.endswith("ckpt-10"))
        straight = trainer.model.get_weights()

        # The learning rate it reports is the schedule's at the step reached.
        schedule = optimization.WarmupLinearDecay(5e-3, 10, 2)
        self.assertAllClose(
            [h["learning_rate"] for h in result.history], [schedule(s) for s in (2, 4, 6, 8, 10)]
        )
        self.assertIn("sequences_per_second", result.history[-1])
        logs = list((self.work / "straight" / "logs").glob("events.out.tfevents.*"))
        self.assertLen(logs, 1)
        tags = {
            v.tag for event in tf.compat.v1.train.summary_iterator(str(logs[0])) for v in event.summary.value
        }
        self.assertContainsSubset(
            {"loss", "masked_lm_accuracy", "next_sentence_accuracy", "learning_rate", "sequences_per_second"},
            tags,
        )
        # metrics.jsonl holds the same reports as the history.
        reports = read_metrics(str(self.work / "straight"))
        self.assertEqual(reports[0], {**reports[0], "split": "run", "step": 0, "program": "bert_tf.pretrain"})
        reports = [r for r in reports if r["split"] != "run"]
        self.assertEqual([(r["split"], r["step"]) for r in reports], [("train", s) for s in (2, 4, 6, 8, 10)])
        self.assertAllClose([r["loss"] for r in reports], [h["loss"] for h in result.history])

        # A crash right after the checkpoint of step 8 (inside phase 2) leaves ckpt-8 as the
        # latest; a new process (fresh objects, another seed) rerunning the same phases resumes.
        crashed = self.work / "crashed"
        crashed.mkdir()
        for path in (self.work / "straight").glob("ckpt-8.*"):
            shutil.copy(path, crashed / path.name)
        shutil.copy(self.work / "straight" / "checkpoint", crashed / "checkpoint")
        (crashed / "checkpoint").write_text('model_checkpoint_path: "ckpt-8"\n')
        resumed = make_trainer(crashed, total_steps=10, steps_per_loop=4, seed=99)
        result = resumed.train(two_phases())
        self.assertEqual([(h["step"], h["seq_length"]) for h in result.history], [(10, 32)])
        self.assertEqual(
            [(r["split"], r["step"]) for r in read_metrics(str(crashed))], [("run", 8), ("train", 10)]
        )
        for ours, theirs in zip(resumed.model.get_weights(), straight, strict=True):
            self.assertAllClose(ours, theirs, atol=1e-6, rtol=0)
        self.assertEqual(int(resumed.optimizer.iterations.numpy()), 10)

    def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(self):
        trainer = make_trainer(self.work / "nan", total_steps=10, steps_per_loop=2, save_every=2)
        with self.assertRaisesRegex(
            NonFiniteLossError, r"the loss became nan between steps 4 and 6 .*ckpt-4"
        ):
            trainer.train([Phase("poisoned", 0, 10, data(16, 4, poison_from_batch=5))])
        self.assertTrue(tf.train.latest_checkpoint(str(self.work / "nan")).endswith("ckpt-4"))
        reloaded = make_trainer(self.work / "nan", total_steps=10)
        self.assertEqual(reloaded.restore(), 4)
        self.assertTrue(all(np.isfinite(w).all() for w in reloaded.model.get_weights()))

    def test_phase_lengths_from_settings(self):
        settings = PretrainingConfig(
            num_train_steps=1000,
            num_warmup_steps=10,
            phase2_fraction=0.1,
            max_seq_length=128,
            max_predictions_per_seq=20,
        )
        self.assertEqual(settings.phase1_steps, 900)
        self.assertEqual(settings.phase2_predictions, 80)
        self.assertEqual(PretrainingConfig().phase1_steps, PretrainingConfig().num_train_steps)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf.test.main()
