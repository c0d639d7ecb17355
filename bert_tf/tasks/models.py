"""Keras task models for fine-tuning, plus the loss, metrics and optimizer that go with them.

Each factory returns a plain `keras.Model` taking the feature dict `{input_ids,
input_mask, segment_ids}`; compile it with `compile_args(kind)` (or your own loss) and
train it with `model.fit`. The encoder comes from `init_checkpoint` (a Google checkpoint
directory, a Hugging Face BERT directory or one of ours; see
`bert_tf.checkpoints.from_pretrained`) or, without one, is randomly initialised from `config`.

Example:

>>> import numpy as np
>>> from bert_tf import tasks
>>> model = tasks.classifier(num_classes=2, config=tasks.tiny_config(vocab_size=50))
>>> model.compile(optimizer=tasks.create_optimizer(5e-4, num_train_steps=10), **tasks.compile_args("classification"))
>>> ids = np.array([[1, 7, 8, 2, 0]] * 4, dtype="int32")
>>> x = {"input_ids": ids, "input_mask": (ids > 0).astype("int32"), "segment_ids": 0 * ids}
>>> history = model.fit(x, np.array([0, 1, 0, 1]), epochs=1, verbose=0)
>>> model.predict(x, verbose=0).shape
(4, 2)
"""

from __future__ import annotations

import os

import keras

from bert_tf.checkpoints import from_pretrained
from bert_tf.config import BertConfig, load_config
from bert_tf.models import (
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertSpanLabeler,
    BertTokenClassifier,
)
from bert_tf.tasks.families import family_for_kind
from bert_tf.tasks.families.token import MaskedAccuracy
from bert_tf.tasks.kinds import TaskKind
from bert_tf.training import optimization

__all__ = [
    "MaskedAccuracy",  # the token family's metric, kept importable from here
    "classifier",
    "compile_args",
    "create_optimizer",
    "load_encoder",
    "multiple_choice",
    "span_labeler",
    "task_loss",
    "tiny_config",
    "token_classifier",
]


def tiny_config(vocab_size: int, **changes) -> BertConfig:
    """A 2-layer, 64-wide config for tests and quick experiments."""
    values = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=128,
    )
    values.update(changes)
    return BertConfig(**values)


def load_encoder(init_checkpoint: str | os.PathLike | None = None, config: BertConfig | str | None = None):
    """(encoder, tokenizer settings or None): pretrained when `init_checkpoint` is given."""
    if init_checkpoint:
        encoder, settings = from_pretrained(init_checkpoint, heads="encoder")
        return encoder, settings
    if config is None:
        raise ValueError("give init_checkpoint (pretrained weights) or config (random initialisation)")
    if not isinstance(config, BertConfig):
        config = load_config(config)
    return BertEncoder(config), None


def classifier(
    init_checkpoint: str | os.PathLike | None = None,
    num_classes: int = 2,
    *,
    config: BertConfig | str | None = None,
    dropout_rate: float = 0.1,
) -> keras.Model:
    """Classification on the pooled `[CLS]` output: logits [batch, num_classes];
    `num_classes=1` is regression (one score)."""
    encoder, _ = load_encoder(init_checkpoint, config)
    return BertClassifier(encoder, num_classes=num_classes, dropout_rate=dropout_rate)


def token_classifier(
    init_checkpoint: str | os.PathLike | None = None,
    num_classes: int = 2,
    *,
    config: BertConfig | str | None = None,
    dropout_rate: float = 0.1,
) -> keras.Model:
    """Per-piece tagging (NER): logits [batch, seq, num_classes]."""
    encoder, _ = load_encoder(init_checkpoint, config)
    return BertTokenClassifier(encoder, num_classes=num_classes, dropout_rate=dropout_rate)


def span_labeler(
    init_checkpoint: str | os.PathLike | None = None, *, config: BertConfig | str | None = None
) -> keras.Model:
    """Answer spans (SQuAD): {start_logits, end_logits}, each [batch, seq]."""
    encoder, _ = load_encoder(init_checkpoint, config)
    return BertSpanLabeler(encoder)


def multiple_choice(
    init_checkpoint: str | os.PathLike | None = None,
    *,
    config: BertConfig | str | None = None,
    dropout_rate: float = 0.1,
) -> keras.Model:
    """Multiple choice (SWAG): inputs [batch, choices, seq], logits [batch, choices]."""
    encoder, _ = load_encoder(init_checkpoint, config)
    return BertMultipleChoice(encoder, dropout_rate=dropout_rate)


def compile_args(kind: TaskKind | str) -> dict:
    """`loss`, `metrics` (and `loss_weights`) for `model.compile` of a task model of `kind`.

    classification and multiple_choice: softmax cross-entropy on integer labels;
    regression: mean squared error; token: cross-entropy averaged over the labelled
    pieces only (label -1 is ignored); span: the mean of the start and end position
    cross-entropies, as the original run_squad.py. Each is its task family's
    (`bert_tf.tasks.families`).
    """
    return family_for_kind(kind).compile_args(TaskKind(kind))


def task_loss(kind: TaskKind | str, labels, outputs) -> float:
    """The training loss of `compile_args(kind)` on whole arrays (e.g. eval_loss)."""
    return family_for_kind(kind).task_loss(TaskKind(kind), labels, outputs)


def create_optimizer(
    learning_rate: float,
    num_train_steps: int,
    warmup_proportion: float = 0.1,
    weight_decay: float = 0.01,
    gradient_accumulation_steps: int = 1,
) -> keras.optimizers.Optimizer:
    """The original fine-tuning optimizer for `model.fit`: AdamW (weight decay 0.01, not
    on LayerNorm or bias variables, epsilon 1e-6, global-norm clipping 1.0) with linear
    warmup over `warmup_proportion` of the steps, then linear decay to 0.

    `num_train_steps` counts optimizer updates. With `gradient_accumulation_steps=k`
    (Keras' own optimizer option) each update averages the gradients of k calls, so
    `model.fit` on batches of B / k takes k * num_train_steps batches and follows the
    same recipe as batches of B; under mixed_float16 the loss scaling wraps it.

    Built by `bert_tf.training.optimization.create_optimizer` with its default
    `presummed_gradients=False`: under `model.fit` Keras sums each replica's gradients.
    """
    if not 0.0 <= warmup_proportion < 1.0:
        raise ValueError(f"warmup_proportion must be in [0, 1), got {warmup_proportion}")
    if gradient_accumulation_steps < 1:
        raise ValueError(f"gradient_accumulation_steps must be >= 1, got {gradient_accumulation_steps}")
    optimizer = optimization.create_optimizer(
        learning_rate,
        num_train_steps=num_train_steps,
        num_warmup_steps=int(num_train_steps * warmup_proportion),
        weight_decay=weight_decay,
        gradient_accumulation_steps=gradient_accumulation_steps,
    )
    return optimizer
