"""`from_pretrained`: one loader for Google checkpoints, Hugging Face directories, keras-hub
presets and our exports.

Every load is checked in full before any weight is assigned: a checkpoint that misses a
variable, has an unexpected one or a wrong shape fails with a message listing them, and
the model is left untouched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import tempfile
import zipfile
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.cache import cache_dir
from bert_tf.checkpoints import google, huggingface, integrity, keras_hub
from bert_tf.checkpoints.names import (
    CheckpointError,
    Slot,
    TaskHead,
    encoder_slots,
    hf_name,
    hf_transposed,
    model_slots,
    transformers_problem_type,
)
from bert_tf.config import BertConfig
from bert_tf.errors import damaged
from bert_tf.models import BertEncoder, BertPretrainer

logger = logging.getLogger(__name__)

HEADS = ("pretraining", "encoder")

_PICKLE_MESSAGE = (
    "{path} is a PyTorch pickle; bert_tf does not unpickle files (loading a pickle can run "
    "arbitrary code). Convert it once with transformers, which writes model.safetensors next to it:\n"
    '  python -c "from transformers import BertForPreTraining as M; '
    "M.from_pretrained('{directory}').save_pretrained('{directory}', safe_serialization=True)\"\n"
    "then load the directory again."
)


@dataclasses.dataclass(frozen=True)
class TokenizerSettings:
    """How to tokenize for a loaded model: `BertTokenizer(vocab_file, lower_case)`.

    `vocab_file` is None when the checkpoint directory has no vocab.txt;
    `lower_case_reason` says how `lower_case` was decided.
    """

    vocab_file: str | None
    lower_case: bool
    lower_case_reason: str = ""


@dataclasses.dataclass(frozen=True)
class _Source:
    kind: str  # "google", "huggingface", "keras_hub" or "keras" (a fine-tuned model's folder)
    weights: str  # checkpoint prefix, .safetensors, a preset's model.weights.h5 or .keras file
    directory: str


# A fine-tuned model's folder (`bert_tf.tasks.finetuned`): the Keras task model, its encoder's
# config, its vocab, and task.json (which also says the model's casing).
KERAS_MODEL_FILE = "model.keras"
KERAS_TASK_FILE = "task.json"


def load_keras_archive(path: str, compile: bool = False) -> keras.Model:
    """The Keras model of a `.keras` file on any file system, after checking the archive is whole.

    The model computes in Keras' current dtype policy, not in the one it was trained in: a
    model fine-tuned under mixed_bfloat16 (float32 weights) is served, exported and converted
    to LiteRT in float32, and trained on in whatever policy the next run picks.
    """
    with tempfile.TemporaryDirectory() as local:
        # Keras reads a .keras file as a local zip; copied whole from any filesystem.
        copy = os.path.join(local, fileio.basename(path))
        fileio.copy(path, copy)
        integrity.check_keras_archive(copy, display_path=path)
        neutral = os.path.join(local, "neutral.keras")
        with zipfile.ZipFile(copy) as source, zipfile.ZipFile(neutral, "w") as target:
            for member in source.infolist():
                data = source.read(member)
                if member.filename == "config.json":
                    data = json.dumps(_without_dtype_policies(json.loads(data))).encode("utf-8")
                target.writestr(member, data)
        return keras.saving.load_model(neutral, compile=compile)


def _without_dtype_policies(config):
    """A saved Keras config without its layers' dtype policies (`DTypePolicy` objects), which
    then follow the global policy when the model is built; tensor dtypes (an input's "int32")
    stay."""
    if isinstance(config, list):
        return [_without_dtype_policies(value) for value in config]
    if not isinstance(config, dict):
        return config
    return {
        key: _without_dtype_policies(value)
        for key, value in config.items()
        if not (key == "dtype" and isinstance(value, dict) and value.get("class_name") == "DTypePolicy")
    }


def from_pretrained(
    path: str | os.PathLike, heads: str = "pretraining"
) -> tuple[keras.Model, TokenizerSettings]:
    """Builds a model from a checkpoint directory (or a checkpoint prefix / .safetensors file).

    Detects the format: an original Google directory (bert_config.json, vocab.txt,
    bert_model.ckpt.*), a Hugging Face BERT directory (config.json, model.safetensors, with
    or without the `bert.` prefix and heads), a keras-hub BERT preset (`save_to_preset`:
    config.json, model.weights.h5, assets/tokenizer/vocabulary.txt; see
    `bert_tf.checkpoints.keras_hub`), or a directory written by `export_pretrained`.
    `heads="pretraining"` returns a `BertPretrainer`, `heads="encoder"` a `BertEncoder`
    (head weights in the checkpoint are then ignored).

    Example:

    >>> model, tokenizer_settings = from_pretrained("uncased_L-12_H-768_A-12")  # doctest: +SKIP
    """
    if heads not in HEADS:
        raise ValueError(f"heads must be one of {HEADS}, got {heads!r}")
    source = _locate(os.fspath(path))
    config = _read_config(source)
    tokenizer_settings = _tokenizer_settings(source, config)
    model = BertPretrainer(config) if heads == "pretraining" else BertEncoder(config)
    _load(model, source)
    return model, tokenizer_settings


# A BertPretrainer's two heads, by the prefix of their original names.
PRETRAINING_HEADS = {"masked_lm": "cls/predictions/", "next_sentence": "cls/seq_relationship/"}


def load_weights(
    model: keras.Model, path: str | os.PathLike, head: TaskHead | None = None, skip_heads: Sequence[str] = ()
) -> None:
    """Loads a Google or Hugging Face checkpoint or a keras-hub preset into an existing model.

    `model` is a `BertPretrainer`, a `BertEncoder`, or a task model (its `.encoder` is
    loaded; with `head`, its head too, see `find_head`). Nothing is assigned unless every
    variable is found with the right shape. `skip_heads` names pretraining heads
    (`PRETRAINING_HEADS`) that a checkpoint lacks and the model keeps as they are.
    """
    _load(model, _locate(os.fspath(path)), head, skip_heads)


def pretraining_heads(path: str | os.PathLike) -> set[str]:
    """The pretraining heads (`PRETRAINING_HEADS`' names) that the checkpoint at `path` carries:
    a Google release has both, transformers' BertForMaskedLM the masked LM's, a
    sentence-transformers folder, a fine-tuned model or a keras-hub backbone none."""
    source = _locate(os.fspath(path))
    if source.kind in ("keras", "keras_hub"):
        return set()
    if source.kind == "huggingface":
        names = {name.replace(".", "/") for name in huggingface.read(source.weights)}
    else:
        names = set(google.read_shapes(source.weights))
    return {
        head for head, prefix in PRETRAINING_HEADS.items() if any(name.startswith(prefix) for name in names)
    }


def _load(
    model: keras.Model, source: _Source, head: TaskHead | None = None, skip_heads: Sequence[str] = ()
) -> None:
    slots = model_slots(model, head)
    skipped = tuple(PRETRAINING_HEADS[name] for name in skip_heads)
    slots = [slot for slot in slots if not slot.name.startswith(skipped)] if skipped else slots
    if source.kind == "google":
        arrays = _read_google(source.weights, slots)
    elif source.kind == "keras":
        arrays = _read_keras(source, slots)
    elif source.kind == "keras_hub":
        encoder = model if hasattr(model, "transformer_layers") else model.encoder
        arrays = _read_keras_hub(source.directory, slots, encoder.config.num_attention_heads)
    else:
        arrays = _read_huggingface(source.weights, slots)
    for slot in [slot for slot in slots if slot.name in arrays]:  # all checks passed: now assign
        value = arrays[slot.name]
        slot.variable.assign(value.T if slot.transposed else value)


# --- locating and configuring ----------------------------------------------------------


def inspect_checkpoint(path: str | os.PathLike) -> tuple[BertConfig, TokenizerSettings]:
    """The config and tokenizer settings of the checkpoint at `path`, after checking that
    its files are whole.

    Cheap (no weight is read): what a program calls before writing anything.
    """
    source = _locate(os.fspath(path))
    config = _read_config(source)
    tokenizer_settings = _tokenizer_settings(source, config)
    _check_files(source)
    return config, tokenizer_settings


@dataclasses.dataclass(frozen=True)
class FoundHead:
    """The task head a checkpoint carries (`find_head`): which of the heads asked about,
    its number of outputs, and its class names where the checkpoint has them (a Hugging
    Face config.json's id2label, in id order; transformers' default names LABEL_0, ...
    included; a keras-hub preset's labels.txt, where bert_tf wrote one), and the sequence
    length its own preprocessor packs to where it has one (a keras-hub preset's)."""

    head: TaskHead
    units: int
    label_names: list[str] | None
    max_seq_length: int | None = None


def find_head(path: str | os.PathLike, heads: Sequence[TaskHead]) -> FoundHead | None:
    """Which of `heads` the checkpoint at `path` carries, or None for a checkpoint without
    a task head (a pretrained model; not a checkpoint: None too).

    A Hugging Face folder says it in config.json: `architectures` (BertForSequenceClassification,
    ...), and for sequence classification `problem_type`, which transformers infers when
    it is missing ("regression" for one label, else "single_label_classification"). An
    original checkpoint says it by the head's variable names (`output_weights`: run_classifier.py,
    `cls/squad/output_weights`: run_squad.py, ...). A keras-hub preset by its task.json: a
    BertTextClassifier has BertForSequenceClassification's head (a linear one of one output:
    regression; a sigmoid one: multi-label). No weight is read.
    """
    try:
        source = _locate(os.fspath(path))
    except CheckpointError:
        return None
    if source.kind == "huggingface":
        return _huggingface_head(source, heads)
    if source.kind == "keras_hub":
        return _keras_hub_head(source, heads)
    try:
        found = google.read_shapes(source.weights) if not google.is_object_based(source.weights) else {}
    except tf.errors.OpError:  # files that are not a checkpoint: loading it says what is wrong
        return None
    for head in heads:
        shape = found.get(f"{head.name}_weights")
        if (
            shape
            and len(shape) == 2
            and head.problem_type in (None, transformers_problem_type(None, shape[0]))
        ):
            return FoundHead(head, int(shape[0]), None)
    return None


def _huggingface_head(source: _Source, heads: Sequence[TaskHead]) -> FoundHead | None:
    config_file = fileio.join(source.directory, "config.json")
    values = fileio.read_json(config_file) if fileio.isfile(config_file) else {}
    architectures = values.get("architectures") or [None]
    matching = [head for head in heads if head.architecture == architectures[0]]
    if not matching:
        return None
    id2label = values.get("id2label")
    labels = None
    if isinstance(id2label, dict) and id2label:
        try:
            labels = [str(id2label[key]) for key in sorted(id2label, key=int)]
        except ValueError:
            raise damaged(config_file, f"id2label keys must be class ids, got {sorted(id2label)}") from None
    units = len(labels) if labels else int(values.get("num_labels", 2))
    problem_type = values.get("problem_type")
    for head in matching:
        if head.problem_type is None or head.problem_type == transformers_problem_type(problem_type, units):
            return FoundHead(head, units, labels)
    known = ", ".join(head.problem_type for head in matching)
    raise CheckpointError(
        f"{config_file}: a {architectures[0]} with problem_type={problem_type!r}, which bert_tf does not "
        f"read; it reads {known}"
    )


def _keras_hub_head(source: _Source, heads: Sequence[TaskHead]) -> FoundHead | None:
    found = keras_hub.read_head(source.directory)
    if found is None:
        return None
    for head in heads:
        if head.architecture == found.architecture and head.problem_type in (None, found.problem_type):
            return FoundHead(head, found.units, found.label_names, found.max_seq_length)
    return None


def _tokenizer_settings(source: _Source, config: BertConfig) -> TokenizerSettings:
    if source.kind == "keras_hub":
        vocab_file = keras_hub.vocab_file(source.directory)
        if vocab_file:
            _check_vocab(vocab_file, config)
        lower_case, reason = keras_hub.lower_case(source.directory) or detect_lower_case(
            source.directory, vocab_file
        )
        return TokenizerSettings(vocab_file, lower_case, reason)
    vocab_file = fileio.join(source.directory, "vocab.txt")
    if not fileio.isfile(vocab_file):
        vocab_file = _vocab_of_tokenizer_json(source.directory)
    if vocab_file:
        _check_vocab(vocab_file, config)
    if source.kind == "keras":  # a fine-tuned model's task.json says how it was tokenized
        task_file = fileio.join(source.directory, KERAS_TASK_FILE)
        lower_case = fileio.read_json(task_file).get("lower_case") if fileio.isfile(task_file) else None
        if isinstance(lower_case, bool):
            return TokenizerSettings(vocab_file, lower_case, f"lower_case in {task_file}")
    lower_case, reason = detect_lower_case(source.directory, vocab_file)
    return TokenizerSettings(vocab_file, lower_case, reason)


def _vocab_of_tokenizer_json(directory: str) -> str | None:
    """The WordPiece vocab of a folder's tokenizer.json as a vocab.txt (in the cache: the
    folder is not written to), or None. transformers 5 saves a BERT tokenizer as
    tokenizer.json alone."""
    path = fileio.join(directory, "tokenizer.json")
    if not fileio.isfile(path):
        return None
    text = fileio.read_text(path)
    try:
        model = json.loads(text).get("model") or {}
    except (json.JSONDecodeError, AttributeError):
        raise damaged(path, "not a JSON object", "download or save the tokenizer again") from None
    vocab = model.get("vocab")
    if model.get("type") != "WordPiece" or not isinstance(vocab, dict):
        return None
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[token] for token in tokens] != list(range(len(tokens))):
        raise damaged(path, "its WordPiece ids are not 0, 1, 2, ...", "download or save the tokenizer again")
    target = cache_dir() / "vocab" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
    if not target.exists():
        fileio.write_text(str(target), "".join(f"{token}\n" for token in tokens))  # whole or absent
    return str(target)


def _check_files(source: _Source) -> None:
    if source.kind == "huggingface":
        integrity.check_safetensors(source.weights)
    elif source.kind == "keras":
        with tempfile.TemporaryDirectory() as local:
            copy = os.path.join(local, KERAS_MODEL_FILE)
            fileio.copy(source.weights, copy)
            integrity.check_keras_archive(copy, display_path=source.weights)
    elif source.kind == "keras_hub":
        keras_hub.check_files(source.directory)
    else:
        integrity.check_tf_checkpoint(source.weights)


def pretraining_export(directory: str) -> str | None:
    """The export/ folder of a pretraining run's model_dir, or None if `directory` is not one.

    A pretraining model_dir holds the run's own (object-based) checkpoints, ckpt-N.*, and
    once the run has finished, export/ with the model in the formats `from_pretrained`
    reads: that is the folder a user pointing at the model_dir means.
    """
    export = fileio.join(directory, "export")
    is_run = fileio.isfile(fileio.join(directory, "bert_config.json")) and (
        fileio.isdir(export) or fileio.glob(fileio.join(directory, "ckpt-*.index"))
    )
    if not is_run or fileio.isfile(fileio.join(directory, "model.safetensors")):
        return None
    if not fileio.isdir(export):
        raise CheckpointError(
            f"{directory} is the model_dir of a pretraining run that has not finished (no export/ in it "
            "yet); rerun bert_tf.pretrain with this --model_dir to finish it, then pass it again"
        )
    return export


def _locate(path: str) -> _Source:
    fileio.check_path(path)
    # ram:// says a file name's prefix is a directory: a checkpoint prefix is not.
    if fileio.isdir(path) and not fileio.exists(path + ".index"):
        export = pretraining_export(path)
        if export:
            logger.info("%s is a pretraining model_dir: using the model in %s", path, export)
            path = export
        directory = path
        preset_weights = keras_hub.locate(directory)  # its config.json is keras-hub's, not transformers'
        if preset_weights:
            return _Source("keras_hub", preset_weights, directory)
        if fileio.isfile(fileio.join(directory, "model.safetensors")):
            return _Source("huggingface", fileio.join(directory, "model.safetensors"), directory)
        if fileio.isfile(fileio.join(directory, "model.safetensors.index.json")):
            raise CheckpointError(
                f"{directory} holds a sharded model.safetensors; BERT models fit in one file: "
                "re-save it with save_pretrained(..., max_shard_size='10GB')"
            )
        prefix = _google_prefix(directory)
        if prefix:
            return _Source("google", prefix, directory)
        if fileio.isfile(fileio.join(directory, KERAS_MODEL_FILE)):
            logger.info("%s holds a fine-tuned model: using its fine-tuned encoder", directory)
            return _Source("keras", fileio.join(directory, KERAS_MODEL_FILE), directory)
        if fileio.isfile(fileio.join(directory, "pytorch_model.bin")):
            raise CheckpointError(
                _PICKLE_MESSAGE.format(path=fileio.join(directory, "pytorch_model.bin"), directory=directory)
            )
        raise CheckpointError(
            f"{directory} holds no BERT checkpoint (looked for model.safetensors, *.ckpt*.index, a "
            f"keras-hub preset's config.json and {KERAS_MODEL_FILE}); it contains {fileio.listdir(directory)[:20]}"
        )
    directory = fileio.dirname(fileio.abspath(path))
    if path.endswith(".safetensors") and fileio.isfile(path):
        return _Source("huggingface", path, directory)
    if path.endswith((".bin", ".pt", ".pth")) and fileio.isfile(path):
        raise CheckpointError(_PICKLE_MESSAGE.format(path=path, directory=directory))
    if fileio.isfile(path + ".index"):
        return _Source("google", path, directory)
    raise CheckpointError(
        f"no checkpoint at {path}: pass a directory, a checkpoint prefix "
        "(such as .../bert_model.ckpt, without .index) or a .safetensors file"
    )


def _google_prefix(directory: str) -> str | None:
    latest = tf.train.latest_checkpoint(directory)
    if latest:
        return latest
    prefixes = [index[: -len(".index")] for index in fileio.glob(fileio.join(directory, "*.index"))]
    if len(prefixes) > 1:
        raise CheckpointError(
            f"{directory} holds several checkpoints {[fileio.basename(p) for p in prefixes]} and no "
            "'checkpoint' file saying which is current; pass the prefix of the one to load"
        )
    return prefixes[0] if prefixes else None


def _read_config(source: _Source) -> BertConfig:
    if source.kind == "keras_hub":
        return keras_hub.read_config(source.directory)
    google_config = fileio.join(source.directory, "bert_config.json")
    hf_config = fileio.join(source.directory, "config.json")
    if source.kind == "google" and fileio.isfile(google_config):
        return BertConfig.from_json_file(google_config)
    if fileio.isfile(hf_config):
        try:
            values = json.loads(fileio.read_text(hf_config))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise damaged(hf_config, f"not valid JSON: {error}", "download or export it again") from None
        if not isinstance(values, dict):
            raise damaged(hf_config, "not a JSON object", "download or export it again")
        return BertConfig.from_hf_dict(values, source=hf_config)
    if fileio.isfile(google_config):
        return BertConfig.from_json_file(google_config)
    raise CheckpointError(f"{source.directory} has no bert_config.json or config.json next to the weights")


def _check_vocab(vocab_file: str, config: BertConfig) -> None:
    lines = len(fileio.read_text(vocab_file).splitlines())
    if lines != config.vocab_size:
        raise CheckpointError(
            f"{vocab_file} has {lines} tokens but the config says vocab_size={config.vocab_size}: the vocab "
            "file is truncated, or does not belong to this checkpoint; copy the checkpoint's own vocab.txt"
        )


def detect_lower_case(directory: str, vocab_file: str | None) -> tuple[bool, str]:
    """(lower_case, how it was decided): tokenizer_config.json's do_lower_case, else
    'uncased'/'cased' in the directory name, else whether the vocab has upper-case tokens."""
    tokenizer_config = fileio.join(directory, "tokenizer_config.json")
    if fileio.isfile(tokenizer_config):
        values = fileio.read_json(tokenizer_config)
        if isinstance(values.get("do_lower_case"), bool):
            return values["do_lower_case"], f"do_lower_case in {tokenizer_config}"
    name = fileio.basename(fileio.abspath(directory)).lower()
    if "uncased" in name:
        return True, f"the directory name {name!r} says uncased"
    if "cased" in name:
        return False, f"the directory name {name!r} says cased"
    if vocab_file:
        tokens = [line.strip() for line in fileio.read_text(vocab_file).splitlines()]
        upper = [t for t in tokens if not (t.startswith("[") and t.endswith("]")) and t.lower() != t]
        if upper:
            return False, f"{vocab_file} has {len(upper)} upper-case tokens (e.g. {upper[:3]}): cased"
        return True, f"{vocab_file} has no upper-case token: uncased"
    return True, "no tokenizer_config.json, vocab.txt or cased/uncased in the name: assumed uncased"


# --- reading and checking ----------------------------------------------------------------


def _check(expected: dict, found: dict, ignored, source: str, what: str) -> None:
    """Raises one CheckpointError listing every missing, unexpected and misshapen variable."""
    missing = [name for name in expected if name not in found]
    unexpected = [name for name in found if name not in expected and not ignored(name)]
    misshapen = [name for name in expected if name in found and tuple(found[name]) != tuple(expected[name])]
    if not (missing or unexpected or misshapen):
        return
    lines = [f"{source} does not fit a {what} of this config; nothing was loaded."]
    if missing:
        lines.append(f"missing ({len(missing)}): " + ", ".join(f"{n} {list(expected[n])}" for n in missing))
    if unexpected:
        lines.append(
            f"unexpected ({len(unexpected)}): " + ", ".join(f"{n} {list(found[n])}" for n in unexpected)
        )
    if misshapen:
        lines.append(
            "wrong shape: "
            + ", ".join(
                f"{n} is {list(found[n])} in the checkpoint, {list(expected[n])} in the model"
                for n in misshapen
            )
        )
    if missing and all("cls" in name.split("/")[0].split(".")[0] for name in missing):
        lines.append("The checkpoint has no pretraining heads: load it with heads='encoder'.")
    elif misshapen:
        lines.append(
            "Check that the config (vocab_size, hidden_size, ...) is the one the checkpoint was trained with."
        )
    raise CheckpointError("\n".join(lines))


def _what(slots: list[Slot]) -> str:
    names = {slot.name for slot in slots}
    if any(slot.is_head for slot in slots):
        return "task model"
    return "BertPretrainer" if any(name.startswith("cls/") for name in names) else "BertEncoder"


def _without_absent_pooler(slots: list[Slot], has_pooler: bool, source: str) -> list[Slot]:
    """`slots` without the pooler when the checkpoint has none (transformers' token and span
    models): it keeps its initial weights, read by no head but a pooled-output one."""
    what = _what(slots)
    with_next_sentence_head = any(slot.name.startswith(PRETRAINING_HEADS["next_sentence"]) for slot in slots)
    if has_pooler or (what == "BertPretrainer" and with_next_sentence_head):
        return slots
    # A new head on this encoder may read the pooler: said louder than for a task head without one.
    log = logger.warning if what == "BertEncoder" else logger.info
    log("%s has no pooler weights: the pooler keeps its initial (random) weights", source)
    return [slot for slot in slots if not slot.name.startswith("bert/pooler/")]


def _read_google(prefix: str, slots: list[Slot]) -> dict[str, np.ndarray]:
    integrity.check_tf_checkpoint(prefix)
    if google.is_object_based(prefix):
        raise CheckpointError(
            f"{prefix} is an object-based TF2 checkpoint (tf.train.Checkpoint); restore it with "
            "tf.train.Checkpoint(model=model).restore(path), or convert it with "
            "bert_tf.checkpoints.export_pretrained"
        )
    found = google.read_shapes(prefix)
    slots = _without_absent_pooler(slots, any(name.startswith("bert/pooler/") for name in found), prefix)
    expected = {slot.name: slot.shape for slot in slots}
    head_free = _what(slots) == "BertEncoder"

    def ignored(name: str) -> bool:
        return head_free and not name.startswith("bert/")  # heads: the pretraining's or a task's

    _check(expected, found, ignored, prefix, _what(slots))
    return google.read_arrays(prefix, expected)


def _read_keras(source: _Source, slots: list[Slot]) -> dict[str, np.ndarray]:
    """The encoder weights of a fine-tuned model's folder; it has no other heads to give.

    Read without the task model's class (a task family's, perhaps one written outside
    bert_tf): the encoder is rebuilt from its part of the saved config and loaded from its
    part of the weights file, which Keras writes as a standalone encoder's.
    """
    if _what(slots) != "BertEncoder":
        heads = "masked-LM and next-sentence heads" if _what(slots) == "BertPretrainer" else "other head"
        raise CheckpointError(
            f"{source.directory} holds a fine-tuned model: its encoder and its task's head, no {heads}; "
            "pass the pretrained checkpoint it was fine-tuned from (its encoder alone is read with "
            "heads='encoder', as the programs that need no more do)"
        )
    encoder = _keras_folder_encoder(source.weights)
    found = {slot.name: slot for slot in encoder_slots(encoder)}
    expected = {slot.name: slot.shape for slot in slots}
    _check(
        expected,
        {name: slot.shape for name, slot in found.items()},
        lambda name: False,
        source.weights,
        "BertEncoder",
    )
    return {name: found[name].read() for name in expected}


def _keras_folder_encoder(path: str) -> BertEncoder:
    """The `BertEncoder` inside a task model's `.keras` file (see `_read_keras`)."""
    import h5py

    with tempfile.TemporaryDirectory() as local:
        copy = os.path.join(local, KERAS_MODEL_FILE)
        fileio.copy(path, copy)
        integrity.check_keras_archive(copy, display_path=path)
        with zipfile.ZipFile(copy) as archive:
            config = json.loads(archive.read("config.json"))
            archive.extract("model.weights.h5", local)
        encoder_config = config.get("config", {}).get("encoder")
        if not isinstance(encoder_config, dict):
            raise CheckpointError(f"{path} holds a {config.get('class_name')}, not a BERT task model")
        encoder = keras.saving.deserialize_keras_object(_without_dtype_policies(encoder_config))
        weights = os.path.join(local, "encoder.weights.h5")
        with (
            h5py.File(os.path.join(local, "model.weights.h5"), "r") as saved,
            h5py.File(weights, "w") as alone,
        ):
            # Keras files a model's layers under their class's snake-case name (BertEncoder:
            # bert_encoder), whatever the layer's own name.
            where = "layers/" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(encoder).__name__).lower()
            group = saved.get(where)
            if group is None:
                raise damaged(path, f"its weights have no {where!r}", "save the model again")
            for name in group:
                saved.copy(group[name], alone, name)
        encoder.load_weights(weights)
    return encoder


def _read_keras_hub(directory: str, slots: list[Slot], heads: int) -> dict[str, np.ndarray]:
    """The weights of a keras-hub preset: the backbone's from model.weights.h5, a head's
    from task.weights.h5, each reshaped to ours (the attention projections are kept per
    head there, for a model of `heads` attention heads)."""
    found = keras_hub.read_shapes(directory, with_task=_what(slots) == "task model")
    keys = {slot.name: keras_hub.weight_key(slot.name, slot.is_head) for slot in slots}
    expected = {
        keys[slot.name]: keras_hub.preset_shape(slot.name, tuple(slot.variable.shape), heads)
        for slot in slots
    }
    _check(expected, found, lambda name: False, directory, _what(slots))
    arrays = keras_hub.read_arrays(directory, keys)
    for slot in slots:  # to the TF1 layout the assignment expects
        value = np.reshape(arrays[slot.name], tuple(slot.variable.shape))
        arrays[slot.name] = value.T if slot.transposed else value
    return arrays


def _read_huggingface(path: str, slots: list[Slot]) -> dict[str, np.ndarray]:
    tensors = huggingface.read(path)  # the whole file, read once: the shapes checked, then assigned
    found = {name: tensor.shape for name, tensor in tensors.items()}
    slots = _without_absent_pooler(slots, any("pooler." in name for name in found), path)
    bert_prefix = any(name.startswith("bert.") for name in found)
    to_hf = {slot.name: slot.hf or hf_name(slot.name, bert_prefix) for slot in slots}
    expected = {
        to_hf[slot.name]: slot.shape[::-1] if hf_transposed(slot.name) else slot.shape for slot in slots
    }
    head_free = _what(slots) == "BertEncoder"

    def ignored(name: str) -> bool:  # for an encoder: whatever is not the encoder's (the heads)
        encoder_name = name.startswith("bert.") or name.split(".")[0] in ("embeddings", "encoder", "pooler")
        return name in huggingface.IGNORED or name in huggingface.TIED or (head_free and not encoder_name)

    _check(expected, found, ignored, path, _what(slots))
    arrays = {}
    for name, hf in to_hf.items():
        value = tensors[hf]
        arrays[name] = value.T if hf_transposed(name) else value
    for tied, name in huggingface.TIED.items():  # a tied copy must equal the weight it copies
        if tied in found and name in arrays:
            copy = tensors[tied]
            if copy.shape != arrays[name].shape or not np.array_equal(copy, arrays[name]):
                raise CheckpointError(
                    f"{path}: {tied} differs from {to_hf[name]}; BERT ties them, so this is not a BERT "
                    "pretraining checkpoint (nothing was loaded)"
                )
    return arrays


# --- exporting -------------------------------------------------------------------------------


def export_pretrained(
    model: keras.Model,
    directory: str | os.PathLike,
    *,
    vocab_file: str | None = None,
    lower_case: bool | None = None,
    formats: tuple[str, ...] = ("google", "huggingface"),
    head: TaskHead | None = None,
    hf_config: dict | None = None,
) -> str:
    """Writes a model so that both the original code and transformers can load it.

    "google": bert_config.json + bert_model.ckpt.{index,data-00000-of-00001} with the
    original variable names and shapes; "huggingface": config.json + model.safetensors.
    The vocab file is copied as vocab.txt and `lower_case` recorded in tokenizer_config.json,
    so `from_pretrained(directory)` restores the tokenizer settings too. A task model
    exports its encoder; with `head` (`TaskHead`) its head too, as `head.architecture`,
    `hf_config` adding to config.json (id2label, problem_type, ...).

    Example:

    >>> export_pretrained(model, "/tmp/my_bert", vocab_file="vocab.txt", lower_case=True)  # doctest: +SKIP
    """
    unknown = sorted(set(formats) - {"google", "huggingface"})
    if unknown or not formats:
        raise ValueError(f"formats must be a non-empty subset of ('google', 'huggingface'), got {formats}")
    directory = os.fspath(directory)
    fileio.makedirs(directory)
    slots = model_slots(model, head)
    if head is not None and not head.pooler:  # as transformers' class: it would warn of unused weights
        slots = [slot for slot in slots if not slot.name.startswith("bert/pooler/")]
    config = model.config if hasattr(model, "config") else model.encoder.config
    arrays = {slot.name: slot.read() for slot in slots}
    if "google" in formats:
        config.to_json_file(fileio.join(directory, "bert_config.json"))
        google.write(fileio.join(directory, "bert_model.ckpt"), arrays)
    if "huggingface" in formats:
        what = _what(slots)
        hf_arrays = {
            slot.hf or hf_name(slot.name, bert_prefix=what != "BertEncoder"): (
                arrays[slot.name].T if hf_transposed(slot.name) else arrays[slot.name]
            )
            for slot in slots
        }
        huggingface.write(fileio.join(directory, "model.safetensors"), hf_arrays)
        architecture = {"BertPretrainer": "BertForPreTraining", "BertEncoder": "BertModel"}.get(what)
        huggingface.write_config(directory, config, architecture or head.architecture, **(hf_config or {}))
    if vocab_file:
        _check_vocab(vocab_file, config)
        target = fileio.join(directory, "vocab.txt")
        if fileio.abspath(vocab_file) != fileio.abspath(target):
            fileio.copy(vocab_file, target)
    if lower_case is not None:
        fileio.write_json(
            fileio.join(directory, "tokenizer_config.json"),
            {"do_lower_case": bool(lower_case), "tokenizer_class": "BertTokenizer"},
        )
    return directory
