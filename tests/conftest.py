"""Test-session setup: the bert_tf cache lives in a fresh directory, never in the user's home."""

import os
import tempfile

# Set before any test module imports bert_tf; subprocesses started by tests inherit it, so
# the Unicode tables are computed once per session and the user's ~/.cache is left alone.
os.environ.setdefault("BERT_TF_CACHE", tempfile.mkdtemp(prefix="bert_tf_test_cache_"))
