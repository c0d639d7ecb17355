"""`python -m bert_tf.pretrain` and `run_pretraining`: flags, --tpu wiring, overfitting a
tiny corpus, kill -9 and resume, and the no-flag demo run (slow)."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_tf import cli, pretrain
from bert_tf.config import load_config
from bert_tf.models.pretrainer import example_features
from bert_tf.training import distribute, inputs, pretraining
from bert_tf.training.settings import PretrainingConfig
from tests.harness import processes
from tests.harness.data import (
    CORPUS_TOKENS,
    SENTENCES,
    corpus_config,
    write_config,
    write_corpus,
    write_vocab,
)

REPO = Path(__file__).resolve().parents[2]
VOCAB = REPO / "tests" / "fixtures" / "bert_uncased_vocab.txt"


def checkpoint_weights(model_dir: str) -> dict:
    """The model weights of model_dir's latest checkpoint, by variable path."""
    from bert_tf.models import BertPretrainer

    model = BertPretrainer(load_config(os.path.join(model_dir, "bert_config.json")))
    model(example_features(1, 8, 2))
    checkpoint = tf.train.Checkpoint(model=model)
    checkpoint.restore(
        tf.train.latest_checkpoint(model_dir)
    ).expect_partial().assert_existing_objects_matched()
    return {weight.path: weight.numpy() for weight in model.weights}


class FlagsTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        # Each test gets its own flags: the CLIs define theirs only when run as programs.
        self.flag_values = flags.FlagValues()
        pretrain.define_flags(self.flag_values)
        self.flag_values(["pretrain"])

    def test_every_config_field_has_a_flag_with_the_same_default(self):
        defaults = PretrainingConfig()
        skip = {"fill_mask_demo", "cache_dir"}
        for field in dataclasses.fields(PretrainingConfig):
            if field.name in skip:
                continue
            name = cli.flag_name(field)  # --do_whole_word_mask for whole_word_mask
            self.assertIn(name, self.flag_values, field.name)
            # Defaults that follow other settings (the length, the predictions) are None in both.
            self.assertEqual(self.flag_values[name].default, field.default, field.name)
        self.assertEqual((defaults.max_seq_length, defaults.max_predictions_per_seq), (64, 10))  # the demo's

    def test_tpu_flag_gives_the_loop_a_tpu_strategy(self):
        work = Path(tempfile.mkdtemp())
        corpus = write_corpus(work / "corpus.txt")
        seen = {}

        def fake_train(settings, config, strategy, *rest):
            seen["strategy"] = strategy
            return mock.Mock(is_chief=True)

        resolver = mock.sentinel.resolver
        self.flag_values(
            [
                "pretrain",
                "--tpu=my-tpu",
                f"--corpus={corpus}",
                f"--vocab_file={VOCAB}",
                "--config=bert_base",
                f"--model_dir={work / 'model'}",
            ]
        )
        with (
            mock.patch.object(
                tf.distribute.cluster_resolver, "TPUClusterResolver", return_value=resolver
            ) as make,
            mock.patch.object(tf.config, "experimental_connect_to_cluster"),
            mock.patch.object(tf.tpu.experimental, "initialize_tpu_system"),
            mock.patch.object(tf.distribute, "TPUStrategy") as tpu_strategy,
            mock.patch.object(pretraining, "_train", side_effect=fake_train),
        ):
            tpu_strategy.return_value.num_replicas_in_sync = 8
            settings = pretrain.settings_from_flags(self.flag_values)
            self.assertEqual((settings.tpu, settings.config), ("my-tpu", "bert_base"))
            pretraining.run_pretraining(settings)
        make.assert_called_once_with(tpu="my-tpu")
        self.assertIs(seen["strategy"], tpu_strategy.return_value)
        self.assertIs(distribute.get_strategy, distribute.get_strategy)  # not left patched


