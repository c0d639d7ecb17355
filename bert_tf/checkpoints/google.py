"""Reading and writing checkpoints of the original TF1 release (name-based, V2 format)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert_tf import fileio

# Optimizer state and bookkeeping that original checkpoints may hold besides the weights.
_NOT_WEIGHTS = ("/adam_m", "/adam_v", "/Momentum", "/LAMB", "/Adam")


def is_weight(name: str) -> bool:
    return name != "global_step" and not name.endswith(_NOT_WEIGHTS) and not name.startswith("_")


def read_shapes(prefix: str) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every model weight in a TF1 checkpoint (optimizer slots dropped)."""
    shapes = _reader(prefix).get_variable_to_shape_map()
    return {name: tuple(shape) for name, shape in sorted(shapes.items()) if is_weight(name)}


def _reader(prefix: str):
    # Opened by prefix directly: tf.train.load_checkpoint first asks whether the prefix is a
    # directory, which some filesystems (ram://) answer yes for any prefix of a file name.
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def read_arrays(prefix: str, names) -> dict[str, np.ndarray]:
    reader = _reader(prefix)
    return {name: reader.get_tensor(name) for name in names}


def is_object_based(prefix: str) -> bool:
    """True for TF2 `tf.train.Checkpoint` files, whose names are object paths."""
    return "_CHECKPOINTABLE_OBJECT_GRAPH" in _reader(prefix).get_variable_to_shape_map()


def write(prefix: str, arrays: dict[str, np.ndarray]) -> str:
    """Writes a name-based checkpoint (`prefix.index`, `prefix.data-00000-of-00001`) that
    TF1's `tf.train.init_from_checkpoint` and `Saver.restore` read by these exact names,
    plus the `checkpoint` state file next to it. Returns the prefix."""
    prefix = fileio.abspath(prefix)
    fileio.makedirs(fileio.dirname(prefix))
    names = list(arrays)
    with tf.device("/cpu:0"):
        tf.raw_ops.SaveV2(
            prefix=prefix,
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tf.constant(arrays[name]) for name in names],
        )
    base = fileio.basename(prefix)
    fileio.write_text(
        fileio.join(fileio.dirname(prefix), "checkpoint"),
        f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n',
    )
    return prefix
