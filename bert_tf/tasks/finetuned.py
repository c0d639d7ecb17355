"""The fine-tuned model folder: what `bert_tf.finetune` saves and every later step reads.

A folder (`OUTPUT_DIR/model/`) holds `model.keras` (the whole Keras task model:
architecture and weights), `bert_config.json` (the encoder's config), `vocab.txt` and
`task.json`, the `FinetunedModelInfo` below: everything fine-tuning on, predicting and
the raw-text export (`bert_tf.serving.task`) need besides the weights. This module is
the only one that reads or writes the folder.

The same model also lives in the two checkpoint formats, head included (`FORMATS`;
written by `save_finetuned(..., format=...)`, read back by `load_finetuned` like the
Keras folder): "huggingface", a transformers `BertFor...` folder (config.json with
architectures, id2label/label2id and problem_type; model.safetensors; vocab.txt and
tokenizer_config.json), and "google", an original checkpoint (bert_config.json,
bert_model.ckpt with the original fine-tuning scripts' head names, vocab.txt). Both get
task.json too, for what neither format holds (the task, max_seq_length, the SQuAD
settings; the original format's label names). A folder that transformers or the original
scripts wrote, without task.json, is read as well: its kind from its head
(`bert_tf.tasks.families.task_heads`), its class names from id2label (original
checkpoints: the class ids), the rest fine-tuning's defaults.

task.json is versioned (`format_version`); a file without one is version 1, the format
before the field existed, and reads unchanged.

Example:

>>> info = FinetunedModelInfo(task="mrpc", kind=TaskKind.CLASSIFICATION, label_list=["0", "1"],
...                           lower_case=True, max_seq_length=128)
>>> FinetunedModelInfo.from_json(info.to_json()) == info
True
>>> sorted(info.to_json())
['format_version', 'kind', 'label_list', 'lower_case', 'max_seq_length', 'task']
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from typing import Any

import keras

# Imported for their side effect too: they register the serializable model, optimizer,
# schedule and metric classes that model.keras names.
import bert_tf.models  # noqa: F401
import bert_tf.tasks.models  # noqa: F401
import bert_tf.training.optimization  # noqa: F401
from bert_tf import fileio
from bert_tf.checkpoints import (
    FoundHead,
    TaskHead,
    export_pretrained,
    find_head,
    inspect_checkpoint,
    is_keras_hub_preset,
    load_weights,
)
from bert_tf.checkpoints.integrity import check_keras_archive
from bert_tf.config import BertConfig
from bert_tf.errors import UsageError, damaged
from bert_tf.models import BertEncoder
from bert_tf.tasks.families import family_for_kind, task_heads
from bert_tf.tasks.families.classification import DEFAULT_THRESHOLD
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.kinds import TaskKind
from bert_tf.tasks.settings import SQUAD_DOC_STRIDE, FinetuneSettings
from bert_tf.tokenization import BertTokenizer

MODEL_FILE = "model.keras"
TASK_FILE = "task.json"
FORMATS = ("keras", "huggingface", "google")
FORMAT_VERSION = 1
# What every task.json holds; the other fields are a family's (its `task_json_fields`).
_COMMON_FIELDS = ("task", "kind", "label_list", "lower_case", "max_seq_length", "format_version")


@dataclasses.dataclass(frozen=True)
class FinetunedModelInfo:
    """task.json: the task a model was fine-tuned for and how its text becomes features.

    The other fields are a task family's (`bert_tf.tasks.families`), saved for its kinds
    only: the span fields (SQuAD), whose defaults are fine-tuning's and the original
    run_squad's, which a task.json written before they were saved is read with;
    `text_b_column`, the second text's column of own-data pair tasks (GLUE tasks know
    theirs); `threshold`, a multi-label model's decision threshold; `class_weights`, the
    per-label weights a classifier was trained with (a record only); `doc_stride` and
    `window_pooling` of a classifier or tagger trained on long texts in windows (absent:
    texts are cut at max_seq_length).

    A multi-label model is one whose `kind` is "multi_label" (`TaskKind.MULTI_LABEL`): a
    `BertClassifier` whose logits are read through a sigmoid, one per label.
    """

    task: str
    kind: TaskKind
    label_list: list[str] | None
    lower_case: bool
    max_seq_length: int
    text_b_column: str | None = None
    # Windows of long texts: SQuAD's stride (128 where a task.json lacks it); classification,
    # regression and token tagging: the stride, None without windows, and how a classifier's
    # windows combine.
    doc_stride: int | None = None
    window_pooling: str | None = None
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0
    threshold: float | None = None
    class_weights: list[float] | None = None
    format_version: int = FORMAT_VERSION

    def __post_init__(self):
        if self.kind == TaskKind.SPAN and self.doc_stride is None:  # SQuAD always reads windows
            object.__setattr__(self, "doc_stride", SQUAD_DOC_STRIDE)

    def to_json(self) -> dict[str, Any]:
        """The task.json content: the common fields, and those of the kind's family that are set
        (span models: the span fields; own-data pair tasks: text_b_column)."""
        values = dataclasses.asdict(self)
        values["kind"] = self.kind.value
        saved = family_for_kind(self.kind).task_json_fields
        for name in [name for name in values if name not in _COMMON_FIELDS]:
            if name not in saved or values[name] is None:
                del values[name]
        return values

    @classmethod
    def from_json(cls, values: Any, source: str = TASK_FILE) -> FinetunedModelInfo:
        """Reads task.json content, any version up to FORMAT_VERSION; raises DamagedFileError
        (naming `source`) for content that is not a task description of a known version."""
        if not isinstance(values, dict):
            raise damaged(source, "not a task description", "save the model again")
        version = values.get("format_version", 1)  # files from before the field are version 1
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
            raise damaged(
                source,
                f"format_version {version!r}; this bert_tf reads versions 1 to {FORMAT_VERSION}",
                "update bert_tf, or save the model again with this one",
            )
        missing = [name for name in ("task", "kind", "lower_case", "max_seq_length") if name not in values]
        if missing:
            raise damaged(source, f"not a task description: no {', '.join(missing)}", "save the model again")
        try:
            kind = TaskKind(values["kind"])
        except ValueError:
            raise damaged(
                source,
                f"unknown kind {values['kind']!r}, not one of {', '.join(TaskKind)}",
                "save the model again",
            ) from None
        fields = {field.name for field in dataclasses.fields(cls)}
        known = {name: value for name, value in values.items() if name in fields}
        known.setdefault("label_list", None)  # absent: no labels (what needs them says so)
        info = cls(**{**known, "kind": kind, "format_version": version})
        info._check(source)
        return info

    def _check(self, source: str) -> None:
        labels = self.label_list
        wrong = [
            name
            for name, ok in (
                ("task", isinstance(self.task, str) and self.task),
                ("lower_case", isinstance(self.lower_case, bool)),
                ("max_seq_length", isinstance(self.max_seq_length, int) and self.max_seq_length > 0),
                (
                    "threshold",
                    self.threshold is None
                    or (isinstance(self.threshold, (int, float)) and 0 < self.threshold < 1),
                ),
                (
                    "label_list",
                    labels is None or (isinstance(labels, list) and all(isinstance(x, str) for x in labels)),
                ),
            )
            if not ok
        ]
        if wrong:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in wrong)
            raise damaged(source, f"not a task description: {shown}", "save the model again")


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


def _found_head(directory: str) -> tuple[TaskKind, FoundHead] | None:
    """(kind, head) of a checkpoint folder with a task head, else None."""
    heads = task_heads()
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
    return FinetunedModelInfo.from_json(values, path)


def task_info(settings, family, tokenizer) -> FinetunedModelInfo:
    """The task.json of a model fine-tuned with `settings` (a run's `FinetuneSettings`),
    `family` (its task family, `bert_tf.tasks.families`: kind, labels and the family's
    own fields) and `tokenizer`."""
    return FinetunedModelInfo(
        task=settings.task,
        kind=TaskKind(family.kind),
        label_list=list(family.label_list) if family.label_list is not None else None,
        lower_case=bool(tokenizer.lower_case),
        max_seq_length=settings.max_seq_length,
        **family.task_json_values(settings),
    )


def save_finetuned(directory: str, model, tokenizer, info: FinetunedModelInfo, format: str = "keras") -> str:
    """Saves a fine-tuned model so that it can be rebuilt without the run's flags.

    `info` is its task.json (`task_info`); `load_finetuned(directory)` reads the folder back.
    `format` (`FORMATS`): "keras" (model.keras), or one of the checkpoint formats with the
    head, "huggingface" or "google" (see the module docstring).
    """
    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    if format != "keras":
        return _save_checkpoint(directory, model, tokenizer, info, format)
    fileio.makedirs(directory)
    # Keras writes model.keras as a zip through a local file; copied whole to any filesystem.
    with tempfile.TemporaryDirectory() as local:
        model.save(os.path.join(local, MODEL_FILE))
        fileio.copy(os.path.join(local, MODEL_FILE), fileio.join(directory, MODEL_FILE))
    model.encoder.config.to_json_file(fileio.join(directory, "bert_config.json"))
    fileio.copy(tokenizer.vocab_file, fileio.join(directory, "vocab.txt"))
    fileio.write_json(fileio.join(directory, TASK_FILE), info.to_json())
    return directory


def load_finetuned(
    directory: str, compile: bool = True
) -> tuple[keras.Model, BertTokenizer, FinetunedModelInfo]:
    """(Keras model, BertTokenizer, FinetunedModelInfo) from a `save_finetuned` folder, or
    a Hugging Face or original checkpoint with a task head (not compiled).

    `compile=False` skips the saved optimizer, loss and metrics (serving needs none).
    """
    if not _is_keras_folder(directory) and _found_head(directory):
        return _load_checkpoint_folder(directory)
    path = fileio.join(directory, MODEL_FILE)
    if not fileio.isfile(path):
        raise TaskDataError(f"no {MODEL_FILE} in {directory}; is it the model/ folder of a fine-tuning run?")
    info = read_info(directory)
    with tempfile.TemporaryDirectory() as local:
        # Keras reads model.keras as a local zip; copied whole from any filesystem.
        fileio.copy(path, os.path.join(local, MODEL_FILE))
        check_keras_archive(os.path.join(local, MODEL_FILE), display_path=path)
        model = keras.saving.load_model(os.path.join(local, MODEL_FILE), compile=compile)
    tokenizer = BertTokenizer(fileio.join(directory, "vocab.txt"), lower_case=info.lower_case)
    _check_labels(info, model, tokenizer, fileio.join(directory, TASK_FILE))
    return model, tokenizer, info


def _check_labels(info: FinetunedModelInfo, model, tokenizer, path: str) -> None:
    """TaskDataError unless task.json names one label per class of the model's head, for the
    kinds whose classes have names (a class id without one fails deep in a served graph)."""
    if not family_for_kind(info.kind).for_model(info, tokenizer).needs_label_list:
        return
    head = family_for_kind(info.kind).head(info.kind)
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
    head = family_for_kind(info.kind).head(info.kind)
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


def _read_checkpoint_folder(directory: str) -> tuple[FinetunedModelInfo, BertTokenizer, TaskHead, BertConfig]:
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
    if fileio.isfile(fileio.join(directory, TASK_FILE)) and not is_keras_hub_preset(directory):
        info = _read_task_json(directory)
        # Kinds may share a head's names (an original classifier and regressor); task.json tells.
        head = family_for_kind(info.kind).head(info.kind)
        if (head.name, head.architecture) != (found.head.name, found.head.architecture):
            raise damaged(
                fileio.join(directory, TASK_FILE),
                f"it says kind {info.kind.value!r} but the checkpoint holds a {kind.value} head",
                "export the model again",
            )
        kind = info.kind
    else:  # written by transformers, the original scripts or keras-hub: fine-tuning's defaults
        family = family_for_kind(kind)
        task = kind.value if kind.value in family.tasks else family.default_task
        max_seq_length = min(
            found.max_seq_length or FinetuneSettings(task=task, output_dir="-").max_seq_length,
            config.max_position_embeddings,
        )
        info = FinetunedModelInfo(task, kind, None, checkpoint.lower_case, max_seq_length)
        if kind == TaskKind.MULTI_LABEL:  # transformers' multi-label models: sigmoid above 0.5
            info = dataclasses.replace(info, threshold=DEFAULT_THRESHOLD)
    tokenizer = BertTokenizer(checkpoint.vocab_file, lower_case=info.lower_case)
    if family_for_kind(kind).for_model(info, tokenizer).needs_label_list:
        labels = found.label_names or info.label_list or [str(i) for i in range(found.units)]
        if len(labels) != found.units:
            raise damaged(
                fileio.join(directory, TASK_FILE),
                f"it names {len(labels)} classes but the head has {found.units}",
                "export the model again",
            )
        info = dataclasses.replace(info, label_list=list(labels))
    return info, tokenizer, head, config


def _load_checkpoint_folder(directory: str) -> tuple[keras.Model, BertTokenizer, FinetunedModelInfo]:
    info, tokenizer, head, config = _read_checkpoint_folder(directory)
    family = family_for_kind(info.kind).for_model(info, tokenizer)
    model = family.build_model(BertEncoder(config))
    load_weights(model, directory, head=head)
    return model, tokenizer, info
