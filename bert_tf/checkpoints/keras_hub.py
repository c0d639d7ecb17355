"""keras-hub BERT presets (the folders `save_to_preset` writes): recognising and reading them.

A preset folder holds `config.json` (the `BertBackbone`'s Keras config), `model.weights.h5`
(its weights), `tokenizer.json` with `assets/tokenizer/vocabulary.txt`, `metadata.json`, and
for a task `task.json` (a `BertTextClassifier`: `num_classes`, `activation`), `task.weights.h5`
(its `logits` dense) and `preprocessor.json` (the `sequence_length` it packs to).

Reading needs no keras-hub: the JSON files are read as data and the weights with h5py, in
the layout Keras' saver gives a `BertBackbone` (`layers/transformer_encoder_1/...`; every
published preset depends on that layout, so it cannot change under them). Each weight has
one place (`place`): its original TF1 name, the keras-hub variable, and the h5 dataset;
`bert_tf.checkpoints.keras_hub_export` writes presets through the same table.

The math is the original's: keras-hub's `BertBackbone` uses the tanh GELU (our "gelu"),
LayerNorm epsilon 1e-12 and a tanh pooler on [CLS]; its `BertTextClassifier` is dropout on
the pooled output then a dense, as our `BertClassifier`. Its attention projections are
kept per head ([hidden, heads, head_size]); ours are [hidden, hidden], the same numbers.

Example:

>>> from bert_tf.checkpoints import from_pretrained
>>> encoder, tokenizer_settings = from_pretrained("my_keras_hub_preset", heads="encoder")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator

import h5py
import numpy as np

from bert_tf import fileio
from bert_tf.checkpoints.names import CheckpointError, transformers_problem_type
from bert_tf.config import BertConfig
from bert_tf.errors import damaged

CONFIG_FILE = "config.json"
MODEL_WEIGHTS = "model.weights.h5"
SHARDED_WEIGHTS = "model.weights.json"
TASK_FILE = "task.json"
TASK_WEIGHTS = "task.weights.h5"
TOKENIZER_FILE = "tokenizer.json"
PREPROCESSOR_FILE = "preprocessor.json"
# Not keras-hub's: the class names of an exported classifier, one a line in the order of its
# outputs (keras-hub has no place for them; its loader ignores other files).
LABELS_FILE = "labels.txt"
BACKBONE = "BertBackbone"
CLASSIFIER = "BertTextClassifier"
# The transformers class whose head is keras-hub's task head: how a task family knows it.
_ARCHITECTURES = {CLASSIFIER: "BertForSequenceClassification"}
# What a BertBackbone's config.json may hold besides the model's sizes.
_BOOKKEEPING = ("name", "trainable", "dtype")


# --- where each weight lives ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Place:
    variable: str  # the keras-hub variable's path, e.g. transformer_layer_0/self_attention_layer/query/kernel
    file: str  # MODEL_WEIGHTS or TASK_WEIGHTS
    dataset: str  # the h5 dataset, e.g. layers/transformer_encoder/_self_attention_layer/query_dense/vars/0

    @property
    def key(self) -> str:
        return f"{self.file}/{self.dataset}"


_EMBEDDINGS = {  # TF1 name -> (keras-hub variable, h5 dataset)
    "bert/embeddings/word_embeddings": ("token_embedding/embeddings", "layers/reversible_embedding/vars/0"),
    "bert/embeddings/token_type_embeddings": ("segment_embedding/embeddings", "layers/embedding/vars/0"),
    "bert/embeddings/position_embeddings": (
        "position_embedding/embeddings",
        "layers/position_embedding/vars/0",
    ),
}
_LAYERS = {  # TF1 layer -> (keras-hub layer, its h5 group)
    "bert/embeddings/LayerNorm": ("embeddings_layer_norm", "layers/layer_normalization"),
    "bert/pooler/dense": ("pooled_dense", "layers/dense"),
}
_BLOCK_LAYERS = {  # below bert/encoder/layer_{i}/ -> (below transformer_layer_{i}/, below block i's h5 group)
    "attention/self/query": ("self_attention_layer/query", "_self_attention_layer/query_dense"),
    "attention/self/key": ("self_attention_layer/key", "_self_attention_layer/key_dense"),
    "attention/self/value": ("self_attention_layer/value", "_self_attention_layer/value_dense"),
    "attention/output/dense": ("self_attention_layer/attention_output", "_self_attention_layer/output_dense"),
    "attention/output/LayerNorm": ("self_attention_layer_norm", "_self_attention_layer_norm"),
    "intermediate/dense": ("feedforward_intermediate_dense", "_feedforward_intermediate_dense"),
    "output/dense": ("feedforward_output_dense", "_feedforward_output_dense"),
    "output/LayerNorm": ("feedforward_layer_norm", "_feedforward_layer_norm"),
}
# Keras saves a layer's variables in the order it creates them: vars/0, vars/1.
_VARIABLE_INDEX = {"kernel": 0, "bias": 1, "gamma": 0, "beta": 1}


def place(name: str, is_head: bool = False) -> Place | None:
    """Where the weight of TF1 name `name` (a task head's: `is_head`) lives in a preset; None
    where it has no place (the pretraining heads: keras-hub's BertBackbone has none)."""
    if name in _EMBEDDINGS:
        return Place(_EMBEDDINGS[name][0], MODEL_WEIGHTS, _EMBEDDINGS[name][1])
    if is_head:  # the task's one dense, `logits`, whatever our family calls it
        leaf = "kernel" if name.endswith("_weights") else "bias"
        return Place(f"logits/{leaf}", TASK_WEIGHTS, f"layers/dense/vars/{_VARIABLE_INDEX[leaf]}")
    layer, _, leaf = name.rpartition("/")
    if leaf not in _VARIABLE_INDEX:
        return None
    block = re.fullmatch(r"bert/encoder/layer_(\d+)/(.+)", layer)
    if block and block[2] in _BLOCK_LAYERS:
        index = int(block[1])
        ours, group = _BLOCK_LAYERS[block[2]]
        # Keras names the h5 groups of same-class layers transformer_encoder, _1, _2, ...
        h5_layer = "layers/transformer_encoder" + (f"_{index}" if index else "")
        return Place(
            f"transformer_layer_{index}/{ours}/{leaf}",
            MODEL_WEIGHTS,
            f"{h5_layer}/{group}/vars/{_VARIABLE_INDEX[leaf]}",
        )
    if layer in _LAYERS:
        ours, group = _LAYERS[layer]
        return Place(f"{ours}/{leaf}", MODEL_WEIGHTS, f"{group}/vars/{_VARIABLE_INDEX[leaf]}")
    return None


def weight_key(name: str, is_head: bool = False) -> str:
    """`file/dataset` of a TF1 name's weight in a preset (the name itself where it has no
    place, so that a check lists it as missing under its own name)."""
    where = place(name, is_head)
    return where.key if where else name


def preset_shape(name: str, shape: tuple[int, ...], num_heads: int) -> tuple[int, ...]:
    """The shape keras-hub keeps a weight in, from its Keras shape here: the attention
    projections per head (query, key, value [hidden, heads, head_size] and bias
    [heads, head_size]; output [heads, head_size, hidden])."""
    if re.search(r"/attention/self/(query|key|value)/kernel$", name):
        return (shape[0], num_heads, shape[1] // num_heads)
    if re.search(r"/attention/self/(query|key|value)/bias$", name):
        return (num_heads, shape[0] // num_heads)
    if name.endswith("/attention/output/dense/kernel"):
        return (num_heads, shape[0] // num_heads, shape[1])
    return tuple(shape)


# --- recognising a preset -------------------------------------------------------------------


def _read_json(path: str) -> dict:
    try:
        values = fileio.read_json(path)
    except (ValueError, UnicodeDecodeError) as error:
        raise damaged(path, f"not valid JSON: {error}", "save the preset again") from None
    if not isinstance(values, dict):
        raise damaged(path, "not a JSON object", "save the preset again")
    return values


def _keras_hub_class(values: dict) -> str | None:
    """The class name of a keras-hub object's saved config (keras_nlp's, its former name,
    too), or None for any other JSON (a Hugging Face config.json)."""
    module = str(values.get("module") or "")
    registered = str(values.get("registered_name") or "")
    keras_hub = module.startswith(("keras_hub.", "keras_nlp.")) or registered.startswith(
        ("keras_hub>", "keras_nlp>")
    )
    return str(values["class_name"]) if keras_hub and "class_name" in values else None


def is_preset(directory: str) -> bool:
    """Whether `directory` is a keras-hub preset (of any model): its config.json is a
    keras-hub object's."""
    path = fileio.join(directory, CONFIG_FILE)
    if not fileio.isfile(path):
        return False
    try:
        return _keras_hub_class(fileio.read_json(path)) is not None
    except (ValueError, UnicodeDecodeError, AttributeError):
        return False  # not JSON: not a preset (the checkpoint readers say what is wrong with it)


def locate(directory: str) -> str | None:
    """The backbone weights file of the keras-hub BERT preset at `directory`, or None if it
    is not a keras-hub preset. A preset of another model, or one missing a weights file,
    is refused with the fix."""
    if not is_preset(directory):
        return None
    config_file = fileio.join(directory, CONFIG_FILE)
    found = _keras_hub_class(_read_json(config_file))
    if found != BACKBONE:
        raise CheckpointError(
            f"{directory} is a keras-hub {found} preset ({config_file}), not a BERT one; bert_tf reads BERT "
            f"models only: pass a keras-hub {BACKBONE} or {CLASSIFIER} preset"
        )
    weights = fileio.join(directory, MODEL_WEIGHTS)
    if not fileio.isfile(weights):
        sharded = fileio.isfile(fileio.join(directory, SHARDED_WEIGHTS))
        raise CheckpointError(
            f"{directory} is a keras-hub BERT preset without {MODEL_WEIGHTS}"
            + (
                f" (its weights are sharded, {SHARDED_WEIGHTS}; a BERT fits one file): save it again with "
                "save_to_preset(DIR, max_shard_size=None)"
                if sharded
                else ": copy the preset whole (or save it again with save_to_preset)"
            )
        )
    task = task_class(directory)
    if task == CLASSIFIER and not fileio.isfile(fileio.join(directory, TASK_WEIGHTS)):
        raise CheckpointError(
            f"{directory} is a keras-hub {CLASSIFIER} preset without {TASK_WEIGHTS} (its head's weights): "
            "copy the preset whole, or save the classifier again with save_to_preset"
        )
    return weights


def task_class(directory: str) -> str | None:
    """The keras-hub task class of a preset's task.json (BertTextClassifier, ...), or None."""
    path = fileio.join(directory, TASK_FILE)
    if not fileio.isfile(path):
        return None
    found = _keras_hub_class(_read_json(path))
    if found is None:
        raise damaged(path, "not a keras-hub task config", "save the preset again")
    return found


# --- config, tokenizer and head ---------------------------------------------------------------


def read_config(directory: str) -> BertConfig:
    """The BertConfig of a preset's BertBackbone (config.json)."""
    path = fileio.join(directory, CONFIG_FILE)
    values = dict(_read_json(path).get("config") or {})
    sizes = {
        "vocab_size": "vocabulary_size",
        "hidden_size": "hidden_dim",
        "num_hidden_layers": "num_layers",
        "num_attention_heads": "num_heads",
        "intermediate_size": "intermediate_dim",
        "max_position_embeddings": "max_sequence_length",
        "type_vocab_size": "num_segments",
    }
    missing = [key for key in (*sizes.values(), "dropout") if key not in values]
    unknown = sorted(set(values) - {*sizes.values(), "dropout", *_BOOKKEEPING})
    if missing or unknown:
        what = f"no {', '.join(missing)}" if missing else f"settings bert_tf does not know: {unknown}"
        raise CheckpointError(
            f"{path}: a {BACKBONE} config with {what}; bert_tf reads keras-hub 0.32's BertBackbone "
            "(save the preset with that version, or update bert_tf)"
        )
    return BertConfig.from_dict(
        {
            **{ours: values[theirs] for ours, theirs in sizes.items()},
            # keras-hub's BertBackbone: the tanh GELU (gelu_approximate), the original's "gelu";
            # one dropout rate for the hidden states and the attention probabilities.
            "hidden_act": "gelu",
            "hidden_dropout_prob": values["dropout"],
            "attention_probs_dropout_prob": values["dropout"],
        },
        source=path,
    )


def _tokenizer_config(directory: str) -> tuple[dict, str] | None:
    """(the tokenizer's config, the file it is in): tokenizer.json's, else the one inside
    preprocessor.json; None if neither holds one."""
    tokenizer_file = fileio.join(directory, TOKENIZER_FILE)
    if fileio.isfile(tokenizer_file):
        return dict(_read_json(tokenizer_file).get("config") or {}), tokenizer_file
    tokenizer = (_preprocessor_config(directory) or {}).get("tokenizer")
    if isinstance(tokenizer, dict):
        return dict(tokenizer.get("config") or {}), fileio.join(directory, PREPROCESSOR_FILE)
    return None


def _preprocessor_config(directory: str) -> dict | None:
    path = fileio.join(directory, PREPROCESSOR_FILE)
    return dict(_read_json(path).get("config") or {}) if fileio.isfile(path) else None


def vocab_file(directory: str) -> str | None:
    """The preset's vocabulary (assets/tokenizer/vocabulary.txt), or None."""
    config = (_tokenizer_config(directory) or ({}, ""))[0]
    assets = str(config.get("config_file") or TOKENIZER_FILE).split(".")[0]  # keras-hub's rule
    path = fileio.join(directory, "assets", assets, "vocabulary.txt")
    return path if fileio.isfile(path) else None


def lower_case(directory: str) -> tuple[bool, str] | None:
    """(lower_case, how it was decided) from the tokenizer's `lowercase`, or None if the
    preset has no tokenizer config."""
    config, source = _tokenizer_config(directory) or ({}, "")
    if not isinstance(config.get("lowercase"), bool):
        return None
    reason = f"lowercase in {source}"
    if config["lowercase"] and not config.get("strip_accents"):
        # keras-hub lower-cases without removing accents unless strip_accents is set; the
        # original uncased BERT (and bert_tf) removes them, so "café" is "cafe" here.
        reason += (
            " (keras-hub keeps accents there, strip_accents=false; bert_tf removes them as the original)"
        )
    return config["lowercase"], reason


@dataclasses.dataclass(frozen=True)
class PresetHead:
    """A preset's task head: the transformers class with the same head (`architecture`),
    its problem_type, outputs, class names (our labels.txt) and the preprocessor's length."""

    architecture: str
    problem_type: str
    units: int
    label_names: list[str] | None
    max_seq_length: int | None


def read_head(directory: str) -> PresetHead | None:
    """The head of a preset's task (a BertTextClassifier), or None for a backbone or a task
    bert_tf has no head for (BertMaskedLM, ...: their encoder is read)."""
    task = task_class(directory)
    if task not in _ARCHITECTURES:
        return None
    path = fileio.join(directory, TASK_FILE)
    config = _read_json(path).get("config") or {}
    units = config.get("num_classes")
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise damaged(path, f"num_classes is {units!r}", "save the preset again")
    activation = config.get("activation") or "linear"
    # Our logits are the dense's output; keras-hub's outputs are them after `activation`.
    problem_types = {
        "linear": transformers_problem_type(None, units),
        "softmax": "single_label_classification",
        "sigmoid": "multi_label_classification",
    }
    if activation not in problem_types:
        raise CheckpointError(
            f"{path}: a {task} with activation={activation!r}, which bert_tf does not read; it reads "
            "a linear (logits), softmax or sigmoid (multi-label) one"
        )
    labels = None
    labels_file = fileio.join(directory, LABELS_FILE)
    if fileio.isfile(labels_file):
        labels = fileio.read_text(labels_file).splitlines()
        if len(labels) != units:
            raise damaged(
                labels_file, f"{len(labels)} lines for the head's {units} classes", "export it again"
            )
    sequence_length = (_preprocessor_config(directory) or {}).get("sequence_length")
    return PresetHead(
        _ARCHITECTURES[task],
        problem_types[activation],
        units,
        labels,
        sequence_length if isinstance(sequence_length, int) and sequence_length > 0 else None,
    )


# --- reading weights --------------------------------------------------------------------------


@contextlib.contextmanager
def _open_h5(path: str) -> Iterator[h5py.File]:
    """An HDF5 file, read through fileio (any filesystem); a damaged one is named."""
    with fileio.open_binary(path) as stream:
        try:
            file = h5py.File(stream, "r")
        except OSError as error:  # h5py's "truncated file: eof = ...", "file signature not found"
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise damaged(
                path, detail, "copy the preset again, or save it again with save_to_preset"
            ) from None
        with file:
            yield file


def check_files(directory: str, with_task: bool | None = None) -> None:
    """The preset's weights files open as HDF5 (a truncated or overwritten one is named)."""
    with_task = fileio.isfile(fileio.join(directory, TASK_WEIGHTS)) if with_task is None else with_task
    for name in (MODEL_WEIGHTS, TASK_WEIGHTS) if with_task else (MODEL_WEIGHTS,):
        with _open_h5(fileio.join(directory, name)):
            pass


def read_shapes(directory: str, with_task: bool) -> dict[str, tuple[int, ...]]:
    """`file/dataset` -> shape of every weight of the backbone (and, `with_task`, of the
    task's own layers; its optimizer state is not weights)."""
    shapes = {}
    for name in (MODEL_WEIGHTS, TASK_WEIGHTS) if with_task else (MODEL_WEIGHTS,):
        with _open_h5(fileio.join(directory, name)) as file:

            def visit(path: str, item, name=name) -> None:
                if isinstance(item, h5py.Dataset) and path.startswith("layers/"):
                    shapes[f"{name}/{path}"] = tuple(item.shape)

            file.visititems(visit)
    return shapes


def read_arrays(directory: str, keys: dict[str, str]) -> dict[str, np.ndarray]:
    """name -> the array at `keys[name]` (`file/dataset`, checked to exist)."""
    arrays = {}
    for name in (MODEL_WEIGHTS, TASK_WEIGHTS):
        wanted = {ours: key[len(name) + 1 :] for ours, key in keys.items() if key.startswith(f"{name}/")}
        if not wanted:
            continue
        path = fileio.join(directory, name)
        with _open_h5(path) as file:
            try:
                arrays.update({ours: np.asarray(file[dataset]) for ours, dataset in wanted.items()})
            except (OSError, KeyError) as error:
                raise damaged(path, str(error).splitlines()[0], "copy the preset again") from None
    return arrays
