"""Choosing the Keras backend on a program's command line.

Keras reads `KERAS_BACKEND` once, when it is first imported, so `--backend=jax` has to
be read from the command line (and the `--flagfile`s it names) before any module that
imports Keras: `bert_tf.cli.run` calls `select_backend` first. This module imports nothing
heavier than absl's flags (`dtype_policy` imports Keras when it is used).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator, Sequence

from bert_tf.errors import UsageError

BACKENDS = ("tensorflow", "jax")


def backend_from_argv(argv: Sequence[str]) -> dict[str, str]:
    """{"KERAS_BACKEND": NAME} when argv holds --backend=NAME (or --backend NAME), else {}.

    `--flagfile=PATH` arguments are read as absl reads them, and the last --backend wins,
    as when the flags are parsed. A flagfile that cannot be read is left to that parse to
    report.

    Example:

    >>> backend_from_argv(["prog", "--backend=jax", "--num_train_steps=10"])
    {'KERAS_BACKEND': 'jax'}
    >>> backend_from_argv(["prog"])
    {}
    """
    from absl import flags

    try:
        argv = flags.FlagValues().read_flags_from_files(list(argv))
    except flags.Error:
        pass
    found = {}
    for index, arg in enumerate(argv):
        if arg == "--":
            break
        if arg.startswith("--backend="):
            found = {"KERAS_BACKEND": arg.split("=", 1)[1]}
        elif arg == "--backend" and index + 1 < len(argv):
            found = {"KERAS_BACKEND": argv[index + 1]}
    return found


def select_backend(argv: Sequence[str]) -> None:
    """Sets `KERAS_BACKEND` from --backend in `argv`, before Keras is first imported.

    Raises `UsageError` when the backend chosen (here or by $KERAS_BACKEND) is JAX and JAX
    is not installed: Keras would otherwise fail on its first import, deep in a traceback.
    """
    os.environ.update(backend_from_argv(argv))
    if os.environ.get("KERAS_BACKEND") == "jax" and importlib.util.find_spec("jax") is None:
        raise UsageError('the jax backend needs JAX, which is not installed: pip install "bert_tf[jax]"')


@contextlib.contextmanager
def dtype_policy(name: str) -> Iterator[None]:
    """Keras' global dtype policy for the block (models built in it compute in `name`,
    e.g. "mixed_bfloat16"); the previous one is back after it, however the block ends."""
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
