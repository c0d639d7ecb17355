"""The one training loop, the same under every `tf.distribute` strategy.

Orbit style: a `tf.function` runs `steps_per_loop` steps in a `tf.range` loop, each step
`strategy.run(replica_step)` on the next distributed batch, so the host speaks to the
devices once per loop rather than once per step (this is what keeps a TPU busy). Inside
a replica step the forward and backward pass is its own `tf.function`, XLA-compiled when
`jit_compile` is set; gradient accumulation splits the replica's batch into micro-batches
and sums their gradients before the one update.

Loss normalization. `loss_fn(features, outputs, totals)` returns this micro-batch's share
of the loss of the whole global batch: `totals` holds normalizers summed over the global
batch (e.g. the number of examples, the sum of masked-LM weights), so summing the shares
over micro-batches and replicas gives exactly the loss one device would compute on the
whole batch, and the summed gradients are its gradient. The gradients are all-reduced
once, then clipped to the global norm and applied by the optimizer (see
`optimization.py`).

Checkpoints hold the model, the optimizer and the step; next to each, every worker saves
its input pipeline's position (`input_feed.py`), so a resumed run restores it in constant
time and sees the batches an uninterrupted run would have seen: it reaches the same
weights. Datasets are deterministic for a fixed seed, so without a saved position the
phase's dataset is rebuilt and the consumed batches skipped, which gives the same batches
slowly.

On SIGTERM or Ctrl-C (`preemption.py`) the loop saves at the end of the loop it is in and
raises `Preempted`; under MultiWorkerMirroredStrategy TensorFlow's
`PreemptionCheckpointHandler` makes every worker agree on that step first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import BertTfError
from bert_tf.training import distribute
from bert_tf.training.input_feed import InputFeed, distributed_batch
from bert_tf.training.preemption import Preempted, StopSignals
from bert_tf.training.progress import ProgressReporter, ScalarLog, log_dir, record_run

LossFn = Callable[[Mapping[str, tf.Tensor], Mapping[str, tf.Tensor], Mapping[str, tf.Tensor]], dict]
TotalsFn = Callable[[Mapping[str, tf.Tensor]], dict]


class NonFiniteLossError(BertTfError, RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


@dataclasses.dataclass(frozen=True)
class Phase:
    """A stretch of training on one dataset, steps [start_step, end_step).

    `dataset_fn(input_context)` returns this input pipeline's dataset of per-replica
    batches (`input_context.get_per_replica_batch_size(global_batch_size)` examples),
    repeated, deterministic for a fixed seed. `served`: the batches come from tf.data
    service, which holds their position (see `InputFeed`).
    """

    name: str
    start_step: int
    end_step: int
    dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset]
    served: bool = False


@dataclasses.dataclass
class TrainResult:
    step: int
    history: list[dict]  # one dict per loop: step, the metrics, learning_rate
    checkpoint: str | None


def example_count(features: Mapping[str, tf.Tensor]) -> dict:
    """The default `totals_fn`: the number of examples in the batch."""
    first = tf.nest.flatten(features)[0]
    return {"examples": tf.cast(tf.shape(first)[0], tf.float32)}


@dataclasses.dataclass
class PretrainingResult:
    """What `run_pretraining` returns, on either backend."""

    model_dir: str
    export_dir: str | None
    train: TrainResult
    eval_metrics: dict | None
    fill_mask: list[tuple[str, float]] | None
    eval_history: list[dict] = dataclasses.field(default_factory=list)  # one dict per periodic eval
    is_chief: bool = True  # False on the other workers of a cluster, which write and say nothing


class Trainer:
    """Runs `model` on `phases` of data under `strategy`, checkpointing to `model_dir`.

    Build `model` (called once on a batch) and `optimizer` inside `strategy.scope()`.

    Example (one device, a toy regression):

    >>> import keras, tensorflow as tf, tempfile
    >>> from bert_tf.training.optimization import create_optimizer
    >>> strategy = tf.distribute.get_strategy()
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> optimizer = create_optimizer(0.1, num_train_steps=20, num_warmup_steps=0, presummed_gradients=True)
    >>> def data(context):
    ...     x = tf.random.stateless_normal([64, 3], seed=[1, 2])
    ...     return tf.data.Dataset.from_tensor_slices({"x": x, "y": tf.reduce_sum(x, 1)}).repeat().batch(8)
    >>> def loss_fn(features, outputs, totals):
    ...     error = tf.reduce_sum((outputs[:, 0] - features["y"]) ** 2)
    ...     return {"loss": error / totals["examples"]}
    >>> trainer = Trainer(strategy, model, optimizer, loss_fn, tempfile.mkdtemp(),
    ...     global_batch_size=8, steps_per_loop=10, save_checkpoints_steps=20,
    ...     model_inputs=lambda features: features["x"], verbose=False)
    >>> result = trainer.train([Phase("all", 0, 20, data)])
    >>> result.step, result.history[-1]["loss"] < result.history[0]["loss"]
    (20, True)
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        model: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        loss_fn: LossFn,
        model_dir: str,
        *,
        global_batch_size: int,
        totals_fn: TotalsFn = example_count,
        model_inputs: Callable[[Mapping[str, tf.Tensor]], object] = lambda features: features,
        steps_per_loop: int = 100,
        save_checkpoints_steps: int = 1000,
        gradient_accumulation_steps: int = 1,
        jit_compile: bool = False,
        max_checkpoints_to_keep: int = 3,
        save_final_checkpoint: bool = True,
        loop_end_every_steps: int = 0,
        metric_weights: Mapping[str, str] | None = None,
        verbose: bool = True,
    ):
        _check_steps(
            strategy, global_batch_size, gradient_accumulation_steps, steps_per_loop, save_checkpoints_steps
        )
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.totals_fn = totals_fn
        self.metric_weights = dict(metric_weights or {})
        self.model_inputs = model_inputs
        self.model_dir = model_dir
        self.global_batch_size = global_batch_size
        self.steps_per_loop = steps_per_loop
        self.save_checkpoints_steps = save_checkpoints_steps
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.jit_compile = jit_compile
        self.save_final_checkpoint = save_final_checkpoint
        self.max_checkpoints_to_keep = max_checkpoints_to_keep
        # Loops also end at multiples of this (e.g. evaluation steps), so on_loop_end sees them.
        self.loop_end_every_steps = loop_end_every_steps
        self.is_chief = distribute.is_chief(strategy)
        self.verbose = verbose and self.is_chief

        inner = getattr(optimizer, "inner_optimizer", optimizer)
        if strategy.num_replicas_in_sync > 1 and not getattr(inner, "presummed_gradients", False):
            raise ValueError(
                "the loop sums gradients over replicas before the optimizer sees them; build the "
                "optimizer with bert_tf.training.optimization.create_optimizer(..., presummed_gradients=True)"
            )
        if not optimizer.built:
            with strategy.scope():
                optimizer.build(model.trainable_variables)
        self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        # Keras does not track the state of its dropout seed generators for tf.train
        # checkpoints; without it a resumed run would draw other dropout masks.
        random_state = [v.value for v in model.non_trainable_variables if "seed_generator" in v.path]
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer, global_step=self.global_step, random_state=random_state
        )
        # Every worker of a multi-worker cluster must take part in saving; only the chief
        # writes to model_dir, the others to a scratch directory they delete again.
        self._save_dir = (
            model_dir
            if self.is_chief
            else fileio.join(model_dir, f".worker_{distribute.worker_id(strategy)}_scratch")
        )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self._save_dir, max_to_keep=max_checkpoints_to_keep, checkpoint_name="ckpt"
        )
        self._train_loop = self._build_train_loop()
        self._feed: InputFeed | None = None
        self._preemption_handler = self._cluster_preemption_handler()

    def _cluster_preemption_handler(self):
        """TensorFlow's preemption handler for a cluster of several workers, else None.

        A SIGTERM reaches one worker; every worker must save at the same step, which
        TensorFlow's handler agrees on through the cluster's coordination service."""
        strategy = self.strategy
        if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return None
        if distribute.input_pipeline(strategy)[0] <= 1:
            return None
        return tf.distribute.experimental.PreemptionCheckpointHandler(
            strategy.cluster_resolver,
            self.manager,
            termination_config=tf.distribute.experimental.TerminationConfig(
                exit_fn=self._stop_preempted, save_fn=self.save
            ),
        )

    # --- checkpoints ---------------------------------------------------------

    def restore(self) -> int:
        """Restores the latest checkpoint in model_dir, if any; returns the step reached."""
        latest = tf.train.latest_checkpoint(self.model_dir)
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
        return int(self.global_step.numpy())

    def save(self) -> str:
        """Saves the input position (every worker its own), then the model checkpoint."""
        step = int(self.global_step.numpy())
        if self._feed is not None:
            self._feed.save(step)
        path = self.manager.save(checkpoint_number=step)
        if not self.is_chief:
            fileio.rmtree(self._save_dir)
        return path

    def _stop_preempted(self) -> None:
        step = int(self.global_step.numpy())
        raise Preempted(
            f"stopped on a preemption notice (SIGTERM) at step {step}; saved "
            f"{tf.train.latest_checkpoint(self.model_dir) or 'a checkpoint'}. Rerun the same command to resume."
        )

    # --- the compiled loop ---------------------------------------------------

    def _build_train_loop(self):
        model, optimizer = self.model, self.optimizer
        accumulation = self.gradient_accumulation_steps
        variables = model.trainable_variables

        @tf.function(jit_compile=self.jit_compile)
        def forward_backward(features, totals):
            with tf.GradientTape() as tape:
                outputs = model(self.model_inputs(features), training=True)
                metrics = self.loss_fn(features, outputs, totals)
                scaled_loss = optimizer.scale_loss(metrics["loss"])
            gradients = tape.gradient(scaled_loss, variables)
            # Dense gradients: embedding lookups give IndexedSlices, which cannot be summed
            # over micro-batches in a loop.
            gradients = [tf.convert_to_tensor(g) for g in gradients]
            return gradients, metrics

        def replica_step(features):
            context = tf.distribute.get_replica_context()
            totals = context.all_reduce(tf.distribute.ReduceOp.SUM, self.totals_fn(features))
            if accumulation == 1:
                gradients, metrics = forward_backward(features, totals)
            else:
                # [batch, ...] -> [accumulation, batch / accumulation, ...]
                micro_batches = tf.nest.map_structure(
                    lambda t: tf.reshape(t, tf.concat([[accumulation, -1], tf.shape(t)[1:]], 0)), features
                )
                gradients, metrics = forward_backward(
                    tf.nest.map_structure(lambda t: t[0], micro_batches), totals
                )
                for index in tf.range(1, accumulation):
                    more_gradients, more_metrics = forward_backward(
                        tf.nest.map_structure(lambda t, i=index: t[i], micro_batches), totals
                    )
                    gradients = [a + b for a, b in zip(gradients, more_gradients, strict=True)]
                    metrics = tf.nest.map_structure(tf.add, metrics, more_metrics)
            gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
            optimizer.apply(gradients, variables)
            return metrics

        self.compiled_step = None
        if self.jit_compile and self.strategy.num_replicas_in_sync == 1:
            # One device: the whole step (forward, backward, the sum, clipping and the update)
            # is one XLA program, as on a TPU. Across replicas XLA cannot hold the all-reduce
            # (on a TPU, TPUStrategy compiles all of it anyway): forward/backward is compiled.
            replica_step = self.compiled_step = tf.function(replica_step, jit_compile=True)
        return self._steps_loop(replica_step)

    def _steps_loop(self, replica_fn):
        """A tf.function running `replica_fn` on `num_steps` batches; returns mean metrics."""
        strategy = self.strategy

        # A tf.function of its own so that the two calls below share one trace.
        @tf.function
        def one_step(iterator):
            per_replica = strategy.run(replica_fn, args=(distributed_batch(strategy, iterator),))
            return {
                name: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                for name, value in per_replica.items()
            }

        @tf.function
        def steps_loop(iterator, num_steps):
            sums = one_step(iterator)
            for _ in tf.range(num_steps - 1):
                sums = tf.nest.map_structure(tf.add, sums, one_step(iterator))
            return {name: value / tf.cast(num_steps, value.dtype) for name, value in sums.items()}

        return steps_loop

    def evaluate(self, dataset_fn, steps: int) -> dict:
        """Metrics of `loss_fn` over `steps` global batches of `dataset_fn`, no training.

        A metric named in `metric_weights` (name -> a key of `totals_fn`) is the mean over
        the steps weighted by that total (exact over the examples, also when some batches
        are padding of weight 0: `pipelines.dataset.fixed_evaluation_batches`), and only
        those are returned; without `metric_weights`, every metric's mean over the steps.
        """
        weights = self.metric_weights
        replicas = self.strategy.num_replicas_in_sync

        def replica_eval(features):
            context = tf.distribute.get_replica_context()
            totals = context.all_reduce(tf.distribute.ReduceOp.SUM, self.totals_fn(features))
            outputs = self.model(self.model_inputs(features), training=False)
            metrics = self.loss_fn(features, outputs, totals)
            if not weights:
                return metrics
            # Replicas' shares sum to the step's value: share x total sums to value x total.
            weighted = {name: metrics[name] * totals[key] for name, key in weights.items()}
            weighted.update({f"total/{key}": totals[key] / replicas for key in set(weights.values())})
            return weighted

        feed = InputFeed(self.strategy, dataset_fn, self.model_dir, phase_index=-1)
        feed.start(0, 0)
        means = self._steps_loop(replica_eval)(feed.iterator, tf.constant(steps, tf.int32))
        means = {name: float(value.numpy()) for name, value in means.items()}
        if not weights:
            return means
        if not any(means[f"total/{key}"] for key in weights.values()):
            raise ValueError("the evaluation data is empty: no batch of it has any weight")
        return {name: means[name] / means[f"total/{key}"] for name, key in weights.items()}

    # --- driver --------------------------------------------------------------

    def train(
        self, phases: Sequence[Phase], on_loop_end: Callable[[int, dict], None] | None = None
    ) -> TrainResult:
        """Trains to the end of the last phase, resuming from model_dir if it holds a checkpoint."""
        for before, after in zip(phases, phases[1:], strict=False):
            if before.end_step != after.start_step:
                raise ValueError(
                    f"phases must be contiguous: {before.name} ends at {before.end_step}, "
                    f"{after.name} starts at {after.start_step}"
                )
        total_steps = phases[-1].end_step
        step = self.restore()
        if step and self.verbose:
            print(f"resumed from {tf.train.latest_checkpoint(self.model_dir)} at step {step}", flush=True)
        if self.is_chief:
            record_run(self.model_dir, "bert_tf.pretrain", step)
        reporter = ProgressReporter(
            total_steps,
            self.global_batch_size,
            ScalarLog(self.model_dir, "train", log_dir(self.model_dir)) if self.is_chief else None,
            enabled=self.verbose,
        )
        history: list[dict] = []
        last_saved = tf.train.latest_checkpoint(self.model_dir)
        # Under multi-worker training TensorFlow's handler watches SIGTERM instead.
        with StopSignals(enabled=self._preemption_handler is None) as signals:
            try:
                for phase_index, phase in enumerate(phases):
                    if step >= phase.end_step:
                        continue
                    if self.verbose:
                        print(f"phase {phase.name}: steps {step}..{phase.end_step}", flush=True)
                    iterator = self._start_feed(phase_index, phase, step)
                    reporter.start(step)
                    while step < phase.end_step:
                        num_steps = self._loop_length(step, phase.end_step)
                        metrics = self._train_loop(iterator, tf.constant(num_steps, tf.int32))
                        metrics = {name: float(value.numpy()) for name, value in metrics.items()}
                        if not np.isfinite(metrics["loss"]):
                            raise NonFiniteLossError(
                                f"the loss became {metrics['loss']} between steps {step} and {step + num_steps} "
                                f"(phase {phase.name}); stopping without saving. The last good checkpoint "
                                f"is {last_saved or 'none (nothing was saved yet)'}. Lower --learning_rate, "
                                "raise --num_warmup_steps or train in float32, then rerun to resume from it."
                            )
                        step += num_steps
                        self.global_step.assign(step)
                        learning_rate = float(_current_learning_rate(self.optimizer))
                        reporter.report(step, metrics, learning_rate)
                        history.append({"step": step, **metrics, "learning_rate": learning_rate})
                        if reporter.sequences_per_second is not None:
                            history[-1]["sequences_per_second"] = reporter.sequences_per_second
                        if reporter.real_tokens_per_second is not None:
                            history[-1]["real_tokens_per_second"] = reporter.real_tokens_per_second
                        at_end = step == total_steps and self.save_final_checkpoint
                        if step % self.save_checkpoints_steps == 0 or at_end:
                            last_saved = self.save()
                        if on_loop_end is not None:
                            on_loop_end(step, metrics)
                        if self._preemption_handler is not None:
                            self._preemption_handler.save_checkpoint_if_preempted()
                        if signals.received:
                            if not (last_saved or "").endswith(f"ckpt-{step}"):
                                last_saved = self.save()
                            raise Preempted(
                                f"stopped on {signals.received} at step {step}; saved {last_saved}. "
                                "Rerun the same command to resume from it.",
                                signals.received,
                            )
            finally:
                reporter.close()
                self._feed = None
        return TrainResult(step=step, history=history, checkpoint=tf.train.latest_checkpoint(self.model_dir))

    def _start_feed(self, phase_index: int, phase: Phase, step: int):
        """The iterator of `phase`'s input at `step`, its position restored where saved."""
        self._feed = InputFeed(
            self.strategy,
            phase.dataset_fn,
            self.model_dir,
            phase_index,
            self.max_checkpoints_to_keep,
            served=phase.served,
        )
        how = self._feed.start(step, step - phase.start_step, verbose=self.verbose)
        if how == "restored" and self.verbose:
            print(f"input position restored at step {step}", flush=True)
        return self._feed.iterator

    def _loop_length(self, step: int, end_step: int) -> int:
        """The steps of the next loop from `step`: it ends at `end_step`, at the next
        checkpoint, and at the next multiple of `loop_end_every_steps`."""
        next_save = (step // self.save_checkpoints_steps + 1) * self.save_checkpoints_steps
        num_steps = min(self.steps_per_loop, end_step - step, next_save - step)
        if self.loop_end_every_steps:
            every = self.loop_end_every_steps
            num_steps = min(num_steps, (step // every + 1) * every - step)
        return num_steps


def _check_steps(
    strategy: tf.distribute.Strategy,
    global_batch_size: int,
    gradient_accumulation_steps: int,
    steps_per_loop: int,
    save_checkpoints_steps: int,
) -> None:
    """The batch splits evenly over the replicas and micro-batches; the step counts are >= 1."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % replicas:
        raise ValueError(
            f"the global batch size {global_batch_size} is not divisible by the {replicas} replicas "
            f"of {type(strategy).__name__}; use a multiple of {replicas} "
            f"(e.g. {max(replicas, global_batch_size // replicas * replicas)})"
        )
    per_replica = global_batch_size // replicas
    if gradient_accumulation_steps < 1 or per_replica % gradient_accumulation_steps:
        raise ValueError(
            f"gradient_accumulation_steps={gradient_accumulation_steps} must be >= 1 and divide the "
            f"per-replica batch of {per_replica} (global batch {global_batch_size} / {replicas} replicas)"
        )
    if steps_per_loop < 1 or save_checkpoints_steps < 1:
        raise ValueError(
            f"steps_per_loop ({steps_per_loop}) and save_checkpoints_steps "
            f"({save_checkpoints_steps}) must be >= 1"
        )


def _current_learning_rate(optimizer: keras.optimizers.Optimizer):
    learning_rate = optimizer.learning_rate
    return learning_rate.numpy() if hasattr(learning_rate, "numpy") else learning_rate
