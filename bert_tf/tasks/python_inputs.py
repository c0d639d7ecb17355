"""Raw Python inputs of the task models' `fit`, `predict` and `evaluate`: lists (or arrays) of
examples, normalised to plain Python values, with the checks every family shares.

>>> rows(np.array([b"good", b"bad"]), "x")
['good', 'bad']
>>> rows("good", "x")
Traceback (most recent call last):
...
bert_tf.errors.UsageError: x takes a list of examples, got str: 'good'
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from bert_tf.errors import UsageError


def decode(value):
    """bytes -> str, NumPy scalars and arrays -> Python values, recursively."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray) and value.dtype.kind in "OS":
        return [decode(v) for v in value.tolist()]
    if isinstance(value, (tuple, list)):
        return type(value)(decode(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def rows(x, what: str) -> list:
    """The examples of `x` (a list, tuple or array) as Python values; `what` names it in errors."""
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, str) or not isinstance(x, Iterable):
        raise UsageError(f"{what} takes a list of examples, got {type(x).__name__}: {str(x)[:60]!r}")
    return [decode(value) for value in x]


def labels_for(y, count: int) -> list:
    """One label per example of `y` (a list, or None: unlabelled)."""
    if y is None:
        return [None] * count
    values = rows(y, "y")
    if len(values) != count:
        raise UsageError(f"x has {count} examples but y has {len(values)} labels; give one label per example")
    return values


def holds_pairs(x) -> bool:
    """Whether raw `x` holds pairs: a tuple of two lists, or rows of two texts."""
    if isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], str):
        return True
    rows = x.tolist() if isinstance(x, np.ndarray) else x
    return bool(len(rows)) and isinstance(rows[0], (tuple, list))
