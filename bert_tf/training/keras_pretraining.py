"""Pretraining under `model.fit`: the path `python -m bert_tf.pretrain --backend=jax` takes.

The TensorFlow path (`loop.Trainer`) is a `tf.distribute` loop. This one is plain Keras,
so it runs on any Keras backend; `run_pretraining` sends JAX runs here:

* the model is `PretrainingModel`, a `BertPretrainer` whose `compute_loss` is the
  original pretraining loss (`bert_tf.models.losses`), trained by `model.fit`;
* the local devices (all processes' devices once JAX is initialized for several hosts)
  share each global batch through `keras.distribution.DataParallel`. The step is one
  XLA program over the whole global batch, so the loss is normalized over the global
  batch exactly as on one device, and the gradient is clipped as a whole;
* the same optimizer and schedule (`PretrainingConfig.create_optimizer`), the same mixed
  precision policies, tf.data pipelines (tensorflow-text) feeding the batches;
* checkpoints: the backups of every `model.fit` run here and in fine-tuning
  (`bert_tf.training.callbacks.TrainingBackup`): `model_dir/backup/step-N/` holds the model
  and optimizer (`model.weights.h5`), the dropout seed state and `state.json`, published
  whole, so a run killed at any moment (`kill -9`) resumes from its last complete backup.
  As in the TensorFlow loop the data position is the step, and the consumed batches are
  skipped: JAX's `fit` draws its batches ahead of the step, so the position of its input
  iterator is not the step's (`bert_tf.training.fit_input`);
* SIGTERM or Ctrl-C: a backup at the step reached, then `Preempted` (exit 143 or 130),
  as in the TensorFlow loop; rerunning the same command resumes;
* the export is the TensorFlow path's (`export_pretrained`: Google and Hugging Face
  formats), so a model pretrained here fine-tunes and exports on TensorFlow.

Example (the CPU demo on JAX):

    KERAS_BACKEND=jax python -m bert_tf.pretrain --num_train_steps=300
"""

from __future__ import annotations

import math
import os

import keras

from bert_tf.layers.transformer_block import rematerialize
from bert_tf.models.losses import next_sentence_weights, pretraining_losses
from bert_tf.models.pretrainer import BertPretrainer, example_features
from bert_tf.training import optimization  # no TensorFlow: the GPU benchmark imports this module
from bert_tf.training.preemption import Preempted, StopSignals

BACKUP_DIR = "backup"  # model_dir/backup: TrainingBackup's folders step-N
METRIC_NAMES = ("masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy", "next_sentence_accuracy")


