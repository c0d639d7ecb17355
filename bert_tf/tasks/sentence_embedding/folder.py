"""sentence-transformers folders: what `SentenceTransformer(path)` reads, read and written here.

A folder lists its modules in `modules.json`, in order: the `Transformer` (the BERT
checkpoint itself, Hugging Face's layout, at the folder's top or in a sub-folder), a
`Pooling` (`1_Pooling/config.json`: one `pooling_mode_*` flag on) and, for unit vectors,
a `Normalize`. `sentence_bert_config.json` gives the longest input (`max_seq_length`) and
whether texts are lower-cased before the tokenizer (`do_lower_case`). bert_tf builds
exactly these three modules; a folder with another (a `Dense` projection, a `CNN`) is
refused rather than encoded differently.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

from bert_tf import fileio
from bert_tf.errors import UsageError, damaged

logger = logging.getLogger(__name__)

MODULES_FILE = "modules.json"
POOLINGS = ("mean", "cls", "max", "mean_sqrt_len")
# sentence-transformers' Pooling config flag of each pooling mode.
POOLING_FLAGS = {
    "mean": "pooling_mode_mean_tokens",
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
}
_PACKAGE = "sentence_transformers.models."


@dataclasses.dataclass(frozen=True)
class SentenceTransformersFolder:
    """What a sentence-transformers folder says about its encoder and its vectors."""

    checkpoint: str  # the Transformer module's folder: a Hugging Face BERT checkpoint
    pooling: str  # one of POOLINGS
    normalize: bool
    max_seq_length: int | None
    lower_case: bool  # sentence_bert_config.json's do_lower_case (the tokenizer's own is read apart)


def is_folder(path: str | None) -> bool:
    """Whether `path` is a sentence-transformers folder (it has modules.json)."""
    return bool(path) and fileio.isfile(fileio.join(path, MODULES_FILE))


def _json(path: str) -> dict | list:
    try:
        return json.loads(fileio.read_text(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise damaged(path, f"not valid JSON: {error}", "download or write the folder again") from None


def read(path: str) -> SentenceTransformersFolder:
    """The modules of the sentence-transformers folder at `path`; a module bert_tf does not
    build is refused with one line naming it and the way out."""
    modules = _json(fileio.join(path, MODULES_FILE))
    transformer, pooling, normalize = None, None, False
    for module in modules:
        kind = str(module.get("type", "")).removeprefix(_PACKAGE)
        if kind == "Transformer":
            transformer = module.get("path", "")
        elif kind == "Pooling":
            pooling = _pooling_mode(fileio.join(path, module.get("path", ""), "config.json"))
        elif kind == "Normalize":
            normalize = True
        else:
            raise UsageError(
                f"{path}: modules.json lists a {kind or module} module ({module.get('path')}), which "
                "bert_tf does not build (it builds Transformer, Pooling and Normalize); use a model made of "
                "those only, or remove that module's entry from modules.json to encode without it (the "
                "vectors then differ from sentence-transformers')"
            )
    if transformer is None:
        raise UsageError(
            f"{path}: modules.json lists no Transformer module; is it a sentence-transformers folder?"
        )
    config_path = fileio.join(path, "sentence_bert_config.json")
    config = _json(config_path) if fileio.isfile(config_path) else {}
    return SentenceTransformersFolder(
        checkpoint=fileio.join(path, transformer) if transformer else path,
        pooling=pooling or "mean",
        normalize=normalize,
        max_seq_length=config.get("max_seq_length"),
        lower_case=bool(config.get("do_lower_case", False)),
    )


def _pooling_mode(config_path: str) -> str:
    config = _json(config_path)
    on = [name for name, flag in POOLING_FLAGS.items() if config.get(flag)]
    others = sorted(key for key, value in config.items() if key.startswith("pooling_mode_") and value is True)
    unknown = [key for key in others if key not in POOLING_FLAGS.values()]
    if unknown or len(on) != 1:
        raise UsageError(
            f"{config_path}: pooling {', '.join(unknown or others) or 'none'}; bert_tf pools one of "
            f"{', '.join(POOLING_FLAGS.values())}: turn exactly one of them on"
        )
    return on[0]


def write(directory: str, *, pooling: str, normalize: bool, max_seq_length: int, dimension: int) -> None:
    """The sentence-transformers files around a Hugging Face BERT checkpoint already written
    at `directory`'s top: modules.json, 1_Pooling/config.json, 2_Normalize (when `normalize`)
    and sentence_bert_config.json."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": f"{_PACKAGE}Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": f"{_PACKAGE}Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": f"{_PACKAGE}Normalize"})
        fileio.makedirs(os.path.join(directory, "2_Normalize"))
    fileio.write_json(os.path.join(directory, MODULES_FILE), modules)
    fileio.write_json(
        os.path.join(directory, "1_Pooling", "config.json"),
        {
            "word_embedding_dimension": dimension,
            **{flag: name == pooling for name, flag in POOLING_FLAGS.items()},
        },
    )
    fileio.write_json(
        os.path.join(directory, "sentence_bert_config.json"),
        {"max_seq_length": max_seq_length, "do_lower_case": False},
    )


def export(model, export_dir: str, overwrite: bool = False) -> str:
    """Writes a `BertSentenceEncoder` (with its preprocessor) as a sentence-transformers folder
    that `SentenceTransformer(export_dir)` loads with the same vectors: the encoder as a Hugging
    Face BERT checkpoint, its pooling, normalization and max_seq_length as modules; whole or
    not at all. `bert_tf.export --kind=sentence_transformers` and `model.export(...,
    format="sentence_transformers")` run it."""
    from bert_tf.checkpoints import export_pretrained
    from bert_tf.serving.saving import atomic_export_dir

    tokenizer, info = model.preprocessor.tokenizer, model.preprocessor.info
    if info.option("doc_stride"):
        logger.warning(
            "the model reads long texts in windows (doc_stride %d); sentence-transformers cuts them at "
            "max_seq_length=%d, so its vectors of longer texts differ: serve the task SavedModel "
            "(--kind=task) to read every window",
            info.option("doc_stride"),
            info.max_seq_length,
        )
    with atomic_export_dir(export_dir, overwrite) as staging:
        export_pretrained(
            model,
            staging,
            vocab_file=tokenizer.vocab_file,
            lower_case=tokenizer.lower_case,
            formats=("huggingface",),
        )
        write(
            staging,
            pooling=model.pooling,
            normalize=model.normalize,
            max_seq_length=info.max_seq_length,
            dimension=model.encoder.config.hidden_size,
        )
    return fileio.abspath(export_dir)
