"""Test-session setup: temporary files and the bert_tf cache live in one fresh directory.

Everything a test writes through `tempfile` (and every subprocess it starts, through
TMPDIR) lands under that directory, which is removed when the session ends, so repeated
runs do not fill the disk and the user's ~/.cache is left alone.
"""

import atexit
import functools
import os
import shutil
import tempfile

import pytest

_SESSION_TMP = tempfile.mkdtemp(prefix="bert_tf_tests_")
os.environ["TMPDIR"] = _SESSION_TMP
tempfile.tempdir = _SESSION_TMP
# Registered before TensorFlow's own test-directory cleanup, so it runs after it.
atexit.register(shutil.rmtree, _SESSION_TMP, ignore_errors=True)

# Set before any test module imports bert_tf; subprocesses started by tests inherit it, so
# the Unicode tables are computed once per session and the user's ~/.cache is left alone.
os.environ.setdefault("BERT_TF_CACHE", tempfile.mkdtemp(prefix="bert_tf_test_cache_"))


def pytest_collection_modifyitems(config, items):
    """Drops `tf.test.TestCase.test_session`, which every test class inherits.

    It is a deprecated context manager, not a test; pytest collects it by its name and
    reports it as a skip in every class, which hides the real skips in the summary.
    """
    items[:] = [item for item in items if item.name != "test_session"]


@functools.cache
def _uses_the_shared_classifier(path: str) -> bool:
    """Whether the test module at `path` calls tests/harness/exports.py's
    `fine_tuned_classifier()`, which fine-tunes and exports once per process."""
    try:
        with open(path, encoding="utf-8") as file:
            return "fine_tuned_classifier()" in file.read()
    except OSError:
        return False


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook; without pytest-xdist, never called
def pytest_xdist_make_scheduler(config, log):
    """The default run's two worker processes (pyproject.toml: `-n 2`) get whole classes.

    pytest-xdist's `load` scheduling hands out single tests, so the tests of one class can
    land in both workers and its `setUpClass` (an export, a fine-tuning run) runs twice. Here
    a class's tests, or a module's plain test functions, are one unit of work, as with
    `--dist loadscope`, and the modules that use the one fine-tuned classifier of
    tests/harness/exports.py are one unit together. Test ids are unchanged. Other `--dist` modes are
    pytest-xdist's own.
    """
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = str(config.rootpath)

    class ClassScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            if _uses_the_shared_classifier(os.path.join(root, path)):
                return "fine_tuned_classifier"
            return super()._split_scope(nodeid)

    return ClassScheduling(config, log)
