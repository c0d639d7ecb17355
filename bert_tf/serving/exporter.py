"""`export_saved_model`: one call from a checkpoint to a SavedModel directory of any kind.

Kinds (the signatures of each are documented in the module that builds it):
  - "preprocessor" (`bert_tf.serving.preprocessor`): strings -> packed inputs.
  - "encoder" (`bert_tf.serving.encoder`): packed inputs -> encoder outputs.
  - "mlm" (`bert_tf.serving.mlm`): text with [MASK] -> top-k tokens per mask.
  - "task" (`bert_tf.serving.task`): raw strings -> task predictions, from a fine-tuned
    model directory written by `bert_tf.finetune`.
  - "huggingface", "google": not a SavedModel but a fine-tuned model with its head, as a
    transformers `BertFor...` folder or an original checkpoint (`bert_tf.tasks.finetuned`).
  - "tflite" (`bert_tf.serving.litert_conversion`): not a SavedModel but a LiteRT file of a fine-tuned
    model, token ids in.
  - "keras_hub" (`bert_tf.checkpoints.keras_hub_export`): a keras-hub preset folder: a fine-tuned
    classifier (regression, multi-label) as a `BertTextClassifier` with its preprocessor,
    any other model as a `BertBackbone` with its tokenizer.

`quantize="int8"` stores the encoder's dense kernels of a "task" or "encoder" export as int8
(`bert_tf.serving.quantize`); with `dev_file` a task model is scored before and after, and
refused if it loses more than a point (unless `accept_accuracy_loss`). For "tflite":
"int8" (dynamic range) or "float16", checked on `dev_file` the same way.

Example (a randomly initialised tiny model saved as a checkpoint first):

>>> path = export_saved_model("encoder", "/path/to/checkpoint_dir", "/tmp/bert_encoder")  # doctest: +SKIP
"""

from __future__ import annotations

import logging

import tensorflow as tf

from bert_tf import fileio
from bert_tf.checkpoints import keras_hub_export
from bert_tf.config import BertConfig
from bert_tf.serving import litert_conversion, task
from bert_tf.serving import quantize as int8
from bert_tf.serving.encoder import EncoderServing
from bert_tf.serving.loading import check_init_checkpoint, load_pretrained
from bert_tf.serving.mlm import FillMask
from bert_tf.serving.preprocessor import BertPreprocessor
from bert_tf.serving.saving import (
    ExportError,
    atomic_export_dir,
    check_export_dir,
    check_seq_length,
    export_module,
)
from bert_tf.serving.settings import QUANTIZABLE
from bert_tf.tasks import registry
from bert_tf.tasks.finetuned import is_finetuned_dir, load_finetuned, save_finetuned
from bert_tf.tokenization import BertTokenizer

logger = logging.getLogger(__name__)

KINDS = ("preprocessor", "encoder", "mlm", "task", "huggingface", "google", "tflite", "keras_hub")
DEFAULT_SEQ_LENGTH = 128


