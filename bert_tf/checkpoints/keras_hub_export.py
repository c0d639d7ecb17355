"""Writing keras-hub BERT presets: keras-hub's own models, holding our weights, saved by keras-hub.

keras-hub is imported only here, when a preset is written (`pip install "bert_tf[keras_hub]"`).
Its `BertBackbone` (and for a classifier its `BertTextClassifier`, `BertTextClassifierPreprocessor`
and `BertTokenizer`) is built in this process, every weight assigned through the table of
`bert_tf.checkpoints.keras_hub` (`place`), and saved with keras-hub's `save_to_preset`: config,
metadata, tokenizer and preprocessor files are keras-hub's own for the installed version,
rather than our copy of its formats.

Example:

>>> export_keras_hub(encoder, "my_preset", vocab_file="vocab.txt", lower_case=True)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any

import keras
import numpy as np

from bert_tf import fileio
from bert_tf.checkpoints.keras_hub import CONFIG_FILE, LABELS_FILE, place, preset_shape
from bert_tf.checkpoints.names import CheckpointError, encoder_slots
from bert_tf.config import BertConfig

logger = logging.getLogger(__name__)

INSTALL = 'pip install "bert_tf[keras_hub]"'
_SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")


def import_keras_hub():
    """keras_hub, or a one-line error saying how to install it."""
    try:
        import keras_hub
    except ImportError:
        raise CheckpointError(f"writing a keras-hub preset needs keras-hub: {INSTALL}") from None
    return keras_hub


def export_keras_hub(
    encoder,
    directory: str | os.PathLike,
    *,
    vocab_file: str,
    lower_case: bool,
    sequence_length: int | None = None,
    head: tuple[np.ndarray, np.ndarray] | None = None,
    activation: str | None = None,
    label_names: list[str] | None = None,
    overwrite: bool = False,
) -> str:
    """Writes `encoder` (a `BertEncoder`, or a model with one) as a keras-hub preset folder.

    Without `head`: a `BertBackbone` preset with its tokenizer, which
    `keras_hub.models.BertBackbone.from_preset(directory)` loads. With `head` (a classifier's
    dense on the pooled output: kernel [hidden, classes], bias [classes]): a
    `BertTextClassifier` preset with its preprocessor (`sequence_length`, the vocab and
    casing), which `keras_hub.models.BertTextClassifier.from_preset(directory)` loads;
    `activation` is its output's: None (our logits) or "sigmoid" (a multi-label model's
    probabilities). `label_names` go to labels.txt, which keras-hub ignores and bert_tf
    reads back. An uncased tokenizer is written with `strip_accents`, so keras-hub removes
    accents as the original BERT does. The folder is written whole or not at all; a
    non-empty one is replaced only with `overwrite`.
    """
    encoder = getattr(encoder, "encoder", encoder)
    config = encoder.config
    directory = fileio.abspath(fileio.check_path(os.fspath(directory)))
    tokens = _check_export(
        config, directory, vocab_file, sequence_length, head, activation, label_names, overwrite
    )
    keras_hub = import_keras_hub()
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        logger.info(
            "keras-hub's BertBackbone has one dropout rate: writing hidden_dropout_prob=%s (the attention "
            "probabilities' %s is not kept; outputs are the same)",
            config.hidden_dropout_prob,
            config.attention_probs_dropout_prob,
        )
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=tokens, lowercase=lower_case, strip_accents=lower_case
    )
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
        dtype="float32",
    )
    _assign(backbone, {slot.name: slot.variable for slot in encoder_slots(encoder)}, config)
    with tempfile.TemporaryDirectory(prefix="bert_tf_keras_hub_") as local:
        preset = os.path.join(local, "preset")
        if head is None:
            backbone.save_to_preset(preset)
            tokenizer.save_to_preset(preset)
        else:
            preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
                tokenizer, sequence_length=sequence_length
            )
            classifier = keras_hub.models.BertTextClassifier(
                backbone,
                num_classes=int(head[1].shape[0]),
                preprocessor=preprocessor,
                activation=activation,
                dropout=config.hidden_dropout_prob,
            )
            classifier.output_dense.kernel.assign(head[0])
            classifier.output_dense.bias.assign(head[1])
            classifier.save_to_preset(preset)
            if label_names is not None:
                with open(os.path.join(preset, LABELS_FILE), "w", encoding="utf-8") as file:
                    file.write("".join(f"{label}\n" for label in label_names))
        # config.json last: keras-hub's loader starts from it.
        fileio.publish_folder(preset, directory, last=(CONFIG_FILE,))
    return directory


def _check_export(config, directory, vocab_file, sequence_length, head, activation, label_names, overwrite):
    """Everything that can refuse an export, before anything is built or written; the vocab's tokens."""
    if fileio.isdir(directory) and fileio.listdir(directory) and not overwrite:
        raise CheckpointError(
            f"{directory} exists and is not empty; choose a new folder or pass overwrite=True"
        )
    if config.hidden_act != "gelu":
        raise CheckpointError(
            f"keras-hub's BertBackbone computes the tanh GELU (bert_tf's 'gelu'); this model's hidden_act is "
            f"{config.hidden_act!r}, so keras-hub would compute other outputs: export it with --kind=huggingface "
            "(or format='huggingface') instead"
        )
    if not vocab_file:
        raise CheckpointError("a keras-hub preset carries its tokenizer: pass the model's vocab_file")
    tokens = [line.strip() for line in fileio.read_text(vocab_file).splitlines()]
    if len(tokens) != config.vocab_size:
        raise CheckpointError(
            f"{vocab_file} has {len(tokens)} tokens but the model's vocab_size is {config.vocab_size}; pass the "
            "vocab the model was trained with"
        )
    missing = [token for token in _SPECIAL_TOKENS if token not in tokens]
    if missing:
        raise CheckpointError(
            f"{vocab_file} has no {', '.join(missing)}; keras-hub's BertTokenizer needs {', '.join(_SPECIAL_TOKENS)}"
        )
    if head is None:
        return tokens
    kernel, bias = head
    if kernel.shape != (config.hidden_size, bias.shape[0]):
        raise CheckpointError(
            f"the head's kernel is {list(kernel.shape)}; a classifier's is [hidden, classes]"
        )
    if activation not in (None, "sigmoid"):
        raise CheckpointError(f"activation must be None (logits) or 'sigmoid', got {activation!r}")
    if label_names is not None and len(label_names) != bias.shape[0]:
        raise CheckpointError(f"{len(label_names)} label names for the head's {bias.shape[0]} classes")
    if not isinstance(sequence_length, int) or not 3 <= sequence_length <= config.max_position_embeddings:
        raise CheckpointError(
            f"sequence_length must be in [3, {config.max_position_embeddings}] (max_position_embeddings), "
            f"got {sequence_length!r}"
        )
    return tokens


def _assign(backbone, variables: dict[str, Any], config: BertConfig) -> None:
    """Assigns our encoder's variables (TF1 name -> Keras variable) to keras-hub's
    backbone, each in keras-hub's shape; every one of its variables must get a value."""
    theirs = {variable.path: variable for variable in backbone.weights}
    assigned = set()
    for name, variable in variables.items():
        where = place(name)
        target = theirs[where.variable]
        value = keras.ops.convert_to_numpy(variable)
        target.assign(np.reshape(value, preset_shape(name, value.shape, config.num_attention_heads)))
        assigned.add(where.variable)
    left = sorted(set(theirs) - assigned)
    if left:  # a keras-hub with more weights than this table knows: refuse rather than write random ones
        raise CheckpointError(
            f"keras-hub's BertBackbone has weights bert_tf does not write ({', '.join(left[:5])}); "
            "install keras-hub 0.32 (pip install 'keras-hub>=0.32,<0.33')"
        )
