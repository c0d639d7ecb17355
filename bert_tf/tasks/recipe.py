"""The fine-tuning recipe: AdamW with linear warmup and decay, as the original scripts train.

`Recipe` is what `compile()` without an optimizer records; `fit` builds its optimizer once
it knows how many updates it runs (`Recipe.optimizer`). The command line's runs are the
same recipe (`bert_tf.tasks.runner`).

>>> optimizer = Recipe(learning_rate=5e-4).optimizer(num_train_steps=10)
>>> type(optimizer).__name__, float(optimizer.learning_rate)
('AdamW', 0.0)
"""

from __future__ import annotations

import dataclasses
import math

import keras

from bert_tf.errors import UsageError
from bert_tf.training import optimization

# How long a command-line run trains when --num_train_epochs is not given (--recipe).
RECIPES = ("auto", "original")
ORIGINAL_EPOCHS = 3.0  # run_classifier.py's, set for GLUE-sized data
MIN_UPDATES = 300  # "auto": small data trains for more epochs, until it makes this many updates
MAX_EPOCHS = 20.0  # ... but not more than this many


def num_train_epochs(recipe: str, steps_per_epoch: int) -> float:
    """The epochs of a run whose --num_train_epochs is not set: the original recipe's 3; under
    "auto", as many more as make at least `MIN_UPDATES` updates on small data, at most
    `MAX_EPOCHS` (data of 100 batches or more trains 3 epochs, as the original).

    >>> num_train_epochs("auto", steps_per_epoch=37), num_train_epochs("original", steps_per_epoch=37)
    (9.0, 3.0)
    >>> num_train_epochs("auto", steps_per_epoch=2000)
    3.0
    """
    if recipe == "original":
        return ORIGINAL_EPOCHS
    return float(min(MAX_EPOCHS, max(ORIGINAL_EPOCHS, math.ceil(MIN_UPDATES / steps_per_epoch))))


@dataclasses.dataclass(frozen=True)
class Recipe:
    """The original fine-tuning optimizer for `model.fit`: AdamW at `learning_rate` (weight
    decay 0.01, not on LayerNorm or bias variables, epsilon 1e-6, global-norm clipping 1.0)
    with linear warmup over `warmup_proportion` of the updates, then linear decay to 0.

    With `gradient_accumulation_steps=k` (Keras' own optimizer option) each update averages
    the gradients of k calls, so `model.fit` on batches of B / k takes k * num_train_steps
    batches and follows the same recipe as batches of B; under mixed_float16 the loss scaling
    wraps it.
    """

    learning_rate: float = 5e-5
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    gradient_accumulation_steps: int = 1

    def __post_init__(self):
        if not self.learning_rate > 0:
            raise UsageError(f"learning_rate must be > 0, got {self.learning_rate} (BERT uses 2e-5 to 5e-5)")
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise UsageError(f"warmup_proportion must be in [0, 1), got {self.warmup_proportion}")
        if self.gradient_accumulation_steps < 1:
            raise UsageError(
                f"gradient_accumulation_steps must be >= 1, got {self.gradient_accumulation_steps}"
            )

    def optimizer(self, num_train_steps: int) -> keras.optimizers.Optimizer:
        """The recipe's optimizer for `num_train_steps` optimizer updates.

        Built by `bert_tf.training.optimization.create_optimizer` with its default
        `presummed_gradients=False`: under `model.fit` Keras sums each replica's gradients.
        """
        return optimization.create_optimizer(
            self.learning_rate,
            num_train_steps=num_train_steps,
            num_warmup_steps=int(num_train_steps * self.warmup_proportion),
            weight_decay=self.weight_decay,
            gradient_accumulation_steps=self.gradient_accumulation_steps,
        )
