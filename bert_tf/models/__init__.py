"""BERT models: the encoder, the pretrainer and the task models, plus `from_pretrained`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bert_tf.models.classifier import BertClassifier
from bert_tf.models.encoder import BertEncoder
from bert_tf.models.multiple_choice import BertMultipleChoice
from bert_tf.models.pretrainer import BertPretrainer
from bert_tf.models.span_labeler import BertSpanLabeler
from bert_tf.models.token_classifier import BertTokenClassifier

if TYPE_CHECKING:
    import os

    import keras

    from bert_tf.checkpoints import TokenizerSettings


def from_pretrained(
    path: str | os.PathLike, heads: str = "pretraining"
) -> tuple[keras.Model, TokenizerSettings]:
    """Loads a Google checkpoint directory, a Hugging Face BERT directory or our export.

    Returns `(model, TokenizerSettings(vocab_file, lower_case))`; see
    `bert_tf.checkpoints.from_pretrained`.
    """
    from bert_tf.checkpoints import from_pretrained as load

    return load(path, heads=heads)


__all__ = [
    "BertClassifier",
    "BertEncoder",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanLabeler",
    "BertTokenClassifier",
    "from_pretrained",
]
