"""Whole-file checks of the weights files we read, so that a damaged file is named, not a crash.

A file cut short by an interrupted copy or download, or overwritten with something else,
otherwise fails deep inside a library ("Read less bytes than requested", a safetensors
header error, "File not found" for a zip that is really there). Each check here looks only
at a file's framing (headers, index, sizes), never its weights, and raises a
`DamagedFileError` "FILE is truncated or corrupt (expected N bytes, found M)".

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
>>> _ = open(path, "wb").write(b"\\x10\\x00")
>>> check_safetensors(path)
Traceback (most recent call last):
...
bert_tf.errors.DamagedFileError: ... is truncated or corrupt (expected at least 8 bytes, found 2); ...
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile

from bert_tf import fileio
from bert_tf.errors import damaged

_REDOWNLOAD = "download or export it again"


def check_safetensors(path: str, data: bytes | None = None) -> dict:
    """The header of a safetensors file (name -> dtype, shape, data_offsets), after checking
    that it parses and that the file is exactly as long as it says.

    `data`: the file's bytes when the caller has read them (nothing is read again); else
    only the header is read.
    """
    if data is not None:
        return _safetensors_header(path, len(data), io.BytesIO(data).read)
    with fileio.open_binary(path) as file:
        return _safetensors_header(path, fileio.size(path), file.read)


def _safetensors_header(path: str, size: int, read) -> dict:
    if size < 8:
        raise damaged(path, f"expected at least 8 bytes, found {size}", _REDOWNLOAD)
    (header_size,) = struct.unpack("<Q", read(8))
    if 8 + header_size > size:
        raise damaged(path, f"expected a header of {header_size} bytes, found {size - 8}", _REDOWNLOAD)
    try:
        header = json.loads(read(header_size))
        ends = [int(entry["data_offsets"][1]) for name, entry in header.items() if name != "__metadata__"]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        raise damaged(path, "its header is not a safetensors header", _REDOWNLOAD) from None
    expected = 8 + header_size + max(ends, default=0)
    if expected != size:
        raise damaged(path, f"expected {expected} bytes, found {size}", _REDOWNLOAD)
    return header


def check_tf_checkpoint(prefix: str, fix: str = _REDOWNLOAD) -> None:
    """The index opens and each data shard is as long as the tensors listed in it.

    `fix` says what to do about a damaged one (a run's own checkpoints are not downloaded).
    """
    import numpy as np
    import tensorflow as tf

    index = prefix + ".index"
    try:
        # By prefix: load_checkpoint first asks if the prefix is a directory, which ram://
        # answers yes for any prefix of a file name.
        reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    except (tf.errors.OpError, ValueError) as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        if tf.io.gfile.exists(index):
            raise damaged(index, f"its index cannot be read: {detail}", fix) from None
        raise damaged(prefix, detail, fix) from None
    shards = sorted(tf.io.gfile.glob(prefix + ".data-*-of-*"))
    if len(shards) != 1:
        return  # several shards: their sizes are not listed per shard; reads are checked
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    fixed = [name for name in shapes if dtypes[name] != tf.string]
    expected = sum(int(np.prod(shapes[name])) * dtypes[name].size for name in fixed)
    found = tf.io.gfile.stat(shards[0]).length
    if len(fixed) == len(shapes) and found != expected:
        raise damaged(shards[0], f"expected {expected} bytes, found {found}", fix)
    if found < expected:  # strings (an object graph) have no fixed size: at least the rest
        raise damaged(shards[0], f"expected at least {expected} bytes, found {found}", fix)


def latest_checkpoint(model_dir: str) -> str | None:
    """The newest checkpoint a run's `checkpoint` state file names; None if it has none.

    TensorFlow ignores a state file it cannot parse (the run would start again from step
    0 and later overwrite the checkpoints); here that is an error, as is a state naming a
    checkpoint whose files are gone or damaged.
    """
    import tensorflow as tf
    from google.protobuf import text_format
    from tensorflow.python.training import checkpoint_state_pb2

    state_file = os.path.join(model_dir, "checkpoint")
    if not tf.io.gfile.exists(state_file):
        return None
    fix = "restore it, or delete it (and the ckpt-* files) to start again from step 0"
    try:
        with tf.io.gfile.GFile(state_file, "r") as file:
            state = text_format.Parse(file.read(), checkpoint_state_pb2.CheckpointState())
    except (text_format.ParseError, UnicodeDecodeError) as error:
        raise damaged(state_file, f"not a checkpoint state: {error}", fix) from None
    if not state.model_checkpoint_path:
        raise damaged(state_file, "it names no checkpoint", fix)
    latest = state.model_checkpoint_path
    if not os.path.isabs(latest) and "://" not in latest:
        latest = os.path.join(model_dir, latest)
    if not tf.io.gfile.exists(latest + ".index"):
        raise damaged(state_file, f"it names {latest}, whose files are missing", fix)
    check_tf_checkpoint(
        latest,
        fix=f"delete {latest}.* and edit or delete {state_file} to resume from an earlier checkpoint, "
        "or use a new --model_dir",
    )
    return latest


def check_keras_archive(path: str, display_path: str | None = None) -> None:
    """A `.keras` file is a zip archive: its directory is intact and every member's CRC matches.

    `display_path` names the file in messages when `path` is a local copy of it (Keras
    reads a `.keras` file only from a local disk).
    """
    name = display_path or path
    size = os.path.getsize(path)
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        detail = str(error).replace(path, name)
        raise damaged(
            name, f"not a complete zip archive, {size} bytes: {detail}", "save or copy it again"
        ) from None
    if bad:
        raise damaged(name, f"the member {bad} fails its CRC check", "save or copy it again")
