"""Test-session setup: the bert_tf cache lives in a fresh directory, never in the user's home."""

import os
import sys
import tempfile

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