class PretrainingRunTest(tf.test.TestCase):
    def test_short_run_writes_model_dir_export_and_eval(self):
        work = Path(tempfile.mkdtemp())
        corpus = write_corpus(work / "corpus.txt")
        settings = PretrainingConfig(
            model_dir=str(work / "model"),
            config=write_config(work / "config.json", corpus_config()),
            corpus=corpus,
            eval_files=corpus,
            eval_steps=3,
            eval_every_steps=3,
            vocab_file=write_vocab(work / "vocab.txt", CORPUS_TOKENS),
            train_batch_size=8,
            max_seq_length=32,
            max_predictions_per_seq=5,
            num_train_steps=6,
            num_warmup_steps=2,
            steps_per_loop=3,
            save_checkpoints_steps=3,
        )
        result = pretraining.run_pretraining(settings)
        self.assertEqual(result.train.step, 6)
        self.assertEqual(
            sorted(result.eval_metrics),
            ["loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss"],
        )
        self.assertBetween(result.eval_metrics["masked_lm_accuracy"], 0.0, 1.0)
        model_dir = Path(result.model_dir)
        # Periodic evaluation: scalars at steps 3 and 6, the best checkpoint kept beside.
        self.assertEqual([entry["step"] for entry in result.eval_history], [3, 6])
        self.assertEqual(
            result.eval_metrics, {k: v for k, v in result.eval_history[-1].items() if k != "step"}
        )
        best = min(result.eval_history, key=lambda entry: entry["masked_lm_loss"])
        self.assertEqual(json.loads((model_dir / "best" / "eval.json").read_text())["step"], best["step"])
        self.assertEqual(
            (model_dir / "best" / f"ckpt-{best['step']}.index").read_bytes(),
            (model_dir / f"ckpt-{best['step']}.index").read_bytes(),
        )
        self.assertEqual(len(list((model_dir / "best").glob("ckpt-*.index"))), 1)
        logged = {}
        for path in (model_dir / "logs" / "eval").glob("events*"):
            for event in tf.compat.v1.train.summary_iterator(str(path)):
                for value in event.summary.value:
                    logged[value.tag, event.step] = float(tf.make_ndarray(value.tensor))
        for entry in result.eval_history:
            for name in ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_accuracy"):
                self.assertAllClose(logged[name, entry["step"]], entry[name], msg=name)
        for name in ("bert_config.json", "vocab.txt", "checkpoint", "ckpt-6.index", "ckpt-3.index"):
            self.assertTrue((model_dir / name).exists(), name)
        # The export is what from_pretrained reads, holding the trained weights.
        from bert_tf.checkpoints import from_pretrained

        model, tokenizer_settings = from_pretrained(result.export_dir)
        self.assertTrue(tokenizer_settings.lower_case)
        trained = checkpoint_weights(result.model_dir)
        exported = {w.path: w.numpy() for w in model.weights}
        self.assertEqual(trained.keys(), exported.keys())
        for path, value in trained.items():
            self.assertAllClose(exported[path], value, msg=path)

        # --init_checkpoint accepts the export (Google/Hugging Face files) and a run's model_dir.
        from bert_tf.models import BertPretrainer

        for source in (result.export_dir, result.model_dir):
            fresh = BertPretrainer(load_config(settings.config))
            fresh(example_features(1, 8, 2))
            pretraining._load_init_checkpoint(fresh, source)
            for weight in fresh.weights:
                self.assertAllClose(weight.numpy(), trained[weight.path], msg=f"{source}: {weight.path}")

        # Rerunning the finished command trains nothing more and keeps the checkpoint.
        again = pretraining.run_pretraining(settings)
        self.assertEqual((again.train.step, again.train.history), (6, []))

    def test_the_demo_fills_a_mask_of_the_embedded_corpus_at_the_end(self):
        # The no-flag demo's path in a few steps (the whole demo is NoFlagDemoTest, slow).
        work = Path(tempfile.mkdtemp())
        settings = PretrainingConfig(
            model_dir=str(work / "demo"), cache_dir=str(work / "cache"), num_train_steps=2, steps_per_loop=2
        )
        result = pretraining.run_pretraining(settings)
        self.assertLen(result.fill_mask, 5)  # the top 5 guesses, (token, probability)
        self.assertTrue(all(0.0 <= probability <= 1.0 for _, probability in result.fill_mask))
        self.assertTrue((Path(result.export_dir) / "vocab.txt").exists())

    def test_a_corpus_without_a_vocab_learns_one_keeps_it_and_a_rerun_resumes_with_it(self):
        work = Path(tempfile.mkdtemp())
        settings = PretrainingConfig(
            model_dir=str(work / "model"),
            config="bert_tiny",
            corpus=write_corpus(work / "corpus.txt", documents=60),
            cache_dir=str(work / "cache"),
            train_batch_size=8,
            max_seq_length=32,
            max_predictions_per_seq=5,
            num_train_steps=2,
            steps_per_loop=2,
        )
        result = pretraining.run_pretraining(settings)
        learnt = (work / "model" / "vocab.txt").read_text().split()
        # The corpus' own words, learnt by the vocab learner (independent: its words are the
        # corpus' whitespace words, lower-cased, with "." split off).
        words = {w for line in SENTENCES for w in line.replace(".", " .").split()}
        self.assertEqual(learnt[:5], ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        self.assertContainsSubset(words, set(learnt))
        self.assertEqual(
            json.loads((work / "model" / "bert_config.json").read_text())["vocab_size"], len(learnt)
        )
        self.assertEqual((Path(result.export_dir) / "vocab.txt").read_text().split(), learnt)
        # The rerun with more steps resumes with the run's own vocab (the cache may be gone).
        shutil.rmtree(work / "cache")
        again = pretraining.run_pretraining(dataclasses.replace(settings, num_train_steps=4))
        self.assertEqual([entry["step"] for entry in again.train.history], [4])
        self.assertFalse((work / "cache").exists() and list((work / "cache").glob("vocab_*")))

    def test_masked_lm_only_run_reports_and_trains_no_next_sentence_task(self):
        work = Path(tempfile.mkdtemp())
        settings = PretrainingConfig(
            model_dir=str(work / "model"),
            config=write_config(work / "config.json", corpus_config()),
            corpus=write_corpus(work / "corpus.txt", documents=40),
            vocab_file=write_vocab(work / "vocab.txt"),
            next_sentence_prediction=False,
            masked_lm_prob=0.3,
            train_batch_size=8,
            max_seq_length=32,
            num_train_steps=4,
            steps_per_loop=2,
        )
        self.assertEqual(settings.max_predictions_per_seq, 10)  # ceil(32 x 0.3)
        result = pretraining.run_pretraining(settings)
        for entry in result.train.history:
            self.assertNotIn("next_sentence_loss", entry)
            self.assertAlmostEqual(entry["loss"], entry["masked_lm_loss"], places=5)
            self.assertGreater(entry["fill_rate"], 0.8)  # full-length segments across documents
        # The loss leaves the next-sentence labels out: random labels of weight 0 change nothing.
        rng = np.random.default_rng(0)
        features = {
            "masked_lm_ids": rng.integers(0, 50, (4, 3)),
            "masked_lm_weights": np.ones((4, 3), "float32"),
            "next_sentence_labels": rng.integers(0, 2, (4, 1)),
            "next_sentence_weights": np.zeros((4, 1), "float32"),
            "input_mask": np.ones((4, 8), "int32"),
        }
        outputs = {
            "mlm_logits": rng.normal(size=(4, 3, 50)).astype("float32"),
            "nsp_logits": rng.normal(size=(4, 2)),
        }
        totals = pretraining.masked_lm_totals(features)
        shares = pretraining.pretraining_loss_share(features, outputs, totals, next_sentence=False)
        logits = outputs["mlm_logits"] - outputs["mlm_logits"].max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        expected = -np.take_along_axis(log_probs, features["masked_lm_ids"][..., None], -1).mean()
        self.assertAllClose(float(shares["loss"]), expected, rtol=1e-4)

    @pytest.mark.slow
    def test_overfitting_a_tiny_corpus_drives_masked_lm_accuracy_near_one(self):
        work = Path(tempfile.mkdtemp())
        settings = PretrainingConfig(
            model_dir=str(work / "model"),
            config=write_config(work / "config.json", corpus_config(dropout=0.0)),
            corpus=write_corpus(work / "corpus.txt"),
            vocab_file=write_vocab(work / "vocab.txt", CORPUS_TOKENS),
            train_batch_size=16,
            max_seq_length=32,
            max_predictions_per_seq=5,
            num_train_steps=900,
            num_warmup_steps=20,
            learning_rate=3e-3,
            weight_decay=0.0,
            steps_per_loop=100,
            save_checkpoints_steps=900,
            seed=1,
        )
        history = pretraining.run_pretraining(settings).train.history
        self.assertLess(history[0]["masked_lm_accuracy"], 0.3)
        self.assertGreater(history[-1]["masked_lm_accuracy"], 0.95)
        self.assertLess(history[-1]["masked_lm_loss"], 0.2)


@pytest.mark.slow
class ExactEvaluationTest(tf.test.TestCase):
    def test_evaluation_equals_one_batch_of_all_examples_whatever_the_batching(self):
        from bert_tf.models import BertPretrainer
        from bert_tf.models.losses import pretraining_losses
        from bert_tf.training.loop import Trainer
        from bert_tf.training.optimization import create_optimizer

        seq, predictions, count = 16, 4, 7
        rng = np.random.default_rng(0)
        path = os.path.join(tempfile.mkdtemp(), "eval.tfrecord")
        rows = []
        with tf.io.TFRecordWriter(path) as writer:
            for index in range(count):
                length, masked = int(rng.integers(5, seq + 1)), 1 + index % predictions  # weights differ
                row = {
                    "input_ids": [101, *rng.integers(1000, 1100, length - 2).tolist(), 102]
                    + [0] * (seq - length),
                    "input_mask": [1] * length + [0] * (seq - length),
                    "segment_ids": [0] * seq,
                    "masked_lm_positions": list(range(1, masked + 1)) + [0] * (predictions - masked),
                    "masked_lm_ids": rng.integers(1000, 1100, predictions).tolist(),
                    "masked_lm_weights": [1.0] * masked + [0.0] * (predictions - masked),
                    "next_sentence_labels": [index % 2],
                }
                rows.append(row)
                feature = {
                    name: tf.train.Feature(float_list=tf.train.FloatList(value=value))
                    if name == "masked_lm_weights"
                    else tf.train.Feature(int64_list=tf.train.Int64List(value=value))
                    for name, value in row.items()
                }
                writer.write(
                    tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
                )
        settings = PretrainingConfig(
            train_files=path,
            train_batch_size=3,
            max_seq_length=seq,
            max_predictions_per_seq=predictions,
            next_sentence_prediction=True,  # the records' pairs, unpacked (as a run resolves them)
            packing=False,
        )
        model = BertPretrainer(load_config("bert_tiny").replace(vocab_size=1100))
        all_rows = {
            name: np.array([row[name] for row in rows], "float32" if "weights" in name else "int32")
            for name in rows[0]
        }
        expected = pretraining_losses(all_rows, model(pretraining.model_inputs(all_rows), training=False))
        trainer = Trainer(
            tf.distribute.get_strategy(),
            model,
            create_optimizer(1e-3, 10, 1, presummed_gradients=True),
            pretraining.pretraining_loss_share,
            tempfile.mkdtemp(),
            global_batch_size=3,
            totals_fn=pretraining.masked_lm_totals,
            model_inputs=pretraining.model_inputs,
            metric_weights=pretraining.EVALUATION_WEIGHTS,
            verbose=False,
        )
        eval_fn = inputs.pretraining_dataset_fn(
            settings, [path], None, seq, predictions, seed=1, training=False
        )
        # 7 examples in batches of 3: the third is filled with 2 rows of weight 0, and the
        # two steps after it are all padding: they change nothing.
        metrics = trainer.evaluate(eval_fn, steps=5)
        self.assertEqual(set(metrics), set(pretraining.EVALUATION_WEIGHTS))
        for name, value in metrics.items():
            self.assertAllClose(value, float(expected[name]), atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.slow  # ~40 s: two 60-step runs
class MixedPrecisionTest(tf.test.TestCase):
    def test_float16_with_loss_scaling_and_bfloat16_train_with_accumulation(self):
        import keras

        for policy in ("mixed_float16", "mixed_bfloat16"):
            work = Path(tempfile.mkdtemp())
            settings = PretrainingConfig(
                model_dir=str(work / "model"),
                config=write_config(work / "config.json", corpus_config()),
                corpus=write_corpus(work / "corpus.txt"),
                vocab_file=write_vocab(work / "vocab.txt", CORPUS_TOKENS),
                train_batch_size=16,
                max_seq_length=32,
                max_predictions_per_seq=5,
                num_train_steps=60,
                num_warmup_steps=5,
                learning_rate=3e-3,
                steps_per_loop=20,
                save_checkpoints_steps=60,
                mixed_precision=policy,
                gradient_accumulation_steps=2,
            )
            history = pretraining.run_pretraining(settings).train.history
            losses = [entry["loss"] for entry in history]
            self.assertTrue(np.all(np.isfinite(losses)), policy)
            self.assertLess(losses[-1], losses[0] - 0.3, policy)
            self.assertEqual(keras.mixed_precision.global_policy().name, "float32")  # restored


def _pretrain(*args: str, env=None, cwd=None) -> subprocess.Popen:
    """`python -m bert_tf.pretrain ARGS...` as a user starts it, stdout and stderr as one."""
    return processes.program("bert_tf.pretrain", *args, env=env, cwd=cwd, stderr=subprocess.STDOUT)


def _resumable_run_args(work: Path, save_checkpoints_steps: int) -> list[str]:
    """A 60-step run of a tiny model on a small corpus in `work`, seeded: two runs of it agree."""
    return [
        f"--config={write_config(work / 'config.json', corpus_config())}",
        f"--corpus={write_corpus(work / 'corpus.txt')}",
        f"--vocab_file={write_vocab(work / 'vocab.txt', CORPUS_TOKENS)}",
        "--train_batch_size=8",
        "--max_seq_length=32",
        "--max_predictions_per_seq=5",
        "--num_train_steps=60",
        "--num_warmup_steps=5",
        f"--save_checkpoints_steps={save_checkpoints_steps}",
        "--steps_per_loop=5",
        "--seed=7",
    ]


def _assert_same_weights(test: tf.test.TestCase, expected_dir: Path, actual_dir: Path) -> None:
    """The latest checkpoints of two runs hold the same weights (atol 1e-5)."""
    expected, actual = checkpoint_weights(str(expected_dir)), checkpoint_weights(str(actual_dir))
    test.assertEqual(expected.keys(), actual.keys())
    for weight in expected:
        test.assertAllClose(
            actual[weight], expected[weight], atol=1e-5, rtol=0, msg=f"{actual_dir.name} {weight}"
        )


class CtrlCTest(tf.test.TestCase):
    def test_ctrl_c_is_reported_as_a_stop_and_the_process_is_gone_within_seconds(self):
        work = Path(tempfile.mkdtemp())
        args = _resumable_run_args(work, save_checkpoints_steps=1000)
        args = [arg for arg in args if not arg.startswith(("--num_train_steps", "--steps_per_loop"))]
        process = _pretrain(
            *args, "--num_train_steps=100000", "--steps_per_loop=2", f"--model_dir={work / 'run'}"
        )
        lines: list[tuple[float, str]] = []

        def read() -> None:
            for line in process.stdout:
                lines.append((time.monotonic(), line.rstrip()))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while not any(line.startswith("step ") for _, line in lines) and time.monotonic() < deadline:
            self.assertIsNone(process.poll(), "\n".join(line for _, line in lines)[-3000:])
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
        exited = time.monotonic()
        reader.join(timeout=10)
        output = "\n".join(line for _, line in lines)
        self.assertEqual(process.returncode, 130, output[-3000:])
        last_time, last_line = lines[-1]
        self.assertRegex(last_line, r"^bert_tf\.pretrain: stopped on SIGINT at step \d+; saved .*ckpt-\d+")
        self.assertNotIn("error", last_line)
        self.assertLess(exited - last_time, 5.0, "the process lived on after saying it stopped")


@pytest.mark.slow
class KillAndResumeTest(tf.test.TestCase):
    """kill -9 early and SIGTERM late, then rerun: the weights of an uninterrupted run, with
    the input position restored (not re-read) and the distinct exit status after SIGTERM."""

    def test_kill_9_early_and_sigterm_late_then_rerun_reach_the_uninterrupted_weights(self):
        work = Path(tempfile.mkdtemp())
        args = _resumable_run_args(work, save_checkpoints_steps=10)
        straight = _pretrain(*args, f"--model_dir={work / 'straight'}")
        crashed = _pretrain(*args, f"--model_dir={work / 'crashed'}")
        terminated = _pretrain(*args, f"--model_dir={work / 'terminated'}")

        def wait_for(path: Path, process: subprocess.Popen) -> None:
            deadline = time.time() + 300
            while not path.exists() and process.poll() is None and time.time() < deadline:
                time.sleep(0.05)

        # kill -9 as soon as the first checkpoint is written, mid-run.
        wait_for(work / "crashed" / "checkpoint", crashed)
        crashed.send_signal(signal.SIGKILL)
        crashed.wait()
        self.assertEqual(crashed.returncode, -signal.SIGKILL)
        killed_at = tf.train.latest_checkpoint(str(work / "crashed"))
        self.assertIsNotNone(killed_at)
        self.assertFalse(killed_at.endswith("ckpt-60"), "the run finished before it was killed")
        # SIGTERM late: once step 30 is saved.
        wait_for(work / "terminated" / "ckpt-30.index", terminated)
        terminated.send_signal(signal.SIGTERM)
        output, _ = terminated.communicate(timeout=300)
        self.assertEqual(terminated.returncode, 128 + signal.SIGTERM, output[-3000:])
        stopped = re.search(r"stopped on SIGTERM at step (\d+)", output)
        self.assertIsNotNone(stopped, output[-3000:])
        stopped_at = int(stopped.group(1))
        self.assertLess(stopped_at, 60)
        self.assertTrue(tf.train.latest_checkpoint(str(work / "terminated")).endswith(f"ckpt-{stopped_at}"))

        output, _ = straight.communicate(timeout=300)
        self.assertEqual(straight.returncode, 0, output[-3000:])
        for name, at in (("crashed", killed_at), ("terminated", f"ckpt-{stopped_at}")):
            resumed = _pretrain(*args, f"--model_dir={work / name}")
            output, _ = resumed.communicate(timeout=300)
            self.assertEqual(resumed.returncode, 0, output[-3000:])
            self.assertRegex(output, f"resumed from .*{re.escape(os.path.basename(at))} at step")
            self.assertIn("input position restored", output)
            _assert_same_weights(self, work / "straight", work / name)


@pytest.mark.slow
class MultiWorkerPreemptionTest(tf.test.TestCase):
    """SIGTERM to one of 2 workers on localhost (MultiWorkerMirroredStrategy, TensorFlow's
    PreemptionCheckpointHandler): both stop at the step they agree on with the distinct
    status; rerunning both resumes there and ends at the weights of an uninterrupted run."""

    def test_sigterm_to_one_worker_then_rerun_reaches_the_uninterrupted_weights(self):
        import socket

        work = Path(tempfile.mkdtemp())
        args = [*_resumable_run_args(work, save_checkpoints_steps=100), "--strategy=multi_worker"]

        def workers(name: str) -> list[subprocess.Popen]:
            ports = []
            for _ in range(2):
                with socket.socket() as sock:
                    sock.bind(("localhost", 0))
                    ports.append(sock.getsockname()[1])
            cluster = {"worker": [f"localhost:{port}" for port in ports]}
            return [
                _pretrain(
                    *args,
                    f"--model_dir={work / name}",
                    env={
                        "TF_CONFIG": json.dumps(
                            {"cluster": cluster, "task": {"type": "worker", "index": index}}
                        )
                    },
                )
                for index in range(2)
            ]

        def finish(processes) -> list[tuple[int, str]]:
            return [(process.wait(timeout=600), process.stdout.read()) for process in processes]

        for code, output in finish(workers("straight")):
            self.assertEqual(code, 0, output[-3000:])
        interrupted = workers("interrupted")
        for line in interrupted[0].stdout:  # SIGTERM once training is under way
            if re.match(r"step 20/60", line):
                break
        interrupted[0].send_signal(signal.SIGTERM)
        results = finish(interrupted)
        for code, output in results:
            self.assertEqual(code, 128 + signal.SIGTERM, output[-3000:])
        latest = tf.train.latest_checkpoint(str(work / "interrupted"))
        self.assertIsNotNone(latest)
        self.assertFalse(latest.endswith("ckpt-60"), "the run finished before it was stopped")
        resumed = finish(workers("interrupted"))
        for code, output in resumed:
            self.assertEqual(code, 0, output[-3000:])
        # The chief speaks for the cluster; the other worker prints nothing of its own.
        self.assertRegex(resumed[0][1], f"resumed from .*{re.escape(os.path.basename(latest))} at step")
        self.assertNotIn("INFO", resumed[0][1] + resumed[1][1])
        _assert_same_weights(self, work / "straight", work / "interrupted")


@pytest.mark.slow
class NoFlagDemoTest(tf.test.TestCase):
    def test_no_flags_runs_the_demo(self):
        cache, work = tempfile.mkdtemp(), tempfile.mkdtemp()
        start = time.time()
        process = _pretrain(env={"BERT_TF_CACHE": cache}, cwd=work)
        output, _ = process.communicate(timeout=900)  # a guard against a hang, not a speed test
        elapsed = time.time() - start
        self.assertEqual(process.returncode, 0, output[-3000:])
        progress = re.findall(r"masked_lm_accuracy ([\d.]+)  next_sentence_accuracy ([\d.]+)", output)
        self.assertGreater(len(progress), 3)
        mlm, nsp = map(float, progress[-1])
        print(f"no-flag demo: {elapsed:.0f} s, final masked_lm_accuracy {mlm}, next_sentence_accuracy {nsp}")
        self.assertGreater(mlm, 0.3, output[-3000:])
        self.assertGreater(nsp, 0.6, output[-3000:])
        self.assertGreater(mlm, float(progress[0][0]) + 0.2)
        self.assertRegex(output, r"fill the mask: .*\[MASK\]")
        self.assertRegex(output, r"answer: \S+ \(the model's guess number \d+ of \d+, probability 0\.\d\d\)")
        self.assertIn("saved the pretrained model for from_pretrained", output)
        export = re.search(r"from_pretrained: (\S+)", output).group(1)
        self.assertTrue(os.path.exists(os.path.join(export, "bert_model.ckpt.index")))
        self.assertTrue(np.isfinite(mlm))
        # The run is in ./runs/demo, named first and last; a rerun resumes it and trains no more.
        model_dir = os.path.join(os.path.realpath(work), "runs", "demo")
        lines = output.strip().splitlines()
        self.assertTrue(lines[0].startswith(f"model_dir: {model_dir} (the default"), lines[0])
        self.assertTrue(lines[-1].startswith(f"the run is in {model_dir}: rerunning"), lines[-1])
        self.assertEqual(export, os.path.join(model_dir, "export"))
        rerun = _pretrain(env={"BERT_TF_CACHE": cache}, cwd=work)
        output, _ = rerun.communicate(timeout=900)
        self.assertEqual(rerun.returncode, 0, output[-3000:])
        self.assertIn("resumed from", output)
        self.assertNotRegex(output, r"step \d+/\d+ .*masked_lm_accuracy")
