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

import re
import sys

# How TensorFlow carries a Python exception raised in code it ran (a tf.data reader's
# numpy_function): the traceback as text, ending with "module.Class: message".
_RAISED_IN_TENSORFLOW = re.compile(r"^(bert_tf(?:\.\w+)+)\.(\w+): (.+)$", re.M)


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


def raised_inside_tensorflow(error: BaseException) -> BertTfError | None:
    """The bert_tf error that Python code run by TensorFlow raised (a data reader refusing a
    row, inside a tf.data pipeline), recovered from the TensorFlow error that carries it as
    text with its traceback; None when `error` carries none.

    Example:

    >>> class Carrier(Exception):  # as tf.errors.InvalidArgumentError, with its message
    ...     message = "{{node}} ...\\nbert_tf.errors.UsageError: --x must be > 0\\n\\n [[PyFunc]]"
    >>> error = raised_inside_tensorflow(Carrier())
    >>> type(error).__name__, str(error), error.exit_code
    ('UsageError', '--x must be > 0', 2)
    """
    found = _RAISED_IN_TENSORFLOW.findall(str(getattr(error, "message", "")))
    if not found:
        return None
    module, name, message = found[-1]
    kind = getattr(sys.modules.get(module), name, None)
    if not (isinstance(kind, type) and issubclass(kind, BertTfError)):
        return None
    return kind(message)
