"""Keeping TensorFlow's native start-up noise off stderr, in programs and in Python sessions.

TensorFlow's native libraries print lines at start-up that look like errors but are not:
the absl pre-init warning each of its two libraries prints, "Could not find cuda drivers"
and "failed call to cuInit: ... CUDA error" on a machine without a GPU, CPU-feature notes,
oneDNN's notes and fallbacks. They are written to file descriptor 2 directly, whatever
`TF_CPP_MIN_LOG_LEVEL` says, so the filter sits there (`NativeNoiseFilter`).

- The command-line programs keep the filter for their whole run (`bert_tf.cli.quiet_start`).
- In a Python session, `import bert_tf` arranges for TensorFlow's first import (by bert_tf,
  or by anything else after it) to run behind the filter, together with the device probe
  that prints the CUDA lines; the filter is gone again once TensorFlow has loaded, and
  TensorFlow's own log level (`TF_CPP_MIN_LOG_LEVEL=3`) keeps its later native lines back
  (`filter_tensorflow_import`). The user's own logging is never touched. A session that sets
  `TF_CPP_MIN_LOG_LEVEL` before importing bert_tf (`TF_CPP_MIN_LOG_LEVEL=0` shows
  everything) is left alone.

Apache Beam's worker processes (`--direct_running_mode=multi_processing`) inherit the
program's stderr, so their start-up lines pass through the same filter: Beam's notes that
it runs without Google Cloud's clients are filtered as noise too.

This module imports nothing heavier than the standard library.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.abc
import importlib.util
import os
import re
import sys
import threading

# Lines a user would take for errors, or that say nothing a user can act on. Native INFO
# and WARNING lines are start-up detail (TF_CPP_MIN_LOG_LEVEL=2 hides them later anyway);
# any other ERROR line is passed on.
NATIVE_NOISE = re.compile(
    rb"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
    # Native glog-style lines name a C++ source ("port.cc:153]"); absl's Python log lines
    # ("generate.py:117]") are the programs' own messages and are passed on.
    rb"|[IW]\d{4} [\d:.]+ +\d+ [\w./-]+\.(cc|h|cpp):\d+\]"
    rb"|E\d{4} .*(cuInit|cuda_platform|cuda_dnn|cuda_fft|cuda_blas|Unable to register|oneDNN supports)"
    rb"|To enable the following instructions:"
    # Beam's worker processes, at start-up: it runs without Google Cloud's clients (which
    # only Dataflow needs), and a worker set up its logging.
    rb"|WARNING:root:apitools not found, and bigquery client libraries are not available"
    rb"|INFO:__main__:Logging handler created\.$"
    rb")"
)


class NativeNoiseFilter:
    """Passes everything written to file descriptor 2 on, except the lines of `NATIVE_NOISE`.

    While it is on, fd 2 is a pipe that a thread reads and forwards to the real stderr, line
    by line. A line that cannot be noise (it starts with another letter) is forwarded as it
    comes, so prompts and partial lines are not held back. `close` puts the real stderr back
    and forwards what is left in the pipe (at exit at the latest).
    """

    _MARK = b"\x00bert_tf.quiet: drained"  # see drain; never forwarded

    def __init__(self) -> None:
        self.drained = threading.Event()
        sys.stderr.flush()
        self.terminal = os.isatty(2)  # what fd 2 was: after this, the filter's pipe
        self.target = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self.thread = threading.Thread(target=self._forward, args=(read,), name="stderr-filter", daemon=True)
        self.thread.start()
        self.closed = False
        atexit.register(self.close)

    def _write(self, data: bytes) -> None:
        while data:
            data = data[os.write(self.target, data) :]

    def _forward(self, read: int) -> None:
        pending, passing = b"", False  # passing: inside a line forwarded as it comes
        while chunk := os.read(read, 1 << 16):
            *lines, pending = (pending + chunk).split(b"\n")
            kept, drained = [], False
            for line in lines:
                if line.endswith(self._MARK):  # a partial line before it stays partial
                    rest, drained = line[: -len(self._MARK)], True
                    kept.append(rest)
                    passing = passing or bool(rest)
                    continue
                if passing or not NATIVE_NOISE.match(line):
                    kept.append(line + b"\n")
                passing = False
            if pending and (passing or pending[:1] not in (b"I", b"W", b"E", b"T")):
                kept.append(pending)
                pending, passing = b"", True
            if kept:
                self._write(b"".join(kept))
            if drained:
                self.drained.set()
        if pending and not NATIVE_NOISE.match(pending):
            self._write(pending)
        os.close(read)

    def drain(self, timeout: float = 2.0) -> None:
        """Waits until what was written to stderr so far is forwarded, so that what comes
        next on stdout shows after it (both usually reach the same terminal)."""
        sys.stderr.flush()
        self.drained.clear()
        os.write(2, self._MARK + b"\n")
        self.drained.wait(timeout)

    def close(self) -> None:
        """Puts the real stderr back on fd 2, after forwarding what is left in the pipe."""
        if self.closed:
            return
        self.closed = True
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(self.target, 2)  # the pipe's last writer in this process: the thread sees its end
        # Child processes still holding the pipe keep it open: wait only briefly.
        self.thread.join(timeout=2)


class _FilteredTensorFlowImport(importlib.abc.MetaPathFinder):
    """Runs the first `import tensorflow` behind a `NativeNoiseFilter`, then steps aside."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        _remove_hook()
        if active_filter is not None or os.environ.get("TF_CPP_MIN_LOG_LEVEL") is not None:
            return None  # a program's filter is on, or the user chose TensorFlow's logging
        # Later native lines (oneDNN's notes when an op first runs, "E0000 ... oneDNN supports
        # DT_INT64 only ...") are held back by TensorFlow itself: errors a session must see
        # reach it as Python exceptions.
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        noise = NativeNoiseFilter()
        try:
            module = importlib.import_module("tensorflow")
            # The CUDA lines come when devices are first listed, not on import.
            module.config.list_physical_devices()
        finally:
            noise.close()
        return importlib.util.spec_from_loader(name, _Loaded(module), origin=module.__spec__.origin)


class _Loaded(importlib.abc.Loader):
    """The loader of a module already in `sys.modules`: the import machinery takes it as is."""

    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


_hook: _FilteredTensorFlowImport | None = None
active_filter: NativeNoiseFilter | None = None  # a program's filter, for its whole run


def filter_tensorflow_import() -> None:
    """Arranges for TensorFlow's first import in this process to run behind the filter (see
    the module docstring); does nothing once TensorFlow is loaded, or when the user set
    `TF_CPP_MIN_LOG_LEVEL`."""
    global _hook
    if _hook is not None or "tensorflow" in sys.modules or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    _hook = _FilteredTensorFlowImport()
    sys.meta_path.insert(0, _hook)


def _remove_hook() -> None:
    global _hook
    if _hook is not None and _hook in sys.meta_path:
        sys.meta_path.remove(_hook)
    _hook = None


def filter_for_the_whole_run() -> NativeNoiseFilter:
    """The filter a program keeps on until it exits (`bert_tf.cli.quiet_start`)."""
    global active_filter
    _remove_hook()
    if active_filter is None:
        active_filter = NativeNoiseFilter()
    return active_filter
