"""Reading and writing Hugging Face BERT weights (model.safetensors + config.json), no torch.

Files are read and written as bytes through `bert_tf.fileio`, so they may live on any
filesystem TensorFlow knows (`gs://`, ...); safetensors itself only opens local files.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import safetensors.numpy

from bert_tf import fileio
from bert_tf.checkpoints import integrity
from bert_tf.checkpoints.names import CheckpointError
from bert_tf.config import BertConfig

# Buffers and tied copies Hugging Face may store next to the weights: not separate weights.
IGNORED = ("bert.embeddings.position_ids", "embeddings.position_ids")
TIED = {
    "cls.predictions.decoder.weight": "bert/embeddings/word_embeddings",
    "cls.predictions.decoder.bias": "cls/predictions/output_bias",
}


def read(path: str) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file by name; the file is read once, its framing
    checked (`integrity.check_safetensors`: a damaged file is named) before safetensors
    parses it."""
    data = fileio.read_bytes(path)
    integrity.check_safetensors(path, data)
    try:
        return safetensors.numpy.load(data)
    except Exception as error:  # safetensors raises its own SafetensorError
        raise CheckpointError(f"{path} cannot be read as safetensors ({error})") from None


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
