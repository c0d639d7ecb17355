"""TensorFlow's start-up noise in a Python session: kept out, the user's own lines kept, and
everything back with TF_CPP_MIN_LOG_LEVEL set."""

import os
import subprocess
import sys
from pathlib import Path

import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "hf_tiny"

SESSION = f"""
import logging, sys
import bert_tf
logging.getLogger("mine").warning("my warning before")
model = bert_tf.BertClassifier.from_pretrained({str(FIXTURE)!r}, label_list=["a", "b"])
print(model.predict(["a short text", "another"]).shape)
logging.getLogger("mine").warning("my warning after")
print("my line", file=sys.stderr)
"""


def python(script: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**environment, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


class PythonSessionTest(tf.test.TestCase):
    def test_a_session_sees_its_own_lines_and_none_of_tensorflows_start_up(self):
        result = python(SESSION)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "(2, 2)\n")
        self.assertEqual(result.stderr, "my warning before\nmy warning after\nmy line\n")

    def test_tf_cpp_min_log_level_set_by_the_user_shows_tensorflows_lines(self):
        # The lines the session above is spared do come on this machine: the test above can fail.
        result = python(
            "import bert_tf\nimport tensorflow as tf\ntf.config.list_physical_devices()",
            TF_CPP_MIN_LOG_LEVEL="0",
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("absl::InitializeLog", result.stderr)


if __name__ == "__main__":
    tf.test.main()