def export_saved_model(
    kind: str,
    init_checkpoint: str,
    export_dir: str,
    seq_length: int | None = None,
    overwrite: bool = False,
    top_k: int = 5,
    quantize: str | None = None,
    dev_file: str | None = None,
    accept_accuracy_loss: bool = False,
) -> str:
    """Builds the `kind` SavedModel from `init_checkpoint` and writes it to `export_dir`.

    Returns the absolute export directory. Raises ExportError (with what to change) for
    a missing checkpoint, an existing non-empty export_dir without `overwrite`, or a
    seq_length above the model's max_position_embeddings. seq_length None means 128 (or
    the model's max_position_embeddings where fewer), or for "task" the fine-tuned
    max_seq_length. Nothing is left at
    `export_dir` if the export fails.
    """
    family_export = registry.family_export(kind) if kind not in KINDS else None
    if kind not in KINDS and family_export is None:
        raise ExportError(
            f"unknown --kind={kind!r}; use one of {', '.join((*KINDS, *registry.export_kinds()))}"
        )
    check_export_dir(
        fileio.abspath(fileio.check_path(export_dir)), overwrite
    )  # fail before loading a big model
    check_init_checkpoint(init_checkpoint)
    if quantize is not None and quantize not in QUANTIZABLE.get(kind, ()):
        raise ExportError(f"--kind={kind} cannot be quantized with --quantize={quantize}")
    if dev_file:  # before a big model is loaded
        fileio.check_path(dev_file)
    if family_export is not None:
        return export_family_kind(kind, *family_export, init_checkpoint, export_dir, overwrite)
    if kind == "tflite":
        task.check_finetuned_dir(init_checkpoint, kind)
        return litert_conversion.export_tflite(
            init_checkpoint, export_dir, seq_length, quantize, overwrite, dev_file, accept_accuracy_loss
        )
    if kind == "task" and quantize:
        return export_int8_task(
            init_checkpoint, export_dir, seq_length, overwrite, dev_file, accept_accuracy_loss
        )
    if kind == "task":
        return task.export_task(init_checkpoint, export_dir, seq_length=seq_length, overwrite=overwrite)
    if kind in ("huggingface", "google"):
        task.check_finetuned_dir(init_checkpoint, kind)
        model = load_finetuned(init_checkpoint, compile=False)
        return export_checkpoint(kind, model, export_dir, overwrite)
    if kind == "keras_hub":
        return export_keras_hub_preset(init_checkpoint, export_dir, seq_length, overwrite)
    model, config, settings = load_pretrained(init_checkpoint, "pretraining" if kind == "mlm" else "encoder")
    if seq_length is None:
        seq_length = min(DEFAULT_SEQ_LENGTH, config.max_position_embeddings)
    info = {"init_checkpoint": fileio.abspath(init_checkpoint)}
    if quantize:
        int8.quantize_encoder(model)
        info["quantize"] = quantize
    return export_from_model(
        kind,
        model,
        config,
        settings.vocab_file,
        settings.lower_case,
        export_dir,
        seq_length=seq_length,
        overwrite=overwrite,
        top_k=top_k,
        info=info,
    )


def export_family_kind(
    kind: str, family, write, init_checkpoint: str, export_dir: str, overwrite: bool
) -> str:
    """A task family's own export kind (`TaskFamily.export_kinds`) of a fine-tuned model of that family."""
    task.check_finetuned_dir(init_checkpoint, kind)
    model = load_finetuned(init_checkpoint, compile=False)
    if registry.family_of_info(model.task_info) is not family:
        raise ExportError(
            f"--kind={kind} exports models of the {family.name or family.reference()} task family; "
            f"{init_checkpoint} holds a {model.task_info.kind} model: export it with --kind=task or huggingface"
        )
    return write(model, export_dir, overwrite)


def export_int8_task(
    init_checkpoint: str,
    export_dir: str,
    seq_length: int | None = None,
    overwrite: bool = False,
    dev_file: str | None = None,
    accept_accuracy_loss: bool = False,
) -> str:
    """The task export of a fine-tuned model whose encoder's dense kernels are int8; with
    `dev_file`, only if it scores within a point of the float model there (or
    `accept_accuracy_loss`)."""
    task.check_finetuned_dir(init_checkpoint, "task")
    model = load_finetuned(init_checkpoint, compile=False)
    tokenizer, info = model.tokenizer, model.task_info
    float_scores = int8.score(model, tokenizer, info, dev_file) if dev_file else None
    int8.quantize_encoder(model)
    if dev_file:
        int8_scores = int8.score(model, tokenizer, info, dev_file)
        logger.info("%s", int8.check_accuracy(float_scores, int8_scores, dev_file, accept_accuracy_loss))
    else:
        logger.info("int8 accuracy not checked: pass --dev_file to score it against the float model")
    return task.export_task_model(
        model,
        tokenizer,
        info,
        export_dir,
        seq_length,
        overwrite,
        source=fileio.abspath(init_checkpoint),
        extra_info={"quantize": "int8"},
    )


def export_from_model(
    kind: str,
    model,
    config: BertConfig,
    vocab_file: str,
    lower_case: bool,
    export_dir: str,
    seq_length: int = 128,
    overwrite: bool = False,
    top_k: int = 5,
    info: dict | None = None,
) -> str:
    """Exports an in-memory model (a BertEncoder, or a BertPretrainer for "mlm").

    What `export_saved_model` does after loading the checkpoint; usable directly on a
    model just trained in the same process. Returns the absolute export directory.
    """
    check_seq_length(seq_length, config)
    info = dict(info or {})
    if kind == "mlm":
        info["top_k"] = top_k

    def build(vocab_copy: str) -> tf.Module:
        return build_module(kind, model, config, vocab_copy, lower_case, seq_length, top_k)

    return export_module(build, kind, config, vocab_file, lower_case, export_dir, seq_length, overwrite, info)


