"""Writing an export directory all at once or not at all.

A SavedModel is many files (saved_model.pb, variables/*, assets/*). If an export dies
half-way (a full disk, Ctrl-C, an error while tracing) a server watching the directory
must not pick up a half-written model, and a previous good export must not be lost. So
every export is written into a temporary sibling directory and renamed into place only
once complete; the temporary directory is removed on failure. Object stores (`gs://`,
`s3://`) and `ram://` cannot rename a directory: there the export is staged on the local disk,
then copied file by file with `saved_model.pb` last, so a loader (which needs that file)
never sees a partial model; an export replaced with `overwrite` loses its
`saved_model.pb` first, for the same reason.

Besides the SavedModel, every export directory holds `assets.extra/` with the
`bert_config.json` and `vocab.txt` it was built from and `export_info.json` (kind,
seq_length, lower_case, and for task exports the task and label names), so that a
directory found on disk says what it is without loading it.

Example:

>>> import os, tempfile
>>> target = os.path.join(tempfile.mkdtemp(), "model")
>>> with atomic_export_dir(target) as staging:
...     _ = open(os.path.join(staging, "saved_model.pb"), "w").write("")
>>> os.listdir(target)
['saved_model.pb']
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf

from bert_tf import fileio
from bert_tf.config import BertConfig
from bert_tf.errors import BertTfError
from bert_tf.outputs import check_output
from bert_tf.progress_display import TimedStep

EXTRA_DIR = "assets.extra"
CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"
INFO_NAME = "export_info.json"


class ExportError(BertTfError, ValueError):
    """An export that cannot be made as asked; the message says what to change."""

    exit_code = 2  # a command line to change (the path, --overwrite, --max_seq_length)


def check_export_dir(export_dir: str, overwrite: bool) -> None:
    """Raises ExportError if `export_dir` holds files and `overwrite` is False."""
    if fileio.isfile(export_dir):
        raise ExportError(f"--export_dir {export_dir} is a file; pass a directory path")
    check_output(export_dir, "--export_dir", overwrite=True)  # a file above it
    if fileio.isdir(export_dir) and fileio.listdir(export_dir) and not overwrite:
        raise ExportError(
            f"--export_dir {export_dir} exists and is not empty; choose a new directory "
            "or pass --overwrite to replace it"
        )


@contextlib.contextmanager
def atomic_export_dir(export_dir: str, overwrite: bool = False) -> Iterator[str]:
    """Yields a staging directory that replaces `export_dir` only if the block succeeds.

    The staging directory is a sibling of `export_dir` (same filesystem, so the final
    rename is atomic). An existing non-empty `export_dir` is refused unless `overwrite`;
    with `overwrite` the old export is moved aside, the new one renamed in, and only then
    the old one deleted.
    """
    export_dir = fileio.abspath(fileio.check_path(export_dir))
    check_export_dir(export_dir, overwrite)
    if not fileio.folder_rename_supported(export_dir):
        with _staged_locally(export_dir, overwrite) as staging:
            yield staging
        return
    parent = fileio.dirname(export_dir)
    name = fileio.basename(export_dir)
    fileio.makedirs(parent)
    staging = fileio.makedirs(fileio.join(parent, f".{name}.tmp-{uuid.uuid4().hex[:8]}"))
    try:
        yield staging
    except BaseException:
        fileio.rmtree(staging)
        raise
    # Re-check: another process may have written there while we were exporting.
    check_export_dir(export_dir, overwrite)
    old = None
    if fileio.isdir(export_dir):
        if fileio.listdir(export_dir):
            old = fileio.join(parent, f".{name}.old-{uuid.uuid4().hex[:8]}")
            fileio.rename(export_dir, old)
        else:
            fileio.rmtree(export_dir)
    try:
        fileio.rename(staging, export_dir)
    except BaseException:
        if old is not None:
            fileio.rename(old, export_dir)
        fileio.rmtree(staging)
        raise
    if old is not None:
        fileio.rmtree(old)


@contextlib.contextmanager
def _staged_locally(export_dir: str, overwrite: bool) -> Iterator[str]:
    """An export where folders cannot be renamed: staged on the local disk, then copied with
    saved_model.pb last."""
    with tempfile.TemporaryDirectory(prefix="bert_tf_export_") as staging:
        yield staging
        check_export_dir(export_dir, overwrite)
        if fileio.exists(fileio.join(export_dir, "saved_model.pb")):
            fileio.remove(fileio.join(export_dir, "saved_model.pb"))
        fileio.rmtree(export_dir)
        fileio.copy_tree(staging, export_dir, last=("saved_model.pb",))


def write_extras(staging: str, config: BertConfig, vocab_file: str, info: dict[str, Any]) -> None:
    """Writes assets.extra/{bert_config.json, vocab.txt, export_info.json} into `staging`."""
    extra = fileio.makedirs(fileio.join(staging, EXTRA_DIR))
    config.to_json_file(fileio.join(extra, CONFIG_NAME))
    fileio.copy(vocab_file, fileio.join(extra, VOCAB_NAME))
    fileio.write_json(fileio.join(extra, INFO_NAME), info)


def read_export_info(export_dir: str) -> dict[str, Any]:
    """Reads assets.extra/export_info.json of an export made by bert_tf.export."""
    path = fileio.join(export_dir, EXTRA_DIR, INFO_NAME)
    if not fileio.isfile(path):
        raise ExportError(
            f"{export_dir} is not an export made by bert_tf.export (no {EXTRA_DIR}/{INFO_NAME})"
        )
    return fileio.read_json(path)


def check_seq_length(seq_length: int, config: BertConfig, flag: str = "--max_seq_length") -> None:
    """seq_length must fit the position embeddings and hold [CLS] x [SEP]."""
    if isinstance(seq_length, bool) or not isinstance(seq_length, int) or seq_length < 3:
        raise ExportError(f"{flag} must be an integer >= 3 ([CLS], a token, [SEP]), got {seq_length!r}")
    if seq_length > config.max_position_embeddings:
        raise ExportError(
            f"{flag}={seq_length} is above the model's max_position_embeddings="
            f"{config.max_position_embeddings}; the model has no position embedding beyond that. "
            f"Pass {flag}={config.max_position_embeddings} or less"
        )


def export_module(
    build: Callable[[str], tf.Module],
    kind: str,
    config: BertConfig,
    vocab_file: str,
    lower_case: bool,
    export_dir: str,
    seq_length: int,
    overwrite: bool = False,
    info: dict | None = None,
) -> str:
    """Writes `build(vocab_copy)` as a SavedModel plus assets.extra/, atomically.

    `build` gets the path of the vocab copied into the export, so the SavedModel's vocab
    asset is always named vocab.txt whatever the source file was called.
    """
    info = {"kind": kind, "seq_length": seq_length, "lower_case": bool(lower_case), **(info or {})}
    with atomic_export_dir(export_dir, overwrite) as staging:
        write_extras(staging, config, vocab_file, info)
        save(build(fileio.join(staging, EXTRA_DIR, VOCAB_NAME)), staging)
    return fileio.abspath(export_dir)


def save(module: tf.Module, directory: str) -> None:
    """tf.saved_model.save with the module's traced signatures; each step, seconds to minutes
    with nothing to count, is announced on stderr with its time when done."""
    with TimedStep("tracing the serving signatures"):
        signatures = module.trace()
    with TimedStep("writing the SavedModel"):
        tf.saved_model.save(module, directory, signatures=signatures)
