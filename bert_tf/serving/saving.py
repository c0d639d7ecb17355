"""Writing an export directory all at once or not at all.

A SavedModel is many files (saved_model.pb, variables/*, assets/*). If an export dies
half-way (a full disk, Ctrl-C, an error while tracing) a server watching the directory
must not pick up a half-written model, and a previous good export must not be lost. So
every export is written into a temporary sibling directory and renamed into place only
once complete; the temporary directory is removed on failure.

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
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from bert_tf.config import BertConfig
from bert_tf.errors import BertTfError
from bert_tf.outputs import umask_permissions

EXTRA_DIR = "assets.extra"
CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"
INFO_NAME = "export_info.json"


class ExportError(BertTfError, ValueError):
    """An export that cannot be made as asked; the message says what to change."""

    exit_code = 2  # a command line to change (the path, --overwrite, --seq_length)


def check_export_dir(export_dir: str, overwrite: bool) -> None:
    """Raises ExportError if `export_dir` holds files and `overwrite` is False."""
    from bert_tf.outputs import check_output

    if os.path.isfile(export_dir):
        raise ExportError(f"--export_dir {export_dir} is a file; pass a directory path")
    check_output(export_dir, "--export_dir", overwrite=True)  # a file above it
    if os.path.isdir(export_dir) and os.listdir(export_dir) and not overwrite:
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
    export_dir = os.path.abspath(export_dir)
    check_export_dir(export_dir, overwrite)
    parent = os.path.dirname(export_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(export_dir)}.tmp-", dir=parent)
    umask_permissions(staging)  # mkdtemp's 0o700 would become the export's mode
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # Re-check: another process may have written there while we were exporting.
    check_export_dir(export_dir, overwrite)
    old = None
    if os.path.isdir(export_dir):
        if os.listdir(export_dir):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(export_dir)}.old-", dir=parent)
            os.rmdir(old)
            os.rename(export_dir, old)
        else:
            os.rmdir(export_dir)
    try:
        os.rename(staging, export_dir)
    except BaseException:
        if old is not None:
            os.rename(old, export_dir)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_extras(staging: str, config: BertConfig, vocab_file: str, info: dict[str, Any]) -> None:
    """Writes assets.extra/{bert_config.json, vocab.txt, export_info.json} into `staging`."""
    extra = os.path.join(staging, EXTRA_DIR)
    os.makedirs(extra, exist_ok=True)
    config.to_json_file(os.path.join(extra, CONFIG_NAME))
    shutil.copyfile(vocab_file, os.path.join(extra, VOCAB_NAME))
    with open(os.path.join(extra, INFO_NAME), "w", encoding="utf-8") as file:
        json.dump(info, file, indent=2, sort_keys=True)
        file.write("\n")


def read_export_info(export_dir: str) -> dict[str, Any]:
    """Reads assets.extra/export_info.json of an export made by bert_tf.export."""
    path = os.path.join(export_dir, EXTRA_DIR, INFO_NAME)
    if not os.path.isfile(path):
        raise ExportError(
            f"{export_dir} is not an export made by bert_tf.export (no {EXTRA_DIR}/{INFO_NAME})"
        )
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def check_seq_length(seq_length: int, config: BertConfig, flag: str = "--seq_length") -> None:
    """seq_length must fit the position embeddings and hold [CLS] x [SEP]."""
    if isinstance(seq_length, bool) or not isinstance(seq_length, int) or seq_length < 3:
        raise ExportError(f"{flag} must be an integer >= 3 ([CLS], a token, [SEP]), got {seq_length!r}")
    if seq_length > config.max_position_embeddings:
        raise ExportError(
            f"{flag}={seq_length} is above the model's max_position_embeddings="
            f"{config.max_position_embeddings}; the model has no position embedding beyond that. "
            f"Pass {flag}={config.max_position_embeddings} or less"
        )
