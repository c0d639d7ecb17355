"""Training with packing on: under MirroredStrategy (2 logical CPUs) and after a resume it
reaches what one uninterrupted device reaches; the progress line reports real tokens/s
and the fill rate; bad --packing input is refused before anything is written."""

import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_tf import pretrain
from bert_tf.errors import UsageError
from bert_tf.training import inputs, pretraining
from bert_tf.training.progress import ProgressReporter, ScalarLog
from bert_tf.training.settings import PretrainingConfig
from tests.harness import distributed_run
from tests.harness.processes import REPO

SCRIPT = distributed_run.__file__


@pytest.mark.slow  # ~30 s of subprocesses; packed forward passes: tests/models/test_packing.py
class PackedTrainingTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = Path(tempfile.mkdtemp(prefix="bert_tf_packed_"))
        environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
        environment.pop("TF_CONFIG", None)
        log = open(cls.work / "mirrored.log", "w")  # noqa: SIM115 (closed below)
        mirrored = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--out", str(cls.work / "mirrored.npz"), "--strategy=mirrored",
             "--cpu_devices=2", "--packing", f"--model_dir={cls.work / 'mirrored'}"],
            env=environment, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
        )  # fmt: skip
        # One device, while the subprocess runs: straight (saving every 2 steps), then again
        # from a copy of its model_dir cut back to step 2, as a run killed there leaves it.
        default = tf.distribute.get_strategy()
        straight, cut = cls.work / "a", cls.work / "b"
        cls.results = {
            "one_device": distributed_run.train(
                default, str(straight), packing=True, save_checkpoints_steps=2
            )
        }
        shutil.copytree(straight, cut)
        for later in [*cut.glob("ckpt-4.*"), *cut.glob("ckpt-6.*")]:
            later.unlink()
        (cut / "checkpoint").write_text(
            'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n'
        )
        cls.results["resumed"] = distributed_run.train(
            default, str(cut), packing=True, save_checkpoints_steps=2
        )
        try:
            mirrored.wait(timeout=300)
        except subprocess.TimeoutExpired:
            mirrored.kill()
        log.close()
        if mirrored.returncode != 0:
            text = (cls.work / "mirrored.log").read_text()
            raise AssertionError(f"mirrored run failed ({mirrored.returncode}):\n{text[-3000:]}")
        cls.results["mirrored"] = dict(np.load(cls.work / "mirrored.npz"))

    def assertSameWeights(self, name):
        reference, other = self.results["one_device"], self.results[name]
        for key in sorted(k for k in reference if k.startswith("w")):
            self.assertAllClose(other[key], reference[key], atol=1e-5, rtol=0, msg=f"{name} {key}")

    def test_mirrored_matches_one_device(self):
        self.assertEqual(int(self.results["mirrored"]["replicas"]), 2)
        self.assertAllClose(
            self.results["mirrored"]["losses"], self.results["one_device"]["losses"], atol=1e-5
        )
        self.assertSameWeights("mirrored")

    def test_resumed_run_matches_the_uninterrupted_one(self):
        # The resumed run reports only the loops after step 2.
        self.assertAllClose(
            self.results["resumed"]["losses"], self.results["one_device"]["losses"][1:], atol=1e-6
        )
        self.assertSameWeights("resumed")


class PackedReportingTest(tf.test.TestCase):
    def test_progress_line_and_tensorboard_show_real_tokens_and_fill(self):
        log_dir = tempfile.mkdtemp()
        stream = io.StringIO()
        scalars = ScalarLog(log_dir, "train", log_dir)
        reporter = ProgressReporter(10, global_batch_size=4, scalars=scalars, stream=stream)
        reporter.start(0)
        metrics = {"loss": 2.0, "real_tokens": 400.0, "fill_rate": 0.78125}
        first = reporter.report(5, metrics, learning_rate=1e-3)
        second = reporter.report(10, metrics, learning_rate=1e-3)
        reporter.close()
        self.assertIn("fill 78.1%", first)
        self.assertNotIn("tok/s", first)  # the first loop includes compilation
        self.assertNotIn("real_tokens", second)
        self.assertRegex(second, r"\d+ tok/s")
        # 5 steps of 400 real tokens: tokens/s is 400 x 5 / elapsed, i.e. 100 x sequences/s here.
        self.assertAllClose(reporter.real_tokens_per_second, 100 * reporter.sequences_per_second, rtol=1e-6)
        events = next(Path(log_dir).glob("events.out.tfevents.*"))
        tags = {v.tag for e in tf.compat.v1.train.summary_iterator(str(events)) for v in e.summary.value}
        self.assertContainsSubset({"fill_rate", "real_tokens", "real_tokens_per_second"}, tags)


class PackingFlagsTest(tf.test.TestCase):
    def test_packing_flags_reach_the_settings(self):
        flag_values = flags.FlagValues()
        pretrain.define_flags(flag_values)
        flag_values(["pretrain", "--packing", "--max_predictions_per_row=30", "--max_instances_per_row=4"])
        settings = pretrain.settings_from_flags(flag_values)
        self.assertTrue(settings.packing)
        self.assertEqual((settings.row_predictions(1), settings.max_instances_per_row), (30, 4))

    def test_a_prediction_budget_too_small_names_the_needed_value(self):
        with self.assertRaisesRegex(
            UsageError,
            "max_predictions_per_row=12 is too small.*pass max_predictions_per_row=20 or more",
        ):
            PretrainingConfig(
                packing=True, max_seq_length=128, max_predictions_per_seq=20, max_predictions_per_row=12
            )

    def test_records_longer_than_the_rows_say_what_to_regenerate(self):
        work = Path(tempfile.mkdtemp())
        path = str(work / "long.tfrecord")
        example = tf.train.Example()
        for name, length in (("input_ids", 128), ("input_mask", 128), ("segment_ids", 128)):
            example.features.feature[name].int64_list.value.extend([1] * length)
        example.features.feature["next_sentence_labels"].int64_list.value.append(0)
        with tf.io.TFRecordWriter(path) as writer:
            writer.write(example.SerializeToString())
        settings = PretrainingConfig(
            model_dir=str(work / "model"), train_files=path, vocab_file=str(REPO / "tests/fixtures/bert_uncased_vocab.txt"),
            config="bert_tiny", max_seq_length=64, packing=True,
        )  # fmt: skip
        with self.assertRaisesRegex(
            inputs.InputError,
            "sequences of length 128, which cannot be packed into rows of --max_seq_length=64.*"
            "regenerate the records with --max_seq_length=64 or less",
        ):
            pretraining.run_pretraining(settings)
        self.assertFalse((work / "model").exists())  # nothing written
