"""The fine-tuned model folder: what `bert_tf.finetune` and `model.save` write and every later step reads.

A folder (`OUTPUT_DIR/model/`) holds `model.keras` (the whole Keras task model:
architecture, weights and its preprocessor), `bert_config.json` (the encoder's config),
`vocab.txt` and `task.json` (`bert_tf.tasks.info.FinetunedModelInfo`): everything
fine-tuning on, predicting and the raw-text export (`bert_tf.serving.task`) need besides
the weights. This module is the only one that reads or writes the folder.

The same model also lives in the two checkpoint formats, head included (`FORMATS`;
written by `save_finetuned(..., format=...)`, read back by `load_finetuned` like the
Keras folder): "huggingface", a transformers `BertFor...` folder (config.json with
architectures, id2label/label2id and problem_type; model.safetensors; vocab.txt and
tokenizer_config.json), and "google", an original checkpoint (bert_config.json,
bert_model.ckpt with the original fine-tuning scripts' head names, vocab.txt). Both get
task.json too, for what neither format holds (the task, max_seq_length, the family's
options; the original format's label names). A folder that transformers or the original
scripts wrote, without task.json, is read as well: its kind from its head (the families'
`head`), its class names from id2label (original checkpoints: the class ids), the rest
the family's defaults.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import keras

from bert_tf import fileio
from bert_tf.checkpoints import (
    FoundHead,
    export_pretrained,
    find_head,
    inspect_checkpoint,
    is_keras_hub_preset,
    load_weights,
)
from bert_tf.checkpoints.pretrained import KERAS_MODEL_FILE, load_keras_archive
from bert_tf.errors import UsageError, damaged
from bert_tf.models import BertEncoder
from bert_tf.tasks import registry
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.info import FORMAT_VERSION, TASK_FILE, FinetunedModelInfo
from bert_tf.tasks.preprocessor import TaskPreprocessor
from bert_tf.tokenization import BertTokenizer

__all__ = [
    "FORMATS",
    "FORMAT_VERSION",
    "MODEL_FILE",
    "TASK_FILE",
    "FinetunedModelInfo",
    "check_save_folder",
    "is_finetuned_dir",
    "load_finetuned",
    "read_info",
    "save_finetuned",
]

MODEL_FILE = KERAS_MODEL_FILE
FORMATS = ("keras", "huggingface", "google")
# What a run logs into its folder (bert_tf.training.progress): kept when a model is saved there.
RUN_FILES = ("metrics.jsonl", "logs")


def is_finetuned_dir(directory: str | None) -> bool:
    """Whether `directory` holds a fine-tuned model: a folder `save_finetuned` wrote
    (model.keras and task.json), or a Hugging Face or original checkpoint with a task head."""
    if not directory:
        return False
    if _is_keras_folder(directory):
        return True
    return _found_head(directory) is not None


def _is_keras_folder(directory: str) -> bool:
    return all(fileio.isfile(fileio.join(directory, name)) for name in (MODEL_FILE, TASK_FILE))


def _found_head(directory: str) -> tuple[str, FoundHead] | None:
    """(kind, head) of a checkpoint folder with a task head, else None."""
    heads = registry.task_heads()
    found = find_head(directory, list(heads.values()))
    if found is None:
        return None
    return next(kind for kind, head in heads.items() if head == found.head), found


def read_info(directory: str) -> FinetunedModelInfo:
    """The `FinetunedModelInfo` of a fine-tuned model folder (its task.json; a checkpoint
    with a task head: see the module docstring)."""
    if not _is_keras_folder(directory) and _found_head(directory):
        return _read_checkpoint_folder(directory)[0]
    return _read_task_json(directory)


def _read_task_json(directory: str) -> FinetunedModelInfo:
    path = fileio.join(directory, TASK_FILE)
    try:
        if not fileio.exists(path):
            raise FileNotFoundError(path)
        values = json.loads(fileio.read_text(path))
    except FileNotFoundError:
        raise TaskDataError(
            f"no {TASK_FILE} in {directory}; is it the model/ folder of a fine-tuning run?"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise damaged(path, f"not valid JSON: {error}", "save the model again") from None
    info = FinetunedModelInfo.from_json(values, path)
    try:
        registry.family_of_info(info)  # a family written outside bert_tf is imported here
    except UsageError as error:
        if info.family is None:  # an unknown kind: the file is not one bert_tf wrote
            raise damaged(path, f"unknown kind {info.kind!r}: {error}", "save the model again") from None
        raise UsageError(f"{path} names the task family {info.family}: {error}") from None
    return info


def save_finetuned(directory: str, model, format: str = "keras") -> str:
    """Saves a fine-tuned task model (carrying its preprocessor) so that it can be rebuilt
    without the run's flags; `load_finetuned(directory)` reads the folder back.

    `format` (`FORMATS`): "keras" (model.keras), or one of the checkpoint formats with the
    head, "huggingface" or "google" (see the module docstring). The Keras folder is written
    whole or not at all, replacing what `directory` held (see `check_save_folder` first); the
    curves of a run logged into the folder (metrics.jsonl and logs/: `fit(output_dir=...)`) stay.
    """
    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    tokenizer, info = model.preprocessor.tokenizer, model.preprocessor.info
    if format != "keras":
        return _save_checkpoint(directory, model, tokenizer, info, format)
    with tempfile.TemporaryDirectory() as local:
        model.save(os.path.join(local, MODEL_FILE))
        model.encoder.config.to_json_file(os.path.join(local, "bert_config.json"))
        fileio.copy(tokenizer.vocab_file, os.path.join(local, "vocab.txt"))
        for name in RUN_FILES:  # the curves of the fit that made the model, if logged here
            if fileio.isfile(fileio.join(directory, name)):
                fileio.copy(fileio.join(directory, name), os.path.join(local, name))
            elif fileio.isdir(fileio.join(directory, name)):
                fileio.copy_tree(fileio.join(directory, name), os.path.join(local, name))
        fileio.write_json(os.path.join(local, TASK_FILE), info.to_json())
        fileio.publish_folder(local, directory, last=(TASK_FILE,))
    return directory


def check_save_folder(directory: str, overwrite: bool) -> None:
    """UsageError unless a fine-tuned model may be saved to `directory`: a new or empty folder,
    one that holds only a run's curves (`RUN_FILES`), or, with `overwrite`, a fine-tuned model
    (which is then replaced). A folder of other files is never replaced."""
    if fileio.isfile(directory):
        raise UsageError(f"{directory} is a file; save the model to a folder")
    if not fileio.isdir(directory):
        return
    if is_finetuned_dir(directory):
        if overwrite:
            return
        info = read_info(directory)
        raise UsageError(
            f"{directory} holds a fine-tuned model already ({info.kind}, task {info.task!r}); pass "
            "overwrite=True to replace it, or save to another folder"
        )
    others = sorted(set(fileio.listdir(directory)) - set(RUN_FILES) - {f"{name}/" for name in RUN_FILES})
    if others:
        raise UsageError(
            f"{directory} holds other files ({', '.join(others[:5])}{', ...' if len(others) > 5 else ''}), "
            "not a fine-tuned model; save to a new or empty folder"
        )


def load_finetuned(directory: str, compile: bool = True) -> keras.Model:
    """The Keras task model, carrying its preprocessor (tokenizer and task.json), of a
    `save_finetuned` folder, or of a Hugging Face or original checkpoint with a task head
    (not compiled).

    `compile=False` skips the saved optimizer, loss and metrics (serving needs none).
    """
    if not _is_keras_folder(directory) and _found_head(directory):
        return _load_checkpoint_folder(directory)
    path = fileio.join(directory, MODEL_FILE)
    if not fileio.isfile(path):
        raise TaskDataError(f"no {MODEL_FILE} in {directory}; is it the model/ folder of a fine-tuning run?")
    info = read_info(directory)  # imports its family, which registers its model class
    model = load_keras_archive(path, compile=compile)
    # The folder's vocab.txt and task.json are the model's (a file written before task models
    # carried their preprocessor has none inside).
    tokenizer = BertTokenizer(fileio.join(directory, "vocab.txt"), lower_case=info.lower_case)
    model.preprocessor = TaskPreprocessor(info, tokenizer)
    _check_labels(info, model, fileio.join(directory, TASK_FILE))
    return model


def _check_labels(info: FinetunedModelInfo, model, path: str) -> None:
    """TaskDataError unless task.json names one label per class of the model's head, for the
    kinds whose classes have names (a class id without one fails deep in a served graph)."""
    family = model.preprocessor.family()
    head = family.head(info.kind)
    if not family.needs_label_list or head is None:
        return
    units = int(keras.ops.shape(model.get_layer(head.layer).kernel)[-1])
    labels = info.label_list
    if labels is not None and len(labels) == units:
        return
    named = "no labels" if not labels else f"{len(labels)} labels"
    raise TaskDataError(
        f'{path} names {named} (label_list) for the model\'s {units} classes; add "label_list": '
        f"[the {units} label names, in the order of the model's classes] to it, or fine-tune the model again"
    )


# --- the checkpoint formats, head included -------------------------------------------------


def _save_checkpoint(directory: str, model, tokenizer, info: FinetunedModelInfo, format: str) -> str:
    head = registry.family_of_info(info).head(info.kind)
    if head is None:
        raise UsageError(
            f"a {info.kind} model's head has no place in the {format} format; export it with --kind=task"
        )
    hf_config: dict[str, Any] = {}
    if info.label_list is not None:
        hf_config["id2label"] = {str(i): label for i, label in enumerate(info.label_list)}
        hf_config["label2id"] = {label: i for i, label in enumerate(info.label_list)}
    else:  # transformers sizes its regression and span heads by num_labels
        hf_config["num_labels"] = int(keras.ops.shape(model.get_layer(head.layer).kernel)[-1])
    if head.problem_type:
        hf_config["problem_type"] = head.problem_type
    export_pretrained(
        model,
        directory,
        vocab_file=tokenizer.vocab_file,
        lower_case=tokenizer.lower_case,
        formats=(format,),
        head=head,
        hf_config=hf_config,
    )
    fileio.write_json(fileio.join(directory, TASK_FILE), info.to_json())
    return directory


def _read_checkpoint_folder(directory: str):
    """(task.json, tokenizer, head, encoder config) of a checkpoint folder with a task head."""
    kind, found = _found_head(directory)
    config, checkpoint = inspect_checkpoint(directory)  # also: its files are whole
    if not checkpoint.vocab_file:
        raise TaskDataError(
            f"{directory} has no vocab.txt (nor a WordPiece tokenizer.json); copy the vocab the model "
            "was trained with into it"
        )
    head = found.head
    # ours: what the format does not hold (a keras-hub preset's task.json is keras-hub's own)
    ours = fileio.isfile(fileio.join(directory, TASK_FILE)) and not is_keras_hub_preset(directory)
    if ours:
        info = _read_task_json(directory)
        # Kinds may share a head's names (an original classifier and regressor); task.json tells.
        head = registry.family_of_info(info).head(info.kind)
        if head is None or (head.name, head.architecture) != (found.head.name, found.head.architecture):
            raise damaged(
                fileio.join(directory, TASK_FILE),
                f"it says kind {info.kind!r} but the checkpoint holds a {kind} head",
                "export the model again",
            )
        kind = info.kind
    else:  # written by transformers, the original scripts or keras-hub: the family's defaults
        family = registry.family_for_kind(kind)
        task = kind if kind in family.tasks else family.default_task
        max_seq_length = min(
            found.max_seq_length or family.default_max_seq_length, config.max_position_embeddings
        )
        info = FinetunedModelInfo(
            task, kind, None, checkpoint.lower_case, max_seq_length, family=family.reference()
        )
    tokenizer = BertTokenizer(checkpoint.vocab_file, lower_case=info.lower_case)
    family = registry.family_of_info(info).for_model(info, tokenizer)
    if family.needs_label_list:
        labels = found.label_names or info.label_list or [str(i) for i in range(found.units)]
        if len(labels) != found.units:
            raise damaged(
                fileio.join(directory, TASK_FILE),
                f"it names {len(labels)} classes but the head has {found.units}",
                "export the model again",
            )
        info = info.replace(label_list=list(labels))
        family.label_list = list(labels)
    if not ours:  # the family's own fields: its defaults
        info = family.task_info()
    return info, tokenizer, head, config


def _load_checkpoint_folder(directory: str) -> keras.Model:
    info, tokenizer, head, config = _read_checkpoint_folder(directory)
    family = registry.family_of_info(info).for_model(info, tokenizer)
    model = family.build_model(BertEncoder(config), preprocessor=TaskPreprocessor(info, tokenizer))
    load_weights(model, directory, head=head)
    return model
