"""Optimizers and the learning-rate schedule of BERT pretraining and fine-tuning.

The original release trains with Adam plus decoupled weight decay (0.01, not applied to
LayerNorm and bias variables), epsilon 1e-6, gradients clipped to a global norm of 1.0
and a learning rate that warms up linearly and then decays linearly to 0. Large-batch
recipes use LAMB instead. `create_optimizer` builds either from Keras 3's own AdamW and
Lamb, with two changes the training loop needs:

* weight-decay exclusions match the variable's full path (`.../LayerNorm/gamma`), not
  only its short name, so a rule such as "LayerNorm" works;
* with `presummed_gradients=True` (what the training loop asks for) gradients arrive
  already summed over replicas (the loop all-reduces them once, so the global-norm
  clipping sees the gradient of the whole global batch rather than one replica's
  share) and are not all-reduced a second time; under `model.fit` Keras sums them.

Two deliberate differences from the original `optimization.py`: Adam applies bias
correction, epsilon added to the corrected `sqrt(v)` as in PyTorch (the original did not
correct; it only matters in the first few thousand steps), and Keras' LAMB decays weights
outside the trust ratio.

Example:

>>> from bert_tf.training.optimization import create_optimizer
>>> optimizer = create_optimizer(1e-4, num_train_steps=1000, num_warmup_steps=100)
>>> round(float(optimizer.learning_rate), 8)  # step 0 of the warmup
0.0
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import keras
from keras import ops

# The original release excludes these from weight decay (matched as substrings of the
# variable name, case-insensitively here so "layer_norm" and "LayerNorm" both match).
DEFAULT_WEIGHT_DECAY_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias")

OPTIMIZERS = ("adamw", "lamb")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `learning_rate`, then linear decay to 0 at `num_train_steps`.

    As in the original release the decay is measured from step 0, not from the end of the
    warmup: after the warmup the rate is `learning_rate * (1 - step / num_train_steps)`,
    during it `learning_rate * step / num_warmup_steps`.

    Example:

    >>> schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
    >>> [round(float(schedule(step)), 8) for step in (0, 5, 10, 55, 100, 150)]
    [0.0, 5e-05, 9e-05, 4.5e-05, 0.0, 0.0]
    """

    def __init__(self, learning_rate: float, num_train_steps: int, num_warmup_steps: int = 0):
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be > 0, got {num_train_steps}")
        if not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(
                f"num_warmup_steps must be in [0, num_train_steps={num_train_steps}], got {num_warmup_steps}"
            )
        self.learning_rate = float(learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)

    def __call__(self, step):
        # keras.ops: the same schedule under every Keras backend (TensorFlow, JAX).
        step = ops.cast(step, "float32")
        decayed = self.learning_rate * ops.maximum(0.0, 1.0 - step / self.num_train_steps)
        if self.num_warmup_steps == 0:
            return decayed
        warmup = self.learning_rate * step / self.num_warmup_steps
        return ops.where(step < self.num_warmup_steps, warmup, decayed)

    def get_config(self) -> dict:
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
        }


