"""Reading and writing Hugging Face BERT weights (model.safetensors + config.json), no torch."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from bert_tf.config import BertConfig
from bert_tf.outputs import umask_permissions

# Buffers and tied copies Hugging Face may store next to the weights: not separate weights.
IGNORED = ("bert.embeddings.position_ids", "embeddings.position_ids")
TIED = {
    "cls.predictions.decoder.weight": "bert/embeddings/word_embeddings",
    "cls.predictions.decoder.bias": "cls/predictions/output_bias",
}


def read_shapes(path: str) -> dict[str, tuple[int, ...]]:
    with safe_open(path, framework="numpy") as file:
        return {name: tuple(file.get_slice(name).get_shape()) for name in file.keys()}


def read_arrays(path: str, names) -> dict[str, np.ndarray]:
    with safe_open(path, framework="numpy") as file:
        return {name: file.get_tensor(name) for name in names}


def write(path: str, arrays: dict[str, np.ndarray]) -> str:
    # "format": "pt" is what transformers' from_pretrained expects in the header.
    save_file({name: np.ascontiguousarray(value) for name, value in arrays.items()}, path, {"format": "pt"})
    umask_permissions(path)  # the writer makes it 0o600
    return path


def config_dict(config: BertConfig, architecture: str) -> dict[str, Any]:
    """A transformers `config.json` for this model.

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
    )
    return values


def write_config(directory: str, config: BertConfig, architecture: str) -> None:
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as file:
        json.dump(config_dict(config, architecture), file, indent=2, sort_keys=True)
        file.write("\n")