@keras.saving.register_keras_serializable(package="bert_tf")
class PretrainingModel(keras.Model):
    """A `BertPretrainer` that `model.fit` trains on pretraining feature dicts.

    `fit` takes batches of the original TFRecord features (no separate labels); the loss
    is `pretraining_losses(features, outputs)["loss"]` and the other pretraining values
    are reported as metrics. `pretrainer` is the model that is exported.

    Example:

    >>> import numpy as np
    >>> from bert_tf.config import load_config
    >>> model = PretrainingModel(BertPretrainer(load_config("bert_tiny").replace(vocab_size=50)))
    >>> model.compile(optimizer="adam")
    >>> ids = np.array([[2, 7, 4, 3, 0]] * 2, "int32")
    >>> batch = {"input_ids": ids, "input_mask": (ids > 0).astype("int32"), "segment_ids": 0 * ids,
    ...          "masked_lm_positions": np.array([[2]] * 2), "masked_lm_ids": np.array([[9]] * 2),
    ...          "masked_lm_weights": np.ones((2, 1), "float32"), "next_sentence_labels": np.array([[0], [1]])}
    >>> sorted(model.train_on_batch(batch, return_dict=True))
    ['loss', 'masked_lm_accuracy', 'masked_lm_loss', 'next_sentence_accuracy', 'next_sentence_loss']
    """

    def __init__(self, pretrainer: BertPretrainer, name: str = "pretraining_model", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pretrainer = pretrainer
        self.pretraining_metrics = [keras.metrics.Mean(name=metric) for metric in METRIC_NAMES]

    def call(self, inputs, training=None):
        return self.pretrainer(inputs, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        values = pretraining_losses(x, y_pred)
        # Each metric is weighted by what it averages over, so that an epoch's (or an
        # evaluation's) value is exact, and batches of padding (weight 0) count for nothing.
        weights = {
            "masked_lm": keras.ops.sum(keras.ops.cast(x["masked_lm_weights"], "float32")),
            "next_sentence": keras.ops.sum(next_sentence_weights(x)),
        }
        for metric in self.pretraining_metrics:
            metric.update_state(values[metric.name], sample_weight=weights[metric.name.rsplit("_", 1)[0]])
        return values["loss"]

    def get_config(self) -> dict:
        return {"pretrainer": keras.saving.serialize_keras_object(self.pretrainer), "name": self.name}

    @classmethod
    def from_config(cls, config: dict):
        config = dict(config)
        config["pretrainer"] = keras.saving.deserialize_keras_object(config["pretrainer"])
        return cls(**config)


# --- checkpoints ---------------------------------------------------------------------


def latest_backup(model_dir: str) -> tuple[str, int] | None:
    """(folder, step) of the last complete backup of a run in model_dir, or None."""
    # lazy: no TensorFlow at import (bench/gpu/pretrain_jax.py runs where it is absent)
    from bert_tf import fileio
    from bert_tf.training.callbacks import TrainingBackup

    latest = TrainingBackup(fileio.join(model_dir, BACKUP_DIR)).latest()
    return (latest, int(latest.rsplit("step-", 1)[1])) if latest else None


# --- the run -------------------------------------------------------------------------


def is_chief() -> bool:
    if keras.backend.backend() == "jax":
        import jax

        return jax.process_index() == 0
    return True


def data_parallel() -> keras.distribution.Distribution:
    """Data parallelism over every device JAX sees (all processes' once it is initialized)."""
    return keras.distribution.DataParallel(devices=keras.distribution.list_devices())


def check_settings(settings, model_dir: str) -> None:
    """The TensorFlow loop's settings that have no meaning under `model.fit`, refused clearly."""
    # lazy: no TensorFlow at import (bench/gpu/pretrain_jax.py runs where it is absent)
    import tensorflow as tf

    from bert_tf import fileio
    from bert_tf.training import inputs

    if settings.strategy != "default" or settings.tpu or settings.num_gpus:
        raise inputs.InputError(
            f"--strategy={settings.strategy} --tpu={settings.tpu} --num_gpus={settings.num_gpus} choose a "
            "tf.distribute strategy, which the JAX backend does not use: it trains on every local device "
            "(keras.distribution.DataParallel). Leave these flags out, or run with --backend=tensorflow"
        )
    if settings.eval_every_steps:
        raise inputs.InputError(
            f"--eval_every_steps={settings.eval_every_steps}: model.fit on JAX does not evaluate during "
            "training (an evaluation there would reset the pretraining metrics of the epoch under way, which "
            "the progress line reports); leave it out (--eval_files are evaluated at the end), or run with "
            "--backend=tensorflow"
        )

    if tf.train.latest_checkpoint(model_dir):
        raise inputs.InputError(
            f"--model_dir={model_dir} holds checkpoints of the TensorFlow loop; resume it with "
            "--backend=tensorflow, or start a JAX run in a new --model_dir "
            f"(--init_checkpoint={fileio.join(model_dir, 'export')} starts from its export)"
        )


def train(settings, config, model_dir, vocab_file, train_files, phase2_files, eval_files, grown=None):
    """The `model.fit` half of `run_pretraining` (everything is checked before it is called);
    `grown`: the vocab --extend_vocab grew (`bert_tf.training.domain_vocab.GrownVocab`)."""
    # lazy: no TensorFlow at import (bench/gpu/pretrain_jax.py runs where it is absent)
    from bert_tf.backend import dtype_policy
    from bert_tf.training import inputs
    from bert_tf.training.loop import PretrainingResult
    from bert_tf.training.run_files import export_and_fill_mask, print_eval, write_run_files
    from bert_tf.training.settings import phase_data

    check_settings(settings, model_dir)
    if keras.backend.backend() == "jax" and os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES"):
        keras.distribution.initialize()  # several hosts: one process each, as Keras documents
    distribution = data_parallel()
    devices = len(distribution.device_mesh.devices.flatten())
    accumulation = settings.gradient_accumulation_steps
    if settings.train_batch_size % (devices * accumulation):
        raise inputs.InputError(
            f"--train_batch_size={settings.train_batch_size} is not divisible by the {devices} devices "
            f"that share each of the {accumulation} micro-batches (--gradient_accumulation_steps); use a "
            f"multiple of {devices * accumulation}"
        )
    chief = is_chief()
    phases = phase_data(settings, train_files, phase2_files)
    with dtype_policy(settings.mixed_precision):
        if settings.seed is not None:
            keras.utils.set_random_seed(settings.seed)
        if chief:
            write_run_files(model_dir, config, vocab_file)
            print(
                f"model_dir: {model_dir} (Keras {keras.backend.backend()} backend, {devices} device{'s' if devices != 1 else ''})"
            )
        with distribution.scope():
            model = _compiled_model(settings, config)
            result = _fit_phases(model, settings, model_dir, vocab_file, phases, chief, grown)
            eval_metrics = None
            if eval_files:
                eval_metrics = _evaluate(model, settings, vocab_file, eval_files)
                if chief:
                    print_eval(eval_metrics)
        export_dir = fill_mask = None
        if chief:
            last = result.history[-1] if result.history else {}
            export_dir, fill_mask = export_and_fill_mask(
                model.pretrainer,
                settings,
                model_dir,
                vocab_file,
                train_files[0],
                last.get("masked_lm_accuracy"),
            )
        return PretrainingResult(model_dir, export_dir, result, eval_metrics, fill_mask)


def _compiled_model(settings, config) -> PretrainingModel:
    """The run's model, built and compiled with its optimizer (in the distribution's scope)."""
    model = PretrainingModel(BertPretrainer(config, packed=settings.packing))
    rematerialize(model, settings.remat)
    instances = settings.max_instances_per_row if settings.packing else None
    model(example_features(1, settings.max_seq_length, settings.max_predictions_per_seq, instances))
    # Keras' accumulation: the optimizer averages the micro-batches' gradients and
    # updates every `accumulation` batches (the TensorFlow loop sums shares of the
    # global batch's loss instead: the same when the masked-LM weights are even).
    accumulation = settings.gradient_accumulation_steps
    optimizer = settings.create_optimizer(
        gradient_accumulation_steps=accumulation if accumulation > 1 else None
    )
    # JAX runs nothing but compiled steps well; on TensorFlow the flag decides.
    jit_compile = True if keras.backend.backend() == "jax" else settings.jit_compile
    model.compile(optimizer=optimizer, jit_compile=jit_compile)
    optimizer.build(model.trainable_variables)
    return model


def _fit_phases(
    model: PretrainingModel, settings, model_dir: str, vocab_file, phases, chief: bool, grown=None
):
    """Trains `model` through `phases` (`settings.PhaseData`) from the last backup, or from
    --init_checkpoint on a first run (into the rows of a grown vocab: `grown`); a TrainResult."""
    # lazy: no TensorFlow at import (bench/gpu/pretrain_jax.py runs where it is absent)
    from bert_tf import fileio
    from bert_tf.training.callbacks import TrainingBackup
    from bert_tf.training.loop import TrainResult

    signals = StopSignals(when="after this step, then stopping")
    # SIGTERM or Ctrl-C: a backup at the step reached, then Preempted (exit 143/130).
    backup = TrainingBackup(
        fileio.join(model_dir, BACKUP_DIR),
        every_steps=settings.save_checkpoints_steps,
        signals=signals,
        writer=chief,
    )
    step = backup.restore(model)
    if step:
        print(f"resumed from {backup.latest()} at step {step}", flush=True)
    elif settings.init_checkpoint:
        from bert_tf.training import domain_vocab

        domain_vocab.load_grown(
            model.pretrainer, grown, lambda source: load_init_checkpoint(source, settings.init_checkpoint)
        )
    accumulation = settings.gradient_accumulation_steps
    history: list[dict] = []
    # Progress and the non-finite loss check first: a NaN stops before it is backed up.
    loop = _LoopCallback(settings, model_dir, chief, history, backup)
    for phase in phases:
        if step >= phase.end_step:
            continue
        dataset = _global_dataset(
            settings,
            phase.files,
            vocab_file,
            phase.seq_length,
            phase.predictions,
            phase.seed,
            row_predictions=phase.row_predictions,
        )
        if accumulation > 1:  # each global batch as `accumulation` micro-batches, in order
            dataset = dataset.rebatch(settings.train_batch_size // accumulation)
        dataset = dataset.skip((step - phase.start_step) * accumulation)
        if chief:
            print(f"phase {phase.name}: steps {step}..{phase.end_step}", flush=True)
        loop.start_phase(step, phase.end_step)
        per_epoch = min(settings.steps_per_loop, phase.end_step - step)
        with signals:
            model.fit(
                dataset,
                epochs=math.ceil((phase.end_step - step) / per_epoch),
                steps_per_epoch=per_epoch * accumulation,
                callbacks=[loop, backup],
                shuffle=False,  # the pipeline shuffles
                verbose=0,
            )
        if backup.interrupted:
            raise Preempted(
                f"stopped on {signals.received}; saved {backup.latest()}; rerun to resume", signals.received
            )
        step = loop.step
    loop.close()
    return TrainResult(step=step, history=history, checkpoint=backup.latest())


def _evaluate(model: PretrainingModel, settings, vocab_file, eval_files) -> dict:
    dataset = _global_dataset(
        settings,
        eval_files,
        vocab_file,
        settings.max_seq_length,
        settings.max_predictions_per_seq,
        settings.seed,
        training=False,
        row_predictions=settings.row_predictions(1),
    )
    values = model.evaluate(dataset, steps=settings.eval_steps, return_dict=True, verbose=0)
    metrics = {name: float(values[name]) for name in METRIC_NAMES}
    # Keras' own "loss" averages the batches, padding ones too: the sum of the exact parts.
    metrics["loss"] = metrics["masked_lm_loss"] + metrics["next_sentence_loss"]
    return metrics


def load_init_checkpoint(pretrainer: BertPretrainer, path: str) -> None:
    """Starts from a Google or Hugging Face checkpoint or an export (not a run's model_dir)."""
    # lazy: no TensorFlow at import (bench/gpu/pretrain_jax.py runs where it is absent)
    import tensorflow as tf

    from bert_tf import fileio
    from bert_tf.checkpoints import load_weights
    from bert_tf.checkpoints.google import is_object_based
    from bert_tf.training import inputs

    tf_checkpoint = tf.train.latest_checkpoint(path) if fileio.isdir(path) else None
    if latest_backup(path) or (tf_checkpoint and is_object_based(tf_checkpoint)):
        raise inputs.InputError(
            f"--init_checkpoint={path} is the model_dir of a pretraining run; to start from its weights "
            f"pass its export: --init_checkpoint={fileio.join(path, 'export')} (to continue that run, "
            "pass it as --model_dir instead)"
        )
    from bert_tf.checkpoints.pretrained import PRETRAINING_HEADS, pretraining_heads

    load_weights(pretrainer, path, skip_heads=set(PRETRAINING_HEADS) - pretraining_heads(path))
    print(f"initialized from {path}", flush=True)


def _global_dataset(
    settings, files, vocab_file, seq_length, predictions, seed, training=True, row_predictions=None
):
    """The TensorFlow path's pipeline, batched to the global batch: Keras splits it over devices
    (and, with several processes, gives each its share)."""
    # lazy: no TensorFlow at import (bench/gpu/pretrain_jax.py runs where it is absent)
    import tensorflow as tf

    from bert_tf.training.inputs import pretraining_dataset_fn

    dataset_fn = pretraining_dataset_fn(
        settings,
        files,
        vocab_file,
        seq_length,
        predictions,
        seed,
        training=training,
        row_predictions=row_predictions,
    )
    return dataset_fn(tf.distribute.InputContext())


class _LoopCallback(keras.callbacks.Callback):
    """Counts updates (steps); one progress line per epoch (an epoch is steps_per_loop steps); stops
    at the phase's end, and on a non-finite loss before `backup` (after it in the callbacks)
    saves the step."""

    def __init__(self, settings, model_dir, chief, history, backup):
        super().__init__()
        # lazy: no TensorFlow at import (bench/gpu/pretrain_jax.py runs where it is absent)
        from bert_tf.training.progress import ProgressReporter, ScalarLog, log_dir

        self.save_steps = settings.save_checkpoints_steps
        self.backup = backup
        # The optimizer's schedule, for the progress line (the optimizer's own value is only
        # current on JAX after a state sync).
        self.schedule = optimization.WarmupLinearDecay(
            settings.learning_rate, settings.num_train_steps, settings.warmup_steps
        )
        self.history = history
        self.reporter = ProgressReporter(
            settings.num_train_steps,
            settings.train_batch_size,
            ScalarLog(model_dir, "train", log_dir(model_dir)) if chief else None,
            enabled=chief,
        )
        self.accumulation = settings.gradient_accumulation_steps
        self.step = 0
        self.end = 0
        self.error: str | None = None
        self._micro_batches = 0

    def start_phase(self, step: int, end: int) -> None:
        self.step, self.end = step, end
        self.reporter.start(step)

    def on_train_batch_end(self, batch, logs=None):
        self._micro_batches += 1
        if self._micro_batches % self.accumulation:
            return  # the update comes with the last micro-batch
        self.step += 1
        at_end = self.step >= self.end
        if self.step % self.save_steps == 0 or at_end or self.backup.signals.received:
            loss = float(logs["loss"])  # the epoch's running mean: NaN once any step was
            if not math.isfinite(loss):
                self._stop(f"the loss became {loss} before step {self.step}; stopping without saving")
                return
        if at_end:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if self.error:
            return
        metrics = {name: float(logs[name]) for name in ("loss", *METRIC_NAMES)}
        if not math.isfinite(metrics["loss"]):
            self._stop(f"the loss became {metrics['loss']} by step {self.step}; stopping without saving")
            return
        learning_rate = float(self.schedule(self.step))
        self.reporter.report(self.step, metrics, learning_rate)
        entry = {"step": self.step, **metrics, "learning_rate": learning_rate}
        if self.reporter.sequences_per_second is not None:
            entry["sequences_per_second"] = self.reporter.sequences_per_second
        self.history.append(entry)

    def _stop(self, message: str) -> None:
        self.error = (
            f"{message}. The last good checkpoint is {self.backup.latest() or 'none (nothing was saved yet)'}. "
            "Lower --learning_rate, raise --num_warmup_steps or train in float32, then rerun to resume from it."
        )
        from bert_tf.training.loop import NonFiniteLossError  # lazy: see above

        # Raised here, the backup after this callback never sees the step.
        raise NonFiniteLossError(self.error)

    def close(self) -> None:
        self.reporter.close()