class _BertOptimizerMixin:
    """Path-based weight-decay exclusions; optionally, gradients arrive already all-reduced.

    Both settings are constructor arguments and part of `get_config`, so an optimizer saved
    in a `.keras` file (a fine-tuned model's) reloads with the same behaviour.
    """

    def __init__(
        self,
        *args,
        weight_decay_exclusions: Sequence[str] = DEFAULT_WEIGHT_DECAY_EXCLUSIONS,
        presummed_gradients: bool = False,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.presummed_gradients = bool(presummed_gradients)
        self.set_weight_decay_exclusions(tuple(weight_decay_exclusions))

    def set_weight_decay_exclusions(self, patterns: Sequence[str]) -> None:
        self.weight_decay_exclusions = tuple(patterns)
        self._weight_decay_exclusion = (
            re.compile("|".join(re.escape(p) for p in patterns), re.IGNORECASE) if patterns else None
        )

    def _get_current_learning_rate(self):
        # Keras evaluates a schedule at its raw iteration counter, which counts micro-batches
        # under gradient accumulation; the schedule is in optimizer updates (`iterations`),
        # so accumulating k micro-batches follows the same rate as a k-times larger batch.
        if isinstance(self._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            return self._learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    def _use_weight_decay(self, variable) -> bool:
        pattern = getattr(self, "_weight_decay_exclusion", None)
        if pattern is not None and pattern.search(_variable_path(variable)):
            return False
        return super()._use_weight_decay(variable)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # The training loop sums gradients over replicas itself, before clipping; see the
        # module docstring. Summing again here would multiply them by the replica count.
        # Under model.fit (presummed_gradients=False) Keras sums them, as usual.
        if self.presummed_gradients:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            weight_decay_exclusions=list(self.weight_decay_exclusions),
            presummed_gradients=self.presummed_gradients,
        )
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamW(_BertOptimizerMixin, keras.optimizers.AdamW):
    """Keras AdamW taking replica-summed gradients, with path-based decay exclusions, and
    epsilon added to the bias-corrected `sqrt(v)`.

    That is Adam as its paper's Algorithm 1 (and PyTorch's AdamW, and Keras' own LAMB)
    write it: `w -= lr * m_hat / (sqrt(v_hat) + epsilon)`. Keras' Adam adds epsilon to the
    uncorrected `sqrt(v)` instead, which makes it `1 / sqrt(1 - beta_2 ** t)` times larger:
    30x at the first step, still 2.6x after 150. Gradients clipped to a global norm of 1
    over millions of weights are mostly below 1e-5, so in a short fine-tuning run that
    larger epsilon damps a good part of the updates. With this update a fine-tuning run
    follows PyTorch's AdamW on the same recipe step for step. The moment variables are
    Keras' own, so checkpoints are unchanged.
    """

    # TensorFlow runs the update as one fused kernel; False: the keras.ops update that
    # every other backend runs (tests check both against the paper's update).
    fused_on_tensorflow = True

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        beta_1_power = ops.power(ops.cast(self.beta_1, dtype), step)
        beta_2_power = ops.power(ops.cast(self.beta_2, dtype), step)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        if self.fused_on_tensorflow and keras.backend.backend() == "tensorflow" and not self.amsgrad:
            # TensorFlow's fused Adam kernel: the update 1.7x faster than Keras' own AdamW's
            # (bench/optimizer_step.py). It adds epsilon to the uncorrected sqrt(v), so it
            # gets epsilon * sqrt(1 - beta_2 ** t): the same update.
            import tensorflow as tf  # lazy: the JAX backend runs without TensorFlow

            tf.raw_ops.ResourceApplyAdam(
                var=variable.handle,
                m=m.handle,
                v=v.handle,
                beta1_power=beta_1_power,
                beta2_power=beta_2_power,
                lr=lr,
                beta1=ops.cast(self.beta_1, dtype),
                beta2=ops.cast(self.beta_2, dtype),
                epsilon=self.epsilon * ops.sqrt(1 - beta_2_power),
                grad=ops.convert_to_tensor(gradient),
            )
            return
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        if self.amsgrad:
            v_max = self._velocity_hats[index]
            self.assign(v_max, ops.maximum(v_max, v))
            v = v_max
        m_hat = ops.divide(m, 1 - beta_1_power)
        v_hat = ops.divide(v, 1 - beta_2_power)
        self.assign_sub(variable, ops.divide(ops.multiply(lr, m_hat), ops.add(ops.sqrt(v_hat), self.epsilon)))


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(_BertOptimizerMixin, keras.optimizers.Lamb):
    """Keras Lamb taking replica-summed gradients, with path-based decay exclusions."""


def _variable_path(variable) -> str:
    path = getattr(variable, "path", None)
    if path is None:  # a plain tf.Variable: "dense/kernel:0"
        path = variable.name
    return path


def uses_weight_decay(optimizer: keras.optimizers.Optimizer, variable) -> bool:
    """Whether `optimizer` decays `variable` (looks through a LossScaleOptimizer)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if inner.weight_decay is None or inner.weight_decay == 0:
        return False
    return inner._use_weight_decay(variable)


def create_optimizer(
    learning_rate: float,
    num_train_steps: int,
    num_warmup_steps: int,
    optimizer: str = "adamw",
    weight_decay: float = 0.01,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-6,
    global_clipnorm: float | None = 1.0,
    exclude_from_weight_decay: Sequence[str] = DEFAULT_WEIGHT_DECAY_EXCLUSIONS,
    loss_scale: bool | None = None,
    presummed_gradients: bool = False,
    gradient_accumulation_steps: int | None = None,
) -> keras.optimizers.Optimizer:
    """Builds the BERT optimizer: AdamW or LAMB on a warmup-then-linear-decay schedule.

    Args:
      learning_rate: peak learning rate, reached at the end of the warmup.
      num_train_steps: step at which the rate reaches 0.
      num_warmup_steps: length of the linear warmup.
      optimizer: "adamw" (the original recipe) or "lamb" (large batches).
      weight_decay: decoupled weight decay rate; 0 disables it.
      beta_1, beta_2, epsilon: Adam moments and its denominator's epsilon.
      global_clipnorm: clip the (replica-summed) gradients to this global norm; None: off.
      exclude_from_weight_decay: substrings of variable paths that are never decayed.
      loss_scale: wrap in a dynamic `LossScaleOptimizer`; None: when the global Keras
        dtype policy is mixed_float16.
      presummed_gradients: True for `bert_tf.training.loop.Trainer`, which hands over
        gradients already summed over replicas (and so clips the global batch's gradient);
        False for `model.fit`, where Keras sums them.
      gradient_accumulation_steps: Keras' own option: average the gradients of this many
        calls and update once (None or 1: update every call). `iterations` and the
        learning-rate schedule count updates, so k micro-batches of B follow the recipe
        of batches of k * B.

    Example:

    >>> opt = create_optimizer(2e-5, num_train_steps=300, num_warmup_steps=30, optimizer="lamb")
    >>> type(opt).__name__
    'Lamb'
    """
    name = optimizer.lower()
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of {', '.join(OPTIMIZERS)}")
    schedule = WarmupLinearDecay(learning_rate, num_train_steps, num_warmup_steps)
    cls = AdamW if name == "adamw" else Lamb
    result = cls(
        learning_rate=schedule,
        weight_decay=float(weight_decay),
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=global_clipnorm,
        weight_decay_exclusions=tuple(exclude_from_weight_decay),
        presummed_gradients=presummed_gradients,
        gradient_accumulation_steps=gradient_accumulation_steps if gradient_accumulation_steps != 1 else None,
    )
    if loss_scale is None:
        loss_scale = keras.mixed_precision.global_policy().name == "mixed_float16"
    if loss_scale:
        result = keras.mixed_precision.LossScaleOptimizer(result)
    return result
