"""Reading and writing Hugging Face BERT weights (model.safetensors + config.json), no torch.

Files are read and written as bytes through `bert_tf.fileio`, so they may live on any
filesystem TensorFlow knows (`gs://`, ...); safetensors itself only opens local files.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import safetensors.numpy

from bert_tf import fileio
from bert_tf.checkpoints.names import CheckpointError
from bert_tf.config import BertConfig

# Buffers and tied copies Hugging Face may store next to the weights: not separate weights.
IGNORED = ("bert.embeddings.position_ids", "embeddings.position_ids")
TIED = {
    "cls.predictions.decoder.weight": "bert/embeddings/word_embeddings",
    "cls.predictions.decoder.bias": "cls/predictions/output_bias",
}


def read_header(path: str) -> dict[str, Any]:
    """The JSON header of a safetensors file (name -> dtype, shape, offsets), read without the data."""
    with fileio.open_binary(path) as handle:
        prefix = handle.read(8)
        (length,) = struct.unpack("<Q", prefix) if len(prefix) == 8 else (0,)
        header = handle.read(length) if 0 < length < (1 << 27) else b""
    try:
        values = json.loads(header)
    except ValueError:
        values = None
    if not isinstance(values, dict):
        raise CheckpointError(f"{path} is not a safetensors file or is truncated (its header cannot be read)")
    return values


def read_shapes(path: str) -> dict[str, tuple[int, ...]]:
    header = read_header(path)
    return {name: tuple(entry["shape"]) for name, entry in header.items() if name != "__metadata__"}


def read_arrays(path: str, names) -> dict[str, np.ndarray]:
    try:
        arrays = safetensors.numpy.load(fileio.read_bytes(path))
    except Exception as error:  # safetensors raises its own SafetensorError
        raise CheckpointError(
            f"{path} cannot be read as safetensors ({error}); it may be truncated"
        ) from None
    return {name: arrays[name] for name in names}


def write(path: str, arrays: dict[str, np.ndarray]) -> str:
    # "format": "pt" is what transformers' from_pretrained expects in the header.
    data = safetensors.numpy.save(
        {name: np.ascontiguousarray(value) for name, value in arrays.items()}, {"format": "pt"}
    )
    return fileio.write_bytes(path, data)


def config_dict(config: BertConfig, architecture: str, **extra) -> dict[str, Any]:
    """A transformers `config.json` for this model (`extra`: a task head's id2label, ...).

    The original "gelu" is the tanh approximation, which transformers calls "gelu_new"
    (its "gelu" is the erf form, our "gelu_exact"), so the exported model computes the same
    function.
    """
    values = config.to_hf_dict()
    values.update(
        architectures=[architecture],
        model_type="bert",
        layer_norm_eps=1e-12,
        pad_token_id=0,
        position_embedding_type="absolute",
        **extra,
    )
    return values


def write_config(directory: str, config: BertConfig, architecture: str, **extra) -> None:
    fileio.write_json(fileio.join(directory, "config.json"), config_dict(config, architecture, **extra))
