"""LoRA fine-tuning of the task models: Keras' own adapters on a frozen encoder.

`TaskModel.enable_lora(rank)` freezes every weight of the encoder and gives the query and
value projections of each attention layer a low-rank adapter through Keras'
`Dense.enable_lora` (keras-hub's `backbone.enable_lora` targets the same two): the layer
computes with `kernel + (lora_alpha / rank) * lora_kernel_a @ lora_kernel_b`, where the
kernel is frozen, `lora_kernel_b` starts at zero (the adapted model starts as the base)
and only the adapters and the task head train. `python -m bert_tf.finetune --lora_rank=R`
does the same.

Saving merges the adapters into the kernels (`merged`): `model.save` writes a plain
fine-tuned folder that every reader and export takes unchanged. `save_lora_weights` keeps
only what was trained (the adapters and the head, a few hundred kilobytes for a MiniLM) in
one .npz file, published whole, with what it was trained on (the rank, alpha, the encoder's
shape and the task description); `load_lora_weights` puts them onto a model built from the
same base.

Example (a tiny Hugging Face checkpoint the tests ship):

>>> import bert_tf
>>> model = bert_tf.BertClassifier.from_pretrained(
...     "tests/fixtures/hf_tiny", label_list=["neg", "pos"], max_seq_length=16)
>>> model.enable_lora(4)
>>> sorted({w.name for w in model.trainable_weights})
['bias', 'kernel', 'lora_kernel_a', 'lora_kernel_b']
>>> model.lora_rank
4
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import keras
import numpy as np

from bert_tf import fileio
from bert_tf.errors import UsageError, damaged
from bert_tf.layers.attention import BertSelfAttention
from bert_tf.tasks.info import FinetunedModelInfo
from bert_tf.tasks.settings import check_lora_rank

FORMAT = "bert_tf.lora"
FORMAT_VERSION = 1
META_KEY = "__lora__"  # the .npz entry holding the JSON description
TARGETS = ("query", "value")  # the projections of each attention layer that get adapters
# What fixes the shapes of the adapters (the rest of the config does not change them).
SHAPE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
ADAPTER_WEIGHTS = ("lora_kernel_a", "lora_kernel_b")


def adapted_layers(model) -> list[tuple[str, keras.layers.Dense]]:
    """(key, Dense) of the projections that take adapters, in the encoder's order."""
    layers = []
    for index, block in enumerate(model.encoder.transformer_layers):
        attention = block.attention
        if not isinstance(attention, BertSelfAttention):  # pragma: no cover (the encoder's own)
            raise TypeError(f"layer {index} of the encoder has no BertSelfAttention")
        layers.extend((f"layer_{index}/attention/{name}", getattr(attention, name)) for name in TARGETS)
    return layers


def is_enabled(model) -> bool:
    return any(dense.lora_enabled for _, dense in adapted_layers(model))


def rank_of(model) -> int | None:
    """The adapters' rank, None without adapters."""
    layers = adapted_layers(model)
    return layers[0][1].lora_rank if layers and layers[0][1].lora_enabled else None


def alpha_of(model) -> float | None:
    layers = adapted_layers(model)
    return layers[0][1].lora_alpha if layers and layers[0][1].lora_enabled else None


def enable(model, rank: int, lora_alpha: float | None = None) -> None:
    """Freezes the encoder and gives its query and value projections adapters of `rank`."""
    check_lora_rank(int(rank) if isinstance(rank, np.integer) else rank, lora_alpha)
    if is_enabled(model):
        raise UsageError(
            f"the model has LoRA adapters already (rank {rank_of(model)}); build the model again for "
            "another rank, or save it (merged) and enable LoRA on the saved model"
        )
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and optimizer.built:
        raise UsageError(
            "enable_lora after the optimizer was built (by fit): call enable_lora before compile and fit"
        )
    # The variables, not the layers: a frozen layer would freeze the adapters added to it too,
    # and a layer's `trainable` is saved in its config (a merged save would load frozen).
    for weight in model.encoder.weights:
        weight.trainable = False
    for _, dense in adapted_layers(model):
        dense.enable_lora(int(rank), lora_alpha=None if lora_alpha is None else float(lora_alpha))
    model.train_function = None  # a step traced before has the old trainable weights


def trained_weights(model) -> dict[str, keras.Variable]:
    """{key: variable} of what LoRA training changes: the adapters and every weight outside
    the encoder (the head)."""
    weights = {}
    for key, dense in adapted_layers(model):
        for name in ADAPTER_WEIGHTS:
            weights[f"encoder/{key}/{name}"] = getattr(dense, name)
    return {**weights, **_head_weights(model)}


def merged(model):
    """A copy of `model` without adapters, each adapted kernel merged
    (`kernel + alpha / rank * a @ b`): a plain task model, carrying the same preprocessor."""
    copy = type(model).from_config(model.get_config())
    merged_kernels = {id(dense._kernel): dense.kernel for _, dense in adapted_layers(model)}
    adapters = {id(getattr(dense, name)) for _, dense in adapted_layers(model) for name in ADAPTER_WEIGHTS}
    values = [
        merged_kernels.get(id(weight), weight) for weight in model.weights if id(weight) not in adapters
    ]
    copy.set_weights([keras.ops.convert_to_numpy(value) for value in values])
    copy.preprocessor = model.preprocessor
    return copy


