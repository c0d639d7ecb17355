"""Running a script on the JAX backend from a TensorFlow test process.

Keras fixes its backend when it is first imported, so the JAX half of a backend test runs
in a new interpreter; the script prints one line `REPORT{json}` that the test reads.
"""

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def jax_environment(devices: int = 1) -> dict:
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if devices > 1:  # JAX on the CPU shows this many devices (data parallelism without GPUs)
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices} " + env.get("XLA_FLAGS", "")
    return env


def run_on_jax(script: str, *args: str, devices: int = 1, timeout: int = 600) -> dict:
    """Runs `script` (Python source) under KERAS_BACKEND=jax; returns its REPORT dict."""
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=jax_environment(devices),
        cwd=REPO,
        timeout=timeout,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("REPORT")]
    if not lines:
        raise AssertionError(f"JAX subprocess failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return json.loads(lines[-1][len("REPORT") :])
