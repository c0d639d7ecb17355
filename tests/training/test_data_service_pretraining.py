"""Pretraining through tf.data service: it learns as the in-process pipeline does, keeps no
input position of its own (a resume reads on in the service's job), and an unreachable
dispatcher stops the run before anything is written."""

import contextlib
import io
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.training import pretraining
from bert_tf.training.settings import PretrainingConfig
from pipelines import data_service
from tests.harness import processes
from tests.harness.data import CORPUS_TOKENS, corpus_config, write_config, write_corpus, write_vocab
from tests.harness.processes import REPO, free_port, local_service


def settings(work: Path, **overrides) -> PretrainingConfig:
    fields = dict(
        config=write_config(work / "config.json", corpus_config(dropout=0.0)),
        corpus=write_corpus(work / "corpus.txt", documents=12),
        vocab_file=write_vocab(work / "vocab.txt", CORPUS_TOKENS),
        train_batch_size=16,
        max_seq_length=32,
        max_predictions_per_seq=5,
        num_train_steps=160,
        num_warmup_steps=10,
        learning_rate=3e-3,
        weight_decay=0.0,
        steps_per_loop=40,
        save_checkpoints_steps=80,
        seed=1,
    )
    return PretrainingConfig(**{**fields, **overrides})


class ServedPretrainingTest(tf.test.TestCase):
    @pytest.mark.slow  # two runs of 160 steps and a resume: about 2 minutes on 2 cores
    def test_training_through_the_service_learns_as_without_it_and_resumes_in_its_job(self):
        work = Path(tempfile.mkdtemp())
        dispatcher, _workers = local_service()
        local = pretraining.run_pretraining(settings(work, model_dir=str(work / "local"))).train.history
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            served = pretraining.run_pretraining(
                settings(work, model_dir=str(work / "served"), data_service_address=dispatcher.target)
            ).train.history
        self.assertIn("the input position lives in the service", output.getvalue())
        # The same learning on other draws of the same corpus: the last loop's masked-LM loss.
        first, last_local, last_served = (
            local[0]["masked_lm_loss"],
            local[-1]["masked_lm_loss"],
            served[-1]["masked_lm_loss"],
        )
        self.assertLess(last_local, 0.75 * first)
        self.assertLess(last_served, 0.75 * first)
        self.assertAllClose(last_served, last_local, rtol=0.3)
        self.assertFalse((work / "served" / "input_state").exists())
        self.assertTrue((work / "local" / "input_state").exists())

        # A resume reads on in the job: from the last checkpoint (160), without skipping.
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            resumed = pretraining.run_pretraining(
                settings(
                    work,
                    model_dir=str(work / "served"),
                    data_service_address=dispatcher.target,
                    num_train_steps=200,
                )
            )
        self.assertEqual(resumed.train.step, 200)
        self.assertEqual([entry["step"] for entry in resumed.train.history], [200])
        self.assertNotIn("skipping", output.getvalue())

    def test_an_unreachable_dispatcher_stops_the_run_before_it_writes(self):
        work = Path(tempfile.mkdtemp())
        port = free_port()
        with self.assertRaisesRegex(
            data_service.DataServiceError,
            f"no tf.data service dispatcher answers at localhost:{port} .*"
            f"start one there with python -m pipelines.data_service --dispatcher_port={port}",
        ):
            pretraining.run_pretraining(
                settings(work, model_dir=str(work / "model"), data_service_address=f"grpc://localhost:{port}")
            )
        self.assertFalse((work / "model").exists())

    # A fresh interpreter (~10 s); by default the same error and its fix are checked in-process
    # above, and a program's one-line refusal in tests/test_cli_bad_input.py.
    @pytest.mark.slow
    def test_the_command_names_an_unreachable_dispatcher_in_one_line(self):
        work = Path(tempfile.mkdtemp())
        run = settings(work)
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "bert_tf.pretrain",
            f"--data_service_address=grpc://localhost:{port}",
        ]
        command += [f"--model_dir={work / 'model'}", f"--config={run.config}", f"--corpus={run.corpus}"]
        command += [f"--vocab_file={run.vocab_file}"]
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(result.stdout, "")
        last = result.stderr.strip().splitlines()[-1]
        self.assertIn(f"no tf.data service dispatcher answers at localhost:{port}", last)
        self.assertIn(f"python -m pipelines.data_service --dispatcher_port={port}", last)
        self.assertNotIn("Traceback", result.stderr)
        self.assertFalse((work / "model").exists())

    def test_the_documented_commands_train_as_three_processes(self):
        # docs/pretraining-data-at-scale.md: a dispatcher, a worker and a trainer, each started
        # as a user starts it. The dispatcher builds the job's graph, which holds
        # tensorflow-text's ops: without them registered there, the trainer fails at its first
        # batch ("Op type not registered 'NormalizeUTF8'").
        work = Path(tempfile.mkdtemp())
        run = settings(work)
        dispatcher_port, worker_port = free_port(), free_port()
        env = processes.environment()
        started = []

        def start(*args: str) -> subprocess.Popen:
            process = subprocess.Popen(
                [sys.executable, "-m", *args],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            started.append(process)
            return process

        try:
            dispatcher = start("pipelines.data_service", f"--dispatcher_port={dispatcher_port}")
            self.assertIn(b"tf.data service dispatcher at", dispatcher.stdout.readline())
            worker = start(
                "pipelines.data_service",
                "--worker",
                f"--dispatcher=localhost:{dispatcher_port}",
                f"--worker_port={worker_port}",
                "--worker_host=localhost",
            )
            self.assertIn(b"tf.data service worker on port", worker.stdout.readline())
            trainer = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bert_tf.pretrain",
                    f"--data_service_address=grpc://localhost:{dispatcher_port}",
                ]
                + [f"--model_dir={work / 'model'}", f"--config={run.config}", f"--corpus={run.corpus}"]
                + [f"--vocab_file={run.vocab_file}", "--num_train_steps=8", "--num_warmup_steps=1"]
                + ["--train_batch_size=8", "--max_seq_length=32", "--max_predictions_per_seq=5"],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            for process in started:
                process.kill()
                process.wait()
        self.assertEqual(trainer.returncode, 0, trainer.stderr[-2000:])
        self.assertIn("step 8/8", trainer.stderr)
        self.assertTrue((work / "model" / "export" / "bert_config.json").exists())

    def test_settings_the_service_cannot_run_are_refused(self):
        work = Path(tempfile.mkdtemp())
        with self.assertRaisesRegex(UsageError, "needs --eval_files"):
            settings(work, data_service_address="grpc://localhost:5050", eval_every_steps=10)
        with self.assertRaisesRegex(UsageError, "write grpc://HOST:PORT"):
            settings(work, data_service_address="localhost")
