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
from keras import ops

from bert_tf.checkpoints import from_pretrained
from bert_tf.config import BertConfig, load_config
from bert_tf.models import (
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertSpanLabeler,
    BertTokenClassifier,
)
from bert_tf.tasks.kinds import TaskKind
from bert_tf.training import optimization

IGNORE_LABEL = -1  # token labels of word-piece continuations, [CLS], [SEP] and padding


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


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedAccuracy(keras.metrics.Mean):
    """Accuracy of per-token predictions over the positions whose label is not -1.

    Example:

    >>> import numpy as np
    >>> metric = MaskedAccuracy()
    >>> _ = metric.update_state(np.array([[1, -1, 0]]), np.array([[[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]]))
    >>> float(metric.result())  # position 0 right, position 2 wrong, position 1 ignored
    0.5
    """

    def __init__(self, name: str = "accuracy", ignore_label: int = IGNORE_LABEL, **kwargs):
        super().__init__(name=name, **kwargs)
        self.ignore_label = ignore_label

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), y_true), "float32")
        weight = ops.cast(ops.not_equal(y_true, self.ignore_label), "float32")
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, "float32")
        return super().update_state(correct, sample_weight=weight)

    def get_config(self):
        return {**super().get_config(), "ignore_label": self.ignore_label}


def compile_args(kind: TaskKind | str) -> dict:
    """`loss`, `metrics` (and `loss_weights`) for `model.compile` of a task model.

    classification and multiple_choice: softmax cross-entropy on integer labels;
    regression: mean squared error; token: cross-entropy averaged over the labelled
    pieces only (label -1 is ignored); span: the mean of the start and end position
    cross-entropies, as the original run_squad.py.
    """
    if kind in (TaskKind.CLASSIFICATION, TaskKind.MULTIPLE_CHOICE):
        return {
            "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }
    if kind == TaskKind.REGRESSION:
        return {
            "loss": keras.losses.MeanSquaredError(),
            "metrics": [keras.metrics.MeanAbsoluteError(name="mae")],
        }
    if kind == TaskKind.TOKEN:
        return {
            "loss": keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, ignore_class=IGNORE_LABEL, reduction="mean_with_sample_weight"
            ),
            "metrics": [MaskedAccuracy()],
        }
    if kind == TaskKind.SPAN:
        return {
            "loss": {
                "start_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "end_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            },
            "loss_weights": {"start_logits": 0.5, "end_logits": 0.5},
            "metrics": {
                "start_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                "end_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            },
        }
    raise ValueError(f"unknown task kind {kind!r}; use one of {', '.join(TaskKind)}")


def task_loss(kind: TaskKind | str, labels, outputs) -> float:
    """The training loss of `compile_args(kind)` on whole arrays (e.g. eval_loss)."""
    args = compile_args(kind)
    loss = args["loss"]
    if isinstance(loss, dict):
        weights = args.get("loss_weights", {})
        return float(
            sum(weights.get(name, 1.0) * float(fn(labels[name], outputs[name])) for name, fn in loss.items())
        )
    return float(loss(labels, outputs))


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
