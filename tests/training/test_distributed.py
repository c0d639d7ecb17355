"""The one loop under MirroredStrategy (2 logical CPUs), MultiWorkerMirroredStrategy (2
worker processes) and gradient accumulation reaches what one device reaches on the same
global batches.

Each run is a subprocess of tests/harness/distributed_run.py (logical devices must be configured before
TensorFlow starts; a worker is a process). They run concurrently to fit the time budget.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import distributed_run
from tests.harness.processes import REPO, free_port

SCRIPT = distributed_run.__file__


def _start(work: Path, name: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    environment.pop("TF_CONFIG", None)
    environment.update(env or {})
    log = open(work / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--out", str(work / f"{name}.npz"), *args],
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )


class DistributedTrainingTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = Path(tempfile.mkdtemp(prefix="bert_tf_distributed_"))
        ports = [free_port(), free_port()]
        cluster = {"worker": [f"localhost:{port}" for port in ports]}
        runs = {
            "mirrored": _start(
                cls.work, "mirrored", "--strategy=mirrored", "--cpu_devices=2", f"--model_dir={cls.work}/b"
            ),
        }
        for index in range(2):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            runs[f"worker{index}"] = _start(
                cls.work,
                f"worker{index}",
                "--strategy=multi_worker",
                f"--model_dir={cls.work}/d",
                env={"TF_CONFIG": tf_config},
            )
        # One device and gradient accumulation run here while the subprocesses start up.
        default = tf.distribute.get_strategy()
        cls.results = {
            "one_device": distributed_run.train(default, str(cls.work / "a")),
            "accumulated": distributed_run.train(default, str(cls.work / "c"), gradient_accumulation_steps=4),
        }
        for name, process in runs.items():
            try:
                process.wait(timeout=240)
            except subprocess.TimeoutExpired:
                process.kill()
            log = (cls.work / f"{name}.log").read_text()
            if process.returncode != 0:
                raise AssertionError(f"{name} run failed ({process.returncode}):\n{log[-3000:]}")
            cls.results[name] = dict(np.load(cls.work / f"{name}.npz"))

    def assertSameTraining(self, name, atol):
        reference, other = self.results["one_device"], self.results[name]
        self.assertEqual(len(reference["losses"]), 3)
        self.assertAllClose(other["losses"], reference["losses"], atol=atol, rtol=0)
        for key in sorted(k for k in reference if k.startswith("w")):
            self.assertAllClose(other[key], reference[key], atol=atol, rtol=0, msg=f"{name} {key}")

    def test_mirrored_matches_one_device(self):
        self.assertEqual(int(self.results["mirrored"]["replicas"]), 2)
        self.assertSameTraining("mirrored", atol=1e-5)

    def test_gradient_accumulation_matches_one_big_batch(self):
        self.assertSameTraining("accumulated", atol=1e-5)

    def test_multi_worker_agree_with_each_other_and_one_device(self):
        self.assertEqual(int(self.results["worker0"]["replicas"]), 2)
        worker0, worker1 = self.results["worker0"], self.results["worker1"]
        for key in worker0:
            self.assertAllClose(worker0[key], worker1[key], atol=1e-7, rtol=0, msg=key)
        self.assertSameTraining("worker0", atol=1e-5)
        # Only the chief wrote checkpoints; the other worker's scratch copy is gone.
        self.assertEqual(sorted(p.name for p in (self.work / "d").iterdir() if p.name.startswith(".")), [])


class MultiWorkerCommandTest(tf.test.TestCase):
    # docs/pretraining.md: `--strategy=multi_worker` with TF_CONFIG set on each machine. The two
    # workers here are the documented command, two processes of `python -m bert_tf.pretrain`.
    @pytest.mark.slow  # two trainer processes: about a minute on 2 cores
    def test_the_documented_command_trains_as_two_worker_processes(self):
        work = Path(tempfile.mkdtemp(prefix="bert_tf_multi_worker_"))
        corpus = work / "corpus.txt"
        corpus.write_text(
            "\n\n".join(f"document {i} has words .\nand a second line {i} ." for i in range(40))
        )
        cluster = {"worker": [f"localhost:{free_port()}", f"localhost:{free_port()}"]}
        environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
        processes = []
        for index in range(2):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            command = [
                sys.executable,
                "-m",
                "bert_tf.pretrain",
                "--strategy=multi_worker",
                "--config=bert_tiny",
            ]
            command += [
                f"--corpus={corpus}",
                f"--vocab_file={REPO / 'tests/fixtures/bert_uncased_vocab.txt'}",
            ]
            command += [f"--model_dir={work / 'run'}", "--num_train_steps=6", "--num_warmup_steps=1"]
            command += ["--train_batch_size=8", "--max_seq_length=32", "--max_predictions_per_seq=5"]
            processes.append(
                subprocess.Popen(
                    command,
                    cwd=REPO,
                    env={**environment, "TF_CONFIG": tf_config, "PYTHONPATH": str(REPO)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outputs = [process.communicate(timeout=300) for process in processes]
        for index, (process, (_stdout, stderr)) in enumerate(zip(processes, outputs, strict=True)):
            self.assertEqual(process.returncode, 0, f"worker {index}: {stderr[-2000:]}")
            self.assertNotIn("cuInit", stderr)
        self.assertIn("step 6/6", outputs[0][1])  # the chief reports and writes the run
        self.assertIn(f"the run is in {work / 'run'}", outputs[0][0])
        self.assertIn("this worker's part of the run is done", outputs[1][0])
        self.assertTrue((work / "run" / "export" / "bert_config.json").exists())


if __name__ == "__main__":
    tf.test.main()
