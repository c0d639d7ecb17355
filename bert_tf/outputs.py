"""One policy for what the programs write: checked first, never half-written, never clobbered.

- `check_output` is called before anything is created: it refuses a path whose parent is
  a file, a folder where a file is expected (and the reverse), and a finished result
  unless `overwrite`; it says whether the run starts fresh, resumes an unfinished run of
  the same command, or replaces a finished result. It creates nothing.
- A file is written whole or not at all through `bert_tf.fileio.partial` (or `writing`).

Written files and folders get the permissions of the user's umask (as `open` and
`os.makedirs` give them), so that a server running as another user can read them.

Example:

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> check_output(os.path.join(folder, "new"), "--output_dir", overwrite=False, finished=("done.json",))
'fresh'
>>> _ = open(os.path.join(folder, "done.json"), "w").write("{}")
>>> check_output(folder, "--output_dir", overwrite=True, finished=("done.json",))
'overwrite'
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from bert_tf import fileio
from bert_tf.errors import UsageError


def _parent_file(path: str) -> str | None:
    """The first ancestor of `path` that exists and is not a folder, if any."""
    if "://" in path:
        return None  # an object store has no files above a key, only prefixes
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    return parent if parent and not os.path.isdir(parent) else None


def check_output(
    path: str,
    flag: str,
    *,
    overwrite: bool,
    finished: Iterable[str] = (),
    is_file: bool = False,
    filesystem: Any = None,
) -> str:
    """Checks an output path before anything is written; returns "fresh", "resume" or "overwrite".

    Args:
      path: the output folder (or file, with `is_file`).
      flag: the flag that named it, for messages ("--output_dir").
      overwrite: whether a finished result may be replaced.
      finished: names inside the folder whose presence means a finished result. A folder
        that has files but none of these holds an unfinished run of the same command,
        which resumes. For a file, existing is finished.
      filesystem: where to look: `bert_tf.fileio` by default, or a module with its
        `check_path`, `exists`, `isdir` (and for a folder `isfile`, `listdir`, `join`), such
        as `pipelines.beam.files`.
    """
    files = filesystem or fileio
    path = os.fspath(path)
    try:
        files.check_path(path)
    except fileio.FileSystemError as error:
        raise UsageError(f"{flag}={path}: {error}") from None
    blocker = _parent_file(path)
    if blocker:
        raise UsageError(
            f"{flag}={path} is under {blocker}, which is a file, not a folder; choose another path"
        )
    if is_file:
        if files.isdir(path):
            raise UsageError(f"{flag}={path} is a folder; pass a file path")
        if not files.exists(path):
            return "fresh"
        if not overwrite:
            raise UsageError(
                f"{flag}={path} already exists; pass --overwrite to replace it, or choose a new path"
            )
        return "overwrite"
    if files.isfile(path):
        raise UsageError(f"{flag}={path} is a file; pass a folder path")
    if not files.isdir(path) or not files.listdir(path):
        return "fresh"
    done = [name for name in finished if files.exists(files.join(path, name))]
    if not done:
        return "resume"
    if not overwrite:
        raise UsageError(
            f"{flag}={path} holds a finished result ({', '.join(done)}); pass --overwrite to replace it, "
            "or choose a new folder"
        )
    return "overwrite"


def umask_permissions(path: str) -> None:
    """Gives `path` the mode a plain `open`/`os.makedirs` would have (0o666/0o777 less the umask).

    For what is created by tools that choose a private mode: `tempfile.mkdtemp` (0o700)
    and safetensors' writer (0o600). A model served by another user must be readable.
    """
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~umask)
