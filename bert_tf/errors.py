"""The errors a user can fix, shared by the library and every command (light: no TensorFlow).

Every error this package raises for bad input derives from `BertTfError`; its message
says what was wrong, with the value, and what to do. The command-line layer
(`bert_tf.cli`) prints that message as one line and exits with the error's `exit_code`:
2 for a bad command line (`UsageError`: a flag value that can never work), 1 for
everything else (a missing or damaged file, data that cannot be used, a run that failed).

Example:

>>> from bert_tf.errors import BertTfError, UsageError
>>> error = UsageError("--learning_rate must be > 0, got -1.0")
>>> isinstance(error, BertTfError), error.exit_code
(True, 2)
"""

from __future__ import annotations


class BertTfError(Exception):
    """A problem the user can fix; the message says what, with the value, and how."""

    exit_code = 1


class RunStopped(BertTfError):
    """A run that stopped because it was asked to (a signal), its state saved: not a failure.

    The command-line programs print "PROGRAM: MESSAGE" (no "error:"; the message starts
    "stopped on ...") and exit with `exit_code`, which a subclass sets (128 + the signal's
    number)."""


class UsageError(BertTfError, ValueError):
    """A flag or setting whose value cannot work, whatever the files say."""

    exit_code = 2


class InputFileError(BertTfError, ValueError):
    """An input pattern that matches no file, or names something that cannot be read."""


class DamagedFileError(BertTfError, ValueError):
    """A file that exists but cannot be read: truncated, corrupt, or not what its name says."""


def damaged(path: str, detail: str, fix: str = "") -> DamagedFileError:
    """The one wording of a damaged-file error: "PATH is truncated or corrupt (DETAIL); FIX"."""
    message = f"{path} is truncated or corrupt ({detail})"
    return DamagedFileError(f"{message}; {fix}" if fix else message)
