"""Choosing the Keras backend on a program's command line.

Keras reads `KERAS_BACKEND` once, when it is first imported, so `--backend=jax` has to
be read from `sys.argv` before any module that imports Keras; this module imports nothing.
"""

from __future__ import annotations

BACKENDS = ("tensorflow", "jax")


def backend_from_argv(argv: list[str]) -> dict[str, str]:
    """{"KERAS_BACKEND": NAME} when argv holds --backend=NAME (or --backend NAME), else {}.

    Example:

    >>> backend_from_argv(["prog", "--backend=jax", "--num_train_steps=10"])
    {'KERAS_BACKEND': 'jax'}
    >>> backend_from_argv(["prog"])
    {}
    """
    for index, arg in enumerate(argv):
        if arg.startswith("--backend="):
            return {"KERAS_BACKEND": arg.split("=", 1)[1]}
        if arg == "--backend" and index + 1 < len(argv):
            return {"KERAS_BACKEND": argv[index + 1]}
    return {}
