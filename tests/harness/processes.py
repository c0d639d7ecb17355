"""Fresh processes, as a user starts them: the environment, free ports, the tf.data service,
the programs, and a loader of exported SavedModels that imports nothing of bert_tf."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

REPO = Path(__file__).resolve().parents[2]
LOADER = str(Path(__file__).with_name("load_exported.py"))


def environment(**changes: str) -> dict:
    """The environment of a program the tests start: the user's, with this checkout importable
    and TensorFlow's logging as it comes (no TF_CPP_MIN_LOG_LEVEL: the programs quiet it)."""
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    return {**env, "PYTHONPATH": str(REPO), **changes}


def free_port() -> int:
    """A port nothing listens on (as far as this moment goes)."""
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def program(
    module: str, *args: str, env: dict | None = None, cwd=None, stderr=subprocess.PIPE
) -> subprocess.Popen:
    """`python -m MODULE ARGS...` started as a user starts it (`environment()` with `env`'s
    changes), from `cwd` (the checkout by default), its output piped (`stderr`: or
    `subprocess.STDOUT` to read both as one)."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=cwd or REPO,
        env=environment(**(env or {})),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def run_in_fresh_process(calls: list, work_dir: str) -> dict:
    """Runs load_exported.py on `calls` in a new interpreter; returns its outputs.

    The child gets no PYTHONPATH and runs from `work_dir`, so bert_tf is importable only
    if installed; load_exported.py reports whether anything imported it.
    """
    request = os.path.join(work_dir, "request.json")
    output = os.path.join(work_dir, "outputs.npz")
    with open(request, "w", encoding="utf-8") as file:
        json.dump(calls, file)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [sys.executable, LOADER, request, output],
        cwd=work_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise AssertionError(f"fresh-process loader failed:\n{result.stderr[-4000:]}")
    with np.load(output) as arrays:
        return {key: arrays[key] for key in arrays.files}


# --- the tf.data service ------------------------------------------------------------------------


def local_service(workers: int = 2, worker_timeout_ms: int | None = None):
    """An in-process dispatcher and `workers` workers."""
    dispatcher = tf.data.experimental.service.DispatchServer(
        tf.data.experimental.service.DispatcherConfig(worker_timeout_ms=worker_timeout_ms)
    )
    address = dispatcher.target.split("://")[1]
    servers = [
        tf.data.experimental.service.WorkerServer(
            tf.data.experimental.service.WorkerConfig(dispatcher_address=address, heartbeat_interval_ms=200)
        )
        for _ in range(workers)
    ]
    return dispatcher, servers


def worker_process(dispatcher) -> subprocess.Popen:
    """A worker of `dispatcher` started as a deployment starts one: `python -m pipelines.data_service`."""
    address = dispatcher.target.split("://")[1]
    command = [sys.executable, "-m", "pipelines.data_service", "--worker", f"--dispatcher={address}"]
    command += ["--worker_port=0", "--worker_host=localhost"]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finetune_command(paths, output_dir, *flags):
    return [
        sys.executable,
        "-m",
        "bert_tf.finetune",
        "--task=classification",
        f"--output_dir={output_dir}",
        f"--train_file={paths['train']}",
        f"--eval_file={paths['dev']}",
        f"--vocab_file={paths['vocab']}",
        f"--bert_config_file={paths['config']}",
        "--max_seq_length=8",
        "--train_batch_size=4",
        "--num_train_epochs=40",
        "--eval_every_steps=0",
        "--save_checkpoints_steps=5",
        *flags,
    ]
