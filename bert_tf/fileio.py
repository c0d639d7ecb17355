"""Files on any filesystem TensorFlow knows: local paths, `gs://`, `ram://`, and what plugins add.

Every user path in bert_tf (model_dir, vocab, data, checkpoints, exports) goes through
these helpers, which are thin wrappers over `tf.io.gfile`, so a Cloud TPU run can keep
everything in a bucket. They add three things gfile lacks:

- a clear error for a scheme TensorFlow has no filesystem for (`FileSystemError`, naming
  the scheme and what is supported), instead of `UnimplementedError` deep in a call;
- writes that a reader never sees half-done, all through `partial`: a hidden temporary
  sibling renamed over the target on filesystems where a rename is atomic (local disks,
  `ram://`), removed if the write fails; on object stores (`gs://`, `s3://`) a rename is a
  copy, so the object is written in place, which those stores make all-or-nothing per
  object (a reader sees the old object or the new one). `writing`, `write_bytes` and
  `write_text` are built on it. A *directory* has no atomic rename there, nor on `ram://`
  (which renames the folder and leaves its files behind): `publish_folder` and
  `bert_tf.serving.saving` write the file a reader looks for last there instead;
- `expand_files`: the files of a flag's comma-separated globs, or an error naming the flag;
- `rmtree` that also works where gfile's recursive delete does not (`ram://`).

Example:

>>> from bert_tf import fileio
>>> fileio.write_text("ram://fileio_doc/a.txt", "hello\\n")
'ram://fileio_doc/a.txt'
>>> fileio.read_text("ram://fileio_doc/a.txt"), fileio.exists("ram://fileio_doc/a.txt")
('hello\\n', True)
>>> fileio.rmtree("ram://fileio_doc")
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from bert_tf import text_encoding
from bert_tf.errors import BertTfError, InputFileError


class _TensorFlow:
    """TensorFlow, imported when a function here first uses it: the path helpers (`scheme`,
    `abspath`, ...) and `expand_files` over another filesystem load none, so a process
    that only launches workers (`pipelines.beam`) never pays for it."""

    def __getattr__(self, name: str):
        import tensorflow

        return getattr(tensorflow, name)


tf = _TensorFlow()

# Filesystems TensorFlow itself ships; others come from plugins (tensorflow-io).
BUILTIN_SCHEMES = ("gs", "ram")
# Stores where a rename is a copy and a delete: no atomic rename of a file or a directory.
OBJECT_STORE_SCHEMES = ("gs", "s3", "az", "oss", "hdfs+s3")


class FileSystemError(BertTfError, OSError):
    """A path on a filesystem TensorFlow cannot reach, or that cannot be written."""


def scheme(path: str | os.PathLike) -> str:
    """`"gs"` for `gs://bucket/x`, `""` for a local path."""
    text = os.fspath(path)
    head, separator, _ = text.partition("://")
    return head if separator and head.replace("+", "").replace("-", "").isalnum() else ""


def is_local(path: str | os.PathLike) -> bool:
    return scheme(path) in ("", "file")


def atomic_rename_supported(path: str | os.PathLike) -> bool:
    """Whether renaming a file on this filesystem replaces its target in one step."""
    return scheme(path) not in OBJECT_STORE_SCHEMES


def folder_rename_supported(path: str | os.PathLike) -> bool:
    """Whether a folder can be renamed with everything in it: on local disks only (object
    stores copy; TensorFlow's `ram://` renames the folder's entry and leaves its files)."""
    return is_local(path) and "://" not in os.fspath(path)


def _unknown_scheme(path: str) -> FileSystemError:
    return FileSystemError(
        f"TensorFlow has no filesystem for the scheme '{scheme(path)}://' (in {path}); it supports "
        f"local paths, {', '.join(s + '://' for s in BUILTIN_SCHEMES)}, and s3://, hdfs://, az:// once "
        "`pip install tensorflow-io` is installed and imported; check the path's spelling"
    )


def _gfile(call, path: str, *args, **kwargs):
    try:
        return call(path, *args, **kwargs)
    except tf.errors.UnimplementedError as error:
        if "File system scheme" in str(error):
            raise _unknown_scheme(path) from None
        raise


def check_path(path: str | os.PathLike) -> str:
    """Returns `path` as a string; raises FileSystemError if its scheme is unknown to TensorFlow."""
    text = os.fspath(path)
    _gfile(tf.io.gfile.exists, text)
    return text


def join(path: str | os.PathLike, *parts: str) -> str:
    return os.path.join(os.fspath(path), *parts)


def dirname(path: str | os.PathLike) -> str:
    return os.path.dirname(os.fspath(path).rstrip("/"))


def basename(path: str | os.PathLike) -> str:
    return os.path.basename(os.fspath(path).rstrip("/"))


def abspath(path: str | os.PathLike) -> str:
    """The absolute path of a local path; a URL is already absolute."""
    text = os.fspath(path)
    return os.path.abspath(text) if is_local(text) and "://" not in text else text


def exists(path: str | os.PathLike) -> bool:
    return _gfile(tf.io.gfile.exists, os.fspath(path))


def isdir(path: str | os.PathLike) -> bool:
    return _gfile(tf.io.gfile.isdir, os.fspath(path))


def isfile(path: str | os.PathLike) -> bool:
    text = os.fspath(path)
    if not exists(text):
        return False
    try:
        return not tf.io.gfile.stat(text).is_directory
    except tf.errors.OpError:
        return False


def size(path: str | os.PathLike) -> int:
    return _gfile(tf.io.gfile.stat, os.fspath(path)).length


def makedirs(path: str | os.PathLike) -> str:
    """Creates `path` and its parents; raises FileSystemError naming the path if it cannot."""
    text = os.fspath(path)
    try:
        _gfile(tf.io.gfile.makedirs, text)
    except tf.errors.OpError as error:
        raise FileSystemError(f"cannot create the directory {text}: {error.message}") from None
    return text


def listdir(path: str | os.PathLike) -> list[str]:
    return sorted(_gfile(tf.io.gfile.listdir, os.fspath(path)))


def glob(pattern: str | os.PathLike) -> list[str]:
    return sorted(_gfile(tf.io.gfile.glob, os.fspath(pattern)))


def expand_files(
    patterns: str | os.PathLike | Sequence[str | os.PathLike], flag: str, *, filesystem: Any = None
) -> list[str]:
    """The files that comma-separated globs (or a list of them) match, local or `gs://`.

    Each pattern's matches are sorted and the patterns keep their order, so the same
    patterns always give the same files in the same order; a file matched twice is listed
    once. A pattern that matches nothing or names a directory, an unknown filesystem and no
    pattern at all are `InputFileError`s naming `--flag`. `filesystem`: where to look, a
    module or object with this module's `glob` and `isdir` (`pipelines.beam.files`); this module by default.
    """
    glob_files, is_dir = (glob, isdir) if filesystem is None else (filesystem.glob, filesystem.isdir)
    if isinstance(patterns, (str, os.PathLike)):
        patterns = os.fspath(patterns).split(",")
    files: list[str] = []
    for pattern in (os.fspath(p).strip() for p in patterns):
        if not pattern:
            continue
        try:
            matches = glob_files(pattern)
        except FileSystemError as error:
            raise InputFileError(f"--{flag}={pattern}: {error}") from None
        if not matches:
            raise InputFileError(
                f"--{flag}={pattern} matches no file; check the path (globs such as data/*.txt work)"
            )
        for match in matches:
            if is_dir(match):
                raise InputFileError(
                    f"--{flag}={pattern} names the directory {match}; pass the files in it ({match}/*)"
                )
            if match not in files:
                files.append(match)
    if not files:
        raise InputFileError(f"--{flag} names no file; pass a path or a glob such as data/*.txt")
    return files


def read_bytes(path: str | os.PathLike) -> bytes:
    with _gfile(tf.io.gfile.GFile, os.fspath(path), "rb") as handle:
        return handle.read()


def read_text(path: str | os.PathLike) -> str:
    return read_bytes(path).decode("utf-8")


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(read_text(path))


class _GFileRaw(io.RawIOBase):
    """A gfile stream as a raw file, so that io.BufferedReader gives it readline(limit)."""

    def __init__(self, handle):
        self._handle = handle

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._handle.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        self._handle.seek(offset, whence)
        return self._handle.tell()

    def tell(self) -> int:
        return self._handle.tell()

    def close(self) -> None:
        self._handle.close()
        super().close()


def open_binary(path: str | os.PathLike) -> io.BufferedReader:
    """A buffered binary file for reading (seek, tell, readline(limit)), on any filesystem."""
    text = os.fspath(path)
    if is_local(text) and "://" not in text:
        return open(text, "rb", buffering=1 << 20)  # noqa: SIM115 (the caller closes it)
    return io.BufferedReader(_GFileRaw(_gfile(tf.io.gfile.GFile, text, "rb")), buffer_size=1 << 20)


def open_text(path: str | os.PathLike, newline: str | None = None, encoding: str | None = None):
    """A text file for reading, streamed, on any filesystem (`newline` as for `open`), decoded
    as `encoding` (None: `bert_tf.text_encoding.default_encoding()`, UTF-8 unless a run
    names another); a line that does not decode is an error naming the file, the line
    and the fix (`bert_tf.text_encoding`)."""
    return text_encoding.TextFile(open_binary(path), os.fspath(path), encoding, newline)


def write_bytes(path: str | os.PathLike, data: bytes) -> str:
    """Writes `data` to `path` so that a reader sees the old content or the new, never half
    (see `writing`)."""
    with writing(path, binary=True) as handle:
        handle.write(data)
    return os.fspath(path)


@contextlib.contextmanager
def partial(path: str | os.PathLike) -> Iterator[str]:
    """The name to write `path` under (with any writer: GFile, TFRecordWriter, ...), so that a
    reader sees the old content or the new, never half.

    Where a rename is atomic it is a hidden temporary sibling, renamed over `path` when
    the block succeeds and removed when it fails; on object stores it is `path` itself,
    which they publish only when the writer closes it (see the module docstring). The
    parent folder is created; a write TensorFlow refuses is a `FileSystemError` naming `path`.
    """
    text = os.fspath(path)
    parent = dirname(text)
    if parent and not exists(parent):
        makedirs(parent)
    target = (
        join(parent, f".{basename(text)}.partial-{uuid.uuid4().hex[:8]}")
        if atomic_rename_supported(text)
        else text
    )
    try:
        yield target
        if target != text:
            tf.io.gfile.rename(target, text, overwrite=True)
    except BaseException as error:
        if target != text and tf.io.gfile.exists(target):
            tf.io.gfile.remove(target)
        if isinstance(error, tf.errors.OpError):
            raise FileSystemError(f"cannot write {text}: {error.message}") from None
        raise


@contextlib.contextmanager
def writing(path: str | os.PathLike, binary: bool = False) -> Iterator[Any]:
    """A stream for an output, published whole (see `partial`): a reader sees the old content or the new."""
    with partial(path) as target, _gfile(tf.io.gfile.GFile, target, "wb" if binary else "w") as handle:
        yield handle


def write_text(path: str | os.PathLike, text: str) -> str:
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, value: Any) -> str:
    return write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def copy(source: str | os.PathLike, target: str | os.PathLike) -> str:
    """Copies a file (across filesystems too), replacing `target` as `write_bytes` does."""
    return write_bytes(target, read_bytes(source))


def same_contents(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    return size(first) == size(second) and read_bytes(first) == read_bytes(second)


def remove(path: str | os.PathLike) -> None:
    _gfile(tf.io.gfile.remove, os.fspath(path))


def rmtree(path: str | os.PathLike) -> None:
    """Deletes a directory and everything under it; nothing if it does not exist."""
    text = os.fspath(path)
    if not exists(text):
        return
    try:
        tf.io.gfile.rmtree(text)
        return
    except tf.errors.OpError:
        pass  # ram:// has no recursive delete: remove the files one by one.
    for directory, _, files in list(tf.io.gfile.walk(text)):
        for name in files:
            tf.io.gfile.remove(join(directory, name))
    if tf.io.gfile.exists(text) and not tf.io.gfile.listdir(text):
        try:
            tf.io.gfile.remove(text)
        except tf.errors.OpError:
            pass


def rename(source: str | os.PathLike, target: str | os.PathLike, overwrite: bool = False) -> None:
    _gfile(tf.io.gfile.rename, os.fspath(source), os.fspath(target), overwrite=overwrite)


def publish_folder(local: str, target: str | os.PathLike, last: tuple[str, ...] = ()) -> str:
    """Copies the local folder `local` to `target` (replacing it) so that no reader sees it half-done.

    On a local disk the copy is made beside `target` and renamed into place. Elsewhere
    (`gs://`, `ram://`) a folder has no atomic rename: the files are copied into `target`
    with those named in `last` after all the others, so a reader that looks for them
    knows whether the folder is complete.
    """
    target = os.fspath(target)
    if folder_rename_supported(target):
        tag = uuid.uuid4().hex[:8]
        partial = join(dirname(target), f".{basename(target)}.partial-{tag}")
        shutil.copytree(local, partial)
        # The old folder is moved aside, not deleted, until the new one is in place.
        old = join(dirname(target), f".{basename(target)}.old-{tag}") if exists(target) else None
        if old:
            os.replace(target, old)
        os.replace(partial, target)
        if old:
            rmtree(old)
    else:
        rmtree(target)
        copy_tree(local, target, last=last)
    return target


def copy_tree(source: str | os.PathLike, target: str | os.PathLike, last: tuple[str, ...] = ()) -> None:
    """Copies every file under `source` to the same place under `target`.

    Files named in `last` (relative paths) are copied after all the others, so a reader
    that waits for them sees a complete tree.
    """
    source, target = os.fspath(source), os.fspath(target)
    later = []
    for directory, _, files in tf.io.gfile.walk(source):
        relative = os.path.relpath(directory, source) if directory.rstrip("/") != source.rstrip("/") else ""
        for name in files:
            path = os.path.join(relative, name) if relative else name
            if path in last:
                later.append(path)
            else:
                copy(join(source, path), join(target, path))
    for path in later:
        copy(join(source, path), join(target, path))