def _description(model) -> dict:
    config = model.encoder.config
    info = model.task_info
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model_class": type(model).__name__,
        "rank": int(rank_of(model)),
        "lora_alpha": float(alpha_of(model)),
        "targets": list(TARGETS),
        "encoder": {name: getattr(config, name) for name in SHAPE_FIELDS},
        "task": None if info is None else info.to_json(),
    }


def save_weights(model, path) -> str:
    """Writes the adapters and the head of `model` to `path` (an .npz), whole or not at all."""
    path = os.fspath(path)
    if not is_enabled(model):
        raise UsageError(
            "the model has no LoRA adapters to save: call model.enable_lora(rank) before fit, "
            "or save the whole model with model.save"
        )
    if not path.endswith(".npz"):
        raise UsageError(f"save_lora_weights writes an .npz file; name it so: {path}.npz")
    arrays = {key: keras.ops.convert_to_numpy(weight) for key, weight in trained_weights(model).items()}
    arrays[META_KEY] = np.array(json.dumps(_description(model), sort_keys=True))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return fileio.write_bytes(path, buffer.getvalue())


def _read(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    if not fileio.isfile(path):
        raise UsageError(f"no LoRA weights at {path}; pass the .npz file that save_lora_weights wrote")
    try:
        with np.load(io.BytesIO(fileio.read_bytes(path)), allow_pickle=False) as file:
            arrays = {name: file[name] for name in file.files}
        description = json.loads(str(arrays.pop(META_KEY)))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise damaged(path, f"not LoRA weights of bert_tf: {error}", "save them again") from None
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise damaged(path, "not LoRA weights of bert_tf", "save them again")
    if description.get("format_version", 0) > FORMAT_VERSION:
        raise damaged(
            path,
            f"format_version {description.get('format_version')}; this bert_tf reads {FORMAT_VERSION}",
            "update bert_tf",
        )
    return description, arrays


def load_weights(model, path) -> None:
    """Puts the adapters and head of `path` onto `model` (built from the base they were
    trained on), enabling LoRA at their rank if it is not yet; the task description they
    were saved with (labels, options) becomes the model's. Everything is checked before
    the model changes."""
    path = os.fspath(path)
    description, arrays = _read(path)
    config = model.encoder.config
    theirs = description["encoder"]
    ours = {name: getattr(config, name) for name in SHAPE_FIELDS}
    if theirs != ours:
        differ = ", ".join(
            f"{name} {theirs.get(name)} there, {ours[name]} here"
            for name in SHAPE_FIELDS
            if theirs.get(name) != ours[name]
        )
        raise UsageError(
            f"{path} holds adapters for another base ({differ}); load them onto a model built from the "
            "checkpoint they were trained on"
        )
    if description["model_class"] != type(model).__name__:
        raise UsageError(
            f"{path} holds the head of a {description['model_class']}, not of a {type(model).__name__}; "
            f"load it with bert_tf.{description['model_class']}.from_pretrained(base, ...)"
        )
    rank, alpha = description["rank"], description["lora_alpha"]
    if is_enabled(model) and (rank_of(model), alpha_of(model)) != (rank, alpha):
        raise UsageError(
            f"{path} holds adapters of rank {rank} (alpha {alpha:g}), the model has rank {rank_of(model)} "
            f"(alpha {alpha_of(model):g}); load them onto a model without adapters"
        )
    head = _head_weights(model)
    saved_head = {key: array for key, array in arrays.items() if key.startswith("head/")}
    if set(saved_head) != set(head) or any(tuple(head[k].shape) != saved_head[k].shape for k in head):
        shapes = sorted(f"{k.removeprefix('head/')} {list(v.shape)}" for k, v in saved_head.items())
        raise UsageError(
            f"{path} holds a head of another shape ({', '.join(shapes)}); build the model with the "
            "classes it was trained with (label_list= or num_classes=)"
        )
    expected = {}
    for key, dense in adapted_layers(model):
        units_in, units_out = dense._kernel.shape
        expected[f"encoder/{key}/lora_kernel_a"] = (units_in, rank)
        expected[f"encoder/{key}/lora_kernel_b"] = (rank, units_out)
    wrong = sorted(key for key, shape in expected.items() if key not in arrays or arrays[key].shape != shape)
    if wrong:
        raise damaged(
            path, f"adapters missing or of other shapes ({', '.join(wrong[:3])})", "save them again"
        )
    info = None
    if description.get("task") is not None and model.preprocessor is not None:
        info = FinetunedModelInfo.from_json(description["task"], path)
    if not is_enabled(model):
        enable(model, rank, alpha)
    weights = trained_weights(model)
    for key, weight in weights.items():
        weight.assign(arrays[key])
    if info is not None:
        model.preprocessor.info = info


def _head_weights(model) -> dict[str, keras.Variable]:
    """{key: variable} of the weights outside the encoder (as `trained_weights` names them)."""
    return {
        f"head/{layer.name}/{weight.name}": weight
        for layer in model.layers
        if layer is not model.encoder
        for weight in layer.weights
    }
