"""The files the launcher of a Beam pipeline checks, reached without TensorFlow.

The process that checks a program's flags and submits its pipeline (`pipelines.beam.generate`,
`pipelines.beam.vocab`) runs no TensorFlow op: the workers do. `bert_tf.fileio` reaches
files through TensorFlow, whose import takes seconds, so the launcher looks at them here
instead: local paths with Python's own functions, URLs (`gs://`, `s3://`, ...) through
Beam's `FileSystems`, the filesystems its workers read too; only a URL Beam cannot reach
(`ram://`, ...) goes to `bert_tf.fileio`. The functions are
`bert_tf.fileio`'s, by name and meaning, for `fileio.expand_files`, `outputs.check_output`
and `vocab.load_vocab` (their `filesystem` argument).
"""

from __future__ import annotations

import glob as python_glob
import os
from typing import BinaryIO

from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bert_tf import fileio


def _is_local(path: str) -> bool:
    return fileio.is_local(path) and "://" not in path


def _on_beam(path: str) -> bool:
    """Whether Beam reaches this URL. Others (`ram://`, a scheme only a TensorFlow plugin
    knows, `gs://` without apache-beam[gcp]) go through `bert_tf.fileio`, loading TensorFlow."""
    try:
        FileSystems.get_filesystem(path)
    except (ValueError, BeamIOError):
        return False
    return True


def check_path(path: str | os.PathLike) -> str:
    """Returns `path` as a string; raises FileSystemError if neither Beam nor TensorFlow knows its scheme."""
    text = os.fspath(path)
    if _is_local(text) or _on_beam(text):
        return text
    return fileio.check_path(text)


def exists(path: str | os.PathLike) -> bool:
    text = os.fspath(path)
    if _is_local(text):
        return os.path.exists(text)
    return FileSystems.exists(text) if _on_beam(text) else fileio.exists(text)


def isdir(path: str | os.PathLike) -> bool:
    """A local folder, or a URL with objects under it (an object store has no folders, only prefixes)."""
    text = os.fspath(path)
    if _is_local(text):
        return os.path.isdir(text)
    return bool(glob(text.rstrip("/") + "/*")) if _on_beam(text) else fileio.isdir(text)


def isfile(path: str | os.PathLike) -> bool:
    return exists(path) and not isdir(path)


def glob(pattern: str | os.PathLike) -> list[str]:
    text = os.fspath(pattern)
    if _is_local(text):
        # Hidden files match too, as TensorFlow's glob matches them.
        return sorted(python_glob.glob(text, include_hidden=True))
    if not _on_beam(text):
        return fileio.glob(text)
    return sorted(metadata.path for metadata in FileSystems.match([text])[0].metadata_list)


def size(path: str | os.PathLike) -> int:
    text = os.fspath(path)
    if _is_local(text):
        return os.path.getsize(text)
    if not _on_beam(text):
        return fileio.size(text)
    return FileSystems.match([text])[0].metadata_list[0].size_in_bytes


def makedirs(path: str | os.PathLike) -> str:
    text = os.fspath(path)
    if not (_is_local(text) or _on_beam(text)):
        return fileio.makedirs(text)
    try:
        if _is_local(text):
            os.makedirs(text, exist_ok=True)
        elif not FileSystems.exists(text):
            FileSystems.mkdirs(text)
    except OSError as error:
        raise fileio.FileSystemError(f"cannot create the directory {text}: {error}") from None
    return text


def remove(path: str | os.PathLike) -> None:
    text = os.fspath(path)
    if _is_local(text):
        os.remove(text)
    elif _on_beam(text):
        FileSystems.delete([text])
    else:
        fileio.remove(text)


def open_binary(path: str | os.PathLike) -> BinaryIO:
    """A buffered binary file for reading (seek, tell, readline(limit))."""
    text = os.fspath(path)
    if _is_local(text) or not _on_beam(text):
        return fileio.open_binary(text)  # a local file is Python's own
    return FileSystems.open(text, compression_type=CompressionTypes.UNCOMPRESSED)


def read_bytes(path: str | os.PathLike) -> bytes:
    with open_binary(path) as handle:
        return handle.read()