def export_checkpoint(kind: str, model, export_dir: str, overwrite: bool = False) -> str:
    """Writes a fine-tuned task model with its head in the `kind` checkpoint format
    ("huggingface" or "google"), all at once or not at all; returns the absolute directory."""
    export_dir = fileio.abspath(fileio.check_path(export_dir))
    with atomic_export_dir(export_dir, overwrite) as staging:
        save_finetuned(staging, model, format=kind)
    return export_dir


def export_keras_hub_preset(
    init_checkpoint: str, export_dir: str, seq_length: int | None = None, overwrite: bool = False
) -> str:
    """--kind=keras_hub: a fine-tuned model or a pretrained checkpoint as a keras-hub preset
    folder, all at once or not at all; returns the absolute directory."""
    keras_hub_export.import_keras_hub()  # before a big model loads
    if is_finetuned_dir(init_checkpoint):
        model = load_finetuned(init_checkpoint, compile=False)
        return export_keras_hub_model(model, export_dir, seq_length, overwrite)
    if seq_length is not None:
        raise ExportError(_NO_PREPROCESSOR)
    encoder, _, settings = load_pretrained(init_checkpoint, "encoder")
    with atomic_export_dir(export_dir, overwrite) as staging:
        keras_hub_export.export_keras_hub(
            encoder, staging, vocab_file=settings.vocab_file, lower_case=settings.lower_case
        )
    return fileio.abspath(export_dir)


_NO_PREPROCESSOR = (
    "--max_seq_length sets the preprocessor of a keras-hub classifier preset; this model is written as a "
    "BertBackbone preset, which has none: drop --max_seq_length"
)


def export_keras_hub_model(model, export_dir: str, seq_length: int | None = None, overwrite=False) -> str:
    """A fine-tuned model in memory as a keras-hub preset: a `BertTextClassifier` where its
    family says its head is one (`TaskFamily.keras_hub_classifier`), else its encoder alone
    as a `BertBackbone`, said in a log line."""
    info, tokenizer = model.task_info, model.tokenizer
    classifier = registry.family_of_info(info).keras_hub_classifier(model, info)
    if classifier is not None:
        seq_length = info.max_seq_length if seq_length is None else seq_length
        check_seq_length(seq_length, model.encoder.config)
        if info.option("doc_stride"):
            logger.warning(
                "keras-hub's preprocessor cuts texts at sequence_length=%d; bert_tf reads longer ones in "
                "windows (doc_stride=%d), which the preset does not keep",
                seq_length,
                info.option("doc_stride"),
            )
    elif seq_length is not None:
        raise ExportError(_NO_PREPROCESSOR)
    else:
        logger.warning(
            "keras-hub has no BERT task class for %s models (its BertTextClassifier takes a dense head on "
            "the pooled output): writing the encoder alone as a BertBackbone preset, without the head; "
            "--kind=huggingface keeps it",
            info.kind,
        )
    with atomic_export_dir(export_dir, overwrite) as staging:
        keras_hub_export.export_keras_hub(
            model.encoder,
            staging,
            vocab_file=tokenizer.vocab_file,
            lower_case=tokenizer.lower_case,
            sequence_length=seq_length,
            head=None if classifier is None else (classifier.kernel, classifier.bias),
            activation=None if classifier is None else classifier.activation,
            label_names=None if classifier is None else info.label_list,
        )
    return fileio.abspath(export_dir)


def build_module(
    kind: str, model, config: BertConfig, vocab_file: str, lower_case: bool, seq_length: int, top_k: int = 5
) -> tf.Module:
    """The tf.Module of `kind` around an in-memory model (no files written)."""
    if kind == "encoder":
        return EncoderServing(getattr(model, "encoder", model), vocab_file=vocab_file, lower_case=lower_case)
    tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)
    if kind == "preprocessor":
        return BertPreprocessor(tokenizer, seq_length, config.max_position_embeddings)
    if kind == "mlm":
        return FillMask(model, tokenizer, seq_length=seq_length, top_k=top_k)
    raise ExportError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
