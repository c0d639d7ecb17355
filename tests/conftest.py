"""Test-session setup: temporary files and the bert_tf cache live in one fresh directory.

Everything a test writes through `tempfile` (and every subprocess it starts, through
TMPDIR) lands under that directory, which is removed when the session ends, so repeated
runs do not fill the disk and the user's ~/.cache is left alone.
"""

import atexit
import os
import shutil
import sys
import tempfile

_SESSION_TMP = tempfile.mkdtemp(prefix="bert_tf_tests_")
os.environ["TMPDIR"] = _SESSION_TMP
tempfile.tempdir = _SESSION_TMP
# Registered before TensorFlow's own test-directory cleanup, so it runs after it.
atexit.register(shutil.rmtree, _SESSION_TMP, ignore_errors=True)

# The shared layer and model checks (tests/harness.py) are imported as `harness`.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Set before any test module imports bert_tf; subprocesses started by tests inherit it, so
# the Unicode tables are computed once per session and the user's ~/.cache is left alone.
os.environ.setdefault("BERT_TF_CACHE", tempfile.mkdtemp(prefix="bert_tf_test_cache_"))


def pytest_collection_modifyitems(config, items):
    """Drops `tf.test.TestCase.test_session`, which every test class inherits.

    It is a deprecated context manager, not a test; pytest collects it by its name and
    reports it as a skip in every class, which hides the real skips in the summary.
    """
    items[:] = [item for item in items if item.name != "test_session"]
