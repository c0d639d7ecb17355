"""Fine-tune, evaluate, predict and save: what `python -m bert_tf.finetune` runs.

`run(FinetuneSettings(...))` reads the task's data, builds the task model on a pretrained
(or randomly initialised) encoder, trains it with `model.fit` under the requested
`tf.distribute` strategy, scores the eval data with the task's official metrics into
`OUTPUT_DIR/eval_results.json`, writes predictions in the official formats, and saves
the fine-tuned model to `OUTPUT_DIR/model/` (see `bert_tf.tasks.finetuned`).

While it trains (see `bert_tf.training.callbacks`) it scores the eval data every epoch or
every `eval_every_steps` updates into `OUTPUT_DIR/eval_history.jsonl`, writes TensorBoard
scalars to `OUTPUT_DIR/logs/`, prints a progress line, and backs the training state up
in `OUTPUT_DIR/backup/`: rerunning the same command after a crash, a `kill -9` or a
SIGTERM continues from the last backup and ends with the same weights as a run that was
never interrupted. The backup holds the input's position too (`bert_tf.training.fit_input`),
so a resumed run does not read, tokenize and batch again the batches already seen; where
it cannot (the JAX backend, several replicas) it skips them. The backup is removed once the run has finished (`is_finished`).

Example (a tiny random-init model on a two-row CSV):

>>> import os, tempfile
>>> from bert_tf.tasks.runner import FinetuneSettings, run
>>> d = tempfile.mkdtemp()
>>> _ = open(os.path.join(d, "vocab.txt"), "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]))
>>> _ = open(os.path.join(d, "train.csv"), "w").write("text,label\\ngood,pos\\nbad,neg\\n")
>>> results = run(FinetuneSettings(task="classification", output_dir=os.path.join(d, "out"),
...     vocab_file=os.path.join(d, "vocab.txt"), bert_config="bert_tiny", max_seq_length=8,
...     train_file=os.path.join(d, "train.csv"), eval_file=os.path.join(d, "train.csv"),
...     train_batch_size=2, num_train_epochs=1.0, verbose=0))
>>> sorted(results)
['accuracy', 'bag_of_words_accuracy', 'eval_loss', 'majority_baseline']
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time

import keras
import tensorflow as tf

from bert_tf import fileio, text_encoding
from bert_tf.backend import dtype_policy
from bert_tf.checkpoints import from_pretrained
from bert_tf.config import load_config
from bert_tf.errors import UsageError
from bert_tf.models import BertEncoder
from bert_tf.outputs import check_output
from bert_tf.tasks import keras_api, recipe, registry
from bert_tf.tasks.family import TaskData
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.finetuned import is_finetuned_dir, load_finetuned, read_info
from bert_tf.tasks.info import FinetunedModelInfo
from bert_tf.tasks.preprocessor import TaskPreprocessor
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.tokenization import BertTokenizer, load_vocab
from bert_tf.training import callbacks, precision, progress
from bert_tf.training.callbacks import TrainingBackup
from bert_tf.training.distribute import get_strategy
from bert_tf.training.fit_input import InputPosition
from bert_tf.training.preemption import Preempted, StopSignals

logger = logging.getLogger(__name__)

MODEL_DIR = "model"
# What a finished run leaves in its output folder (not overwritten without --overwrite).
FINISHED = ("eval_results.json", "data_stats.json", MODEL_DIR)
BACKUP_DIR = "backup"  # the training state while a run is unfinished
LORA_FILE = "lora_weights.npz"  # with --lora_rank: the adapters and the head alone, beside model/
HISTORY_FILE = "eval_history.jsonl"
# Settings a resumed run must share with the run whose backup it continues.
RESUME_FIELDS = (
    "task",
    "init_checkpoint",
    "bert_config",
    "vocab_file",
    "lower_case",
    "train_file",
    "data_dir",
    "tfds_name",
    "max_seq_length",
    "options",  # the task family's (columns, windows, SQuAD's settings, ...)
    "train_batch_size",
    "learning_rate",
    "num_train_epochs",
    "warmup_proportion",
    "seed",
    "mixed_precision",
    "gradient_accumulation_steps",
    "lora_rank",
    "lora_alpha",
)


def _has_backup(output_dir: str) -> bool:
    directory = fileio.join(output_dir, BACKUP_DIR)
    return fileio.isdir(directory) and any(name.startswith("step-") for name in fileio.listdir(directory))


def is_finished(output_dir: str) -> bool:
    """Whether `output_dir` holds a finished run: its results are written and no training
    backup is left (an unfinished run of the same command resumes instead)."""
    return any(fileio.exists(fileio.join(output_dir, name)) for name in FINISHED) and not _has_backup(
        output_dir
    )


def main_metric(family) -> str:
    """The metric that picks the best model and stops training early: the task family's."""
    return family.main_metric


@dataclasses.dataclass
class TrainingPlan:
    """How many updates a run makes and when it evaluates, from the settings and the data."""

    num_examples: int
    steps_per_epoch: int
    num_train_epochs: float  # --num_train_epochs, or the recipe's for the data's size
    num_train_steps: int  # optimizer updates
    micro_batch_size: int  # train_batch_size / gradient_accumulation_steps
    eval_every_steps: int  # 0: no evaluation during training

    @classmethod
    def make(cls, settings: FinetuneSettings, num_examples: int, has_eval_data: bool) -> TrainingPlan:
        steps_per_epoch = max(1, math.ceil(num_examples / settings.train_batch_size))
        epochs = settings.num_train_epochs or recipe.num_train_epochs(settings.recipe, steps_per_epoch)
        num_train_steps = max(1, int(steps_per_epoch * epochs))
        every = settings.eval_every_steps
        if every and every > num_train_steps:
            raise UsageError(
                f"--eval_every_steps={every} is more than the {num_train_steps} updates of this run "
                f"({num_examples} examples, batch {settings.train_batch_size}, {epochs:g} "
                f"epochs); pass a smaller value, or leave it unset to evaluate after every epoch"
            )
        if not has_eval_data:
            for name in ("eval_every_steps", "early_stopping_patience"):
                if getattr(settings, name):
                    raise UsageError(f"--{name} evaluates during training: it needs eval data (--eval_file)")
            if settings.keep_best_model:
                raise UsageError("--keep_best_model picks by evaluation: it needs eval data (--eval_file)")
            every = 0
        elif every is None:
            every = steps_per_epoch
        if (settings.early_stopping_patience or settings.keep_best_model) and not every:
            raise UsageError(
                "--eval_every_steps=0 turns evaluation during training off, which "
                "--early_stopping_patience and --keep_best_model need"
            )
        return cls(
            num_examples,
            steps_per_epoch,
            epochs,
            num_train_steps,
            settings.train_batch_size // settings.gradient_accumulation_steps,
            every,
        )


def check_sequence_lengths(settings: FinetuneSettings, config) -> None:
    """--max_seq_length must fit the model's position embeddings (checked before any data is read)."""
    if settings.max_seq_length > config.max_position_embeddings:
        raise UsageError(
            f"--max_seq_length={settings.max_seq_length} is above the model's max_position_embeddings="
            f"{config.max_position_embeddings}; pass --max_seq_length={config.max_position_embeddings} or less"
        )


def load_tokenizer(settings: FinetuneSettings, checkpoint_settings=None):
    vocab_file = settings.vocab_file or (checkpoint_settings.vocab_file if checkpoint_settings else None)
    if not vocab_file:
        raise UsageError("no vocab file: pass --vocab_file, or an --init_checkpoint that has a vocab.txt")
    lower_case = settings.lower_case
    if lower_case is None:
        lower_case = checkpoint_settings.lower_case if checkpoint_settings else True
    return BertTokenizer(vocab_file, lower_case=lower_case)


def _encoder(settings: FinetuneSettings):
    if settings.init_checkpoint:
        encoder, checkpoint_settings = from_pretrained(settings.init_checkpoint, heads="encoder")
        return encoder, checkpoint_settings
    if not settings.bert_config:
        raise UsageError(
            "pass --init_checkpoint (a pretrained model) or --bert_config_file (random initialisation)"
        )
    config = load_config(settings.bert_config)
    if settings.vocab_file:  # from scratch: the vocab decides the embedding size
        vocab_size = len(load_vocab(settings.vocab_file))
        if vocab_size != config.vocab_size:
            logger.info(
                "random initialisation: vocab_size %d from %s (the config %s says %d)",
                vocab_size,
                settings.vocab_file,
                settings.bert_config,
                config.vocab_size,
            )
            config = config.replace(vocab_size=vocab_size)
    return BertEncoder(config), None


def _finetuned_info(settings: FinetuneSettings) -> FinetunedModelInfo | None:
    """The task.json when init_checkpoint is the model/ folder of a fine-tuning run of the same
    task, else None.

    Such a run starts from the whole fine-tuned model (to predict, evaluate or train on),
    with its own vocab, casing and labels. A fine-tuned model of another task gives its
    encoder to a new head, as a pretrained checkpoint does.
    """
    directory = settings.init_checkpoint
    if not is_finetuned_dir(directory):
        return None  # a pretrained checkpoint (or nothing from_pretrained can read: it says so)
    info = read_info(directory)
    if info.task.lower() != settings.task.lower():
        logger.info(
            "%s holds a model fine-tuned for task %r: its encoder starts a new %s head",
            directory,
            info.task,
            settings.task,
        )
        return None
    if settings.vocab_file or settings.bert_config or settings.lower_case is not None:
        logger.warning(
            "%s is a fine-tuned model: its own vocab, config and casing are used; "
            "--vocab_file, --bert_config and --do_lower_case are ignored",
            directory,
        )
    return info


def _log_stats(data: TaskData, family) -> dict:
    stats = data.stats.as_dict()
    logger.info("%s data: %s", data.name, stats)
    family.warn_if_truncated(data)
    return stats


def run(settings: FinetuneSettings, pause_after_epochs: float | None = None) -> dict[str, float]:
    """Trains (when there is training data), evaluates, predicts and saves; returns the
    eval metrics (also written to OUTPUT_DIR/eval_results.json). One run: `bert_tf.tasks.search.run`
    makes the several of --search and --seeds.

    `pause_after_epochs` (a search's rungs): training stops after that many epochs of its
    schedule, its backup kept as after SIGTERM, and the scores of its best evaluation so far
    are returned; the same call without it (or with a later pause) continues the run."""
    if settings.search or settings.seeds > 1:
        raise UsageError("--search and --seeds make several runs: call bert_tf.tasks.search.run")
    keras.utils.set_random_seed(settings.seed)
    # Every check before anything is written: the output folder, the model, the vocab, the
    # lengths and the data. Only then is the output folder created.
    unfinished = _has_backup(settings.output_dir)
    state = check_output(
        settings.output_dir,
        "--output_dir",
        overwrite=settings.overwrite,
        finished=() if unfinished else FINISHED,
    )
    if unfinished and not settings.overwrite:
        _check_resumable(settings)
    strategy = get_strategy(settings.strategy, settings.tpu, settings.num_gpus)
    policy = precision.resolve(settings.mixed_precision, strategy)
    # The readers decode the data files in --input_encoding (bert_tf.fileio.open_text).
    with dtype_policy(policy), text_encoding.reading_as(settings.input_encoding):
        return _run(
            settings, strategy, policy, state == "overwrite" or settings.overwrite, pause_after_epochs
        )


def _run(
    settings: FinetuneSettings, strategy, policy: str, fresh: bool, pause_after_epochs: float | None
) -> dict[str, float]:
    family, start = _family(settings, strategy)
    settings = family.settings  # with the family's max_seq_length where none was given
    train, evals, predicts = _load_data(family, settings)
    data_stats = {data.name: _log_stats(data, family) for data in (*train, *evals, *predicts)}
    # Steps count batches of features (SQuAD: windows, several per long context).
    num_examples = train[0].stats.num_features if train else 0
    plan = TrainingPlan.make(settings, num_examples, has_eval_data=bool(evals))
    if train and settings.num_train_epochs is None:
        _say_recipe(settings, plan)
    # Fitted before anything is written: training data it cannot learn from stops the run.
    baseline = _fit_baseline(family, settings, train, evals)
    if fresh:  # --overwrite: the training state of an earlier run is not reused
        fileio.rmtree(fileio.join(settings.output_dir, BACKUP_DIR))
    fileio.makedirs(settings.output_dir)
    if policy != settings.mixed_precision:  # said once every check has passed
        logger.info("mixed precision: %s (--mixed_precision=%s)", policy, settings.mixed_precision)
    model = _task_model(family, start, strategy, plan)
    if train:
        until = plan.num_train_steps
        if pause_after_epochs is not None:
            until = min(until, max(1, int(plan.steps_per_epoch * pause_after_epochs)))
        history = _train(settings, strategy, model, family, train[0], evals, plan, until)
        if history is not None:  # paused: its backup continues it
            if not history:
                raise UsageError(
                    f"paused at update {until} before the run's first evaluation: evaluate more often "
                    "(--eval_every_steps) or pause later"
                )
            logger.info("paused after update %d of %d; its backup continues it", until, plan.num_train_steps)
            metric = main_metric(family)
            return max((scores for _, scores in history), key=lambda scores: scores[metric])
    scored = [*train, *evals] if settings.eval_train else evals
    results, baselines, beaten_by = _score(family, model, settings, scored, baseline)
    if results and train and not plan.eval_every_steps:
        # Evaluated only now: the scores at the run's last update, beside its curves (bert_tf.plot).
        _write_scalars(settings.output_dir, "eval", callbacks.optimizer_updates(model), results)
    if baseline and train and evals:  # drawn beside the eval curves (bert_tf.plot)
        prefix = baseline.name + "_"
        scores = {k.removeprefix(prefix): v for k, v in baselines.items() if k.startswith(prefix)}
        _write_scalars(
            settings.output_dir, progress.BASELINE_SPLIT, callbacks.optimizer_updates(model), scores
        )
    for data in predicts:
        outputs = _predict(family, model, data, settings)
        for path in family.write(data, outputs, settings.output_dir):
            logger.info("wrote %s", path)
    fileio.write_json(fileio.join(settings.output_dir, "data_stats.json"), data_stats)
    saved = settings.save_model and bool(train)
    if saved:
        # The output folder was checked (finished results need --overwrite): a model/ there is
        # this run's own, left by an attempt stopped after saving it.
        model.save(fileio.join(settings.output_dir, MODEL_DIR), overwrite=True)  # adapters merged
        if model.lora_rank:
            model.save_lora_weights(fileio.join(settings.output_dir, LORA_FILE))
    # Last: without the backup the folder reads as a finished run.
    fileio.rmtree(fileio.join(settings.output_dir, BACKUP_DIR))
    where = [f"scores in {fileio.join(settings.output_dir, 'eval_results.json')}"] if results else []
    if saved:
        where.append(f"the fine-tuned model in {fileio.join(settings.output_dir, MODEL_DIR)}")
        if model.lora_rank:
            where.append(f"its LoRA adapters and head in {fileio.join(settings.output_dir, LORA_FILE)}")
    if where:  # predictions are named as they are written
        logger.info("%s", "; ".join(where))
    for warning in beaten_by:  # the closing lines: the model does not beat its baseline
        logger.warning("%s", warning)
    return {**results, **baselines}


def _say_recipe(settings: FinetuneSettings, plan: TrainingPlan) -> None:
    """How long the run trains, where --recipe chose it."""
    grown = plan.num_train_epochs > recipe.ORIGINAL_EPOCHS
    logger.info(
        "training: %g epochs, %d updates (--recipe=%s%s; --num_train_epochs sets it)",
        plan.num_train_epochs,
        plan.num_train_steps,
        settings.recipe,
        f": {plan.num_examples} examples make {plan.steps_per_epoch} batches an epoch, so small data "
        f"trains longer than the original's {recipe.ORIGINAL_EPOCHS:g} epochs, to make at least "
        f"{recipe.MIN_UPDATES} updates; --recipe=original keeps {recipe.ORIGINAL_EPOCHS:g}"
        if grown
        else "",
    )


def _write_scalars(output_dir: str, split: str, step: int, scalars: dict[str, float]) -> None:
    log = progress.ScalarLog(output_dir, split, fileio.join(progress.log_dir(output_dir), split))
    log.write(step, scalars)
    log.close()


def _fit_baseline(family, settings: FinetuneSettings, train: list[TaskData], evals: list[TaskData]):
    """The family's baseline fitted on the training data, when there is eval data to score it
    on and --baseline is on; None otherwise."""
    if not (settings.baseline and train and evals):
        return None
    started = time.monotonic()
    baseline = family.fit_baseline(train[0])
    if baseline is None:
        return None
    sample = (
        f"a random sample of {baseline.num_fitted} of the {baseline.num_examples} training examples"
        if baseline.num_fitted < baseline.num_examples
        else f"the {baseline.num_examples} training examples"
    )
    logger.info(
        "baseline: %s, fitted on %s in %.1f s (--nobaseline skips it)",
        baseline.description,
        sample,
        time.monotonic() - started,
    )
    return baseline


def _family(settings: FinetuneSettings, strategy):
    """The run's task family on its settings, and what the model starts from: the encoder of
    the init checkpoint, or the whole model of a fine-tuned folder of the same task (its head,
    labels, tokenizer and the options it was fine-tuned with, unless told otherwise)."""
    family_class = registry.family_for_task(settings.task)
    finetuned = _finetuned_info(settings)
    if finetuned:
        saved = family_class.saved_options(finetuned)
        settings = dataclasses.replace(settings, options={**saved, **settings.options})
    with strategy.scope():
        if finetuned:
            start = load_finetuned(settings.init_checkpoint, compile=False)
            tokenizer, config = start.tokenizer, start.encoder.config
        else:
            start, checkpoint_settings = _encoder(settings)
            tokenizer = load_tokenizer(settings, checkpoint_settings)
            config = start.config
    family = family_class(settings, tokenizer)
    check_sequence_lengths(family.settings, config)
    # TPUs compile one program per shape: pad to max_seq_length, fixed-size batches.
    family.static = family.static or isinstance(strategy, tf.distribute.TPUStrategy)
    # A distributed batch is split along its first dimension: packed rows and their labels apart.
    family.pack = family.pack and strategy.num_replicas_in_sync == 1
    if finetuned:  # what the model learnt from its training data: labels, a threshold, ...
        family.restore(finetuned)
        if finetuned.label_list is not None:
            family.label_list = list(finetuned.label_list)
    return family, start


def _load_data(family, settings: FinetuneSettings) -> tuple[list[TaskData], list[TaskData], list[TaskData]]:
    """The run's train, eval and predict data, counted; refused when there is none."""
    train, evals, predicts = family.load("train"), family.load("eval"), family.load("predict")
    if not (train or evals or predicts):
        raise TaskDataError(
            f"no data for task {settings.task!r}: pass --train_file/--eval_file/--predict_file, "
            "--data_dir (GLUE) or --tfds_name"
        )
    if family.label_list is None and family.needs_label_list:
        raise TaskDataError(
            f"task {settings.task!r} takes its labels from the training data; pass --train_file"
        )
    for data in (*train, *evals, *predicts):
        family.count(data, progress=bool(int(settings.verbose)))
    return train, evals, predicts


def _task_model(family, start, strategy, plan: TrainingPlan):
    """The task model of the Python API (a new head on `start`'s encoder, or the fine-tuned
    model `start`) with the run's preprocessor, compiled with the same recipe."""
    settings = family.settings
    with strategy.scope():
        preprocessor = TaskPreprocessor(family.task_info(), family.tokenizer)
        if isinstance(start, BertEncoder):
            model = family.build_model(start, preprocessor=preprocessor)
        else:
            model = start
            model.preprocessor = preprocessor
        if settings.lora_rank:  # the encoder frozen: the adapters and the head train
            model.enable_lora(settings.lora_rank, settings.lora_alpha)
        model.compile(
            learning_rate=settings.learning_rate,
            warmup_proportion=settings.warmup_proportion,
            gradient_accumulation_steps=settings.gradient_accumulation_steps,
            jit_compile="auto" if settings.jit_compile is None else settings.jit_compile,
        )
        keras_api.build_schedule(model, plan.num_train_steps)
    return model


def _score(
    family, model, settings: FinetuneSettings, scored: list[TaskData], baseline=None
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """Scores of each scored split ("accuracy" for the eval data, "accuracy_mismatched" for
    MNLI's second dev set, "train_accuracy" for the training data), the baselines' (majority
    class; the family's `baseline`, e.g. "bag_of_words_accuracy"), written together to
    eval_results.json, and a warning for each eval split where the baseline is not beaten; an
    eval split's outputs are written."""
    results: dict[str, float] = {}
    baselines: dict[str, float] = {}  # beside the scores, not among the curves
    beaten_by: list[str] = []
    for data in scored:
        scores, outputs = _evaluate(family, model, data, settings)
        results.update(scores)
        if data.name != "train":
            family.write(data, outputs, settings.output_dir)
            baselines.update(_majority_baseline(family, data, outputs, scores))
            if baseline is not None:
                found, warning = _compare_baseline(family, baseline, data, scores)
                baselines.update(found)
                beaten_by += [warning] if warning else []
    if scored:
        fileio.write_json(fileio.join(settings.output_dir, "eval_results.json"), {**results, **baselines})
        logger.info("eval results: %s", results)
    return results, baselines, beaten_by


def _compare_baseline(
    family, baseline, data: TaskData, scores: dict[str, float]
) -> tuple[dict[str, float], str]:
    """({"<baseline>_<metric><suffix>": value}, a warning when the model's main metric does
    not beat the baseline's, else "") of one scored eval split."""
    suffix = _suffix(data)
    found = baseline.score(data)
    metric = main_metric(family)
    ours, theirs = scores[f"{metric}{suffix}"], found[metric]
    logger.info("%s data: %s %.4f, baseline %.4f (%s)", data.name, metric, ours, theirs, baseline.description)
    warning = ""
    if not ours > theirs:
        warning = (
            f"{data.name} data: the fine-tuned model ({metric} {ours:.4f}) does not beat the baseline "
            f"({baseline.description}: {theirs:.4f}); train for more updates (--num_train_epochs) or "
            "try other learning rates, or use the baseline"
        )
    # Per-label scores (multi-label's "f1/<label>") stay the model's own.
    named = {f"{baseline.name}_{name}{suffix}": value for name, value in found.items() if "/" not in name}
    return named, warning


def _predict(family, model, data: TaskData, settings: FinetuneSettings):
    """The model's outputs on one split (the one place a model runs over eval or predict data)."""
    return family.predict(model, data, settings.eval_batch_size, progress=bool(int(settings.verbose)))


def _evaluate(family, model, data: TaskData, settings: FinetuneSettings) -> tuple[dict[str, float], object]:
    """({metric: value}, outputs) of one labelled split, with the names eval_results.json uses."""
    outputs = _predict(family, model, data, settings)
    scores = family.score(data, outputs)
    if outputs.loss is not None:
        scores["eval_loss"] = outputs.loss
    if data.name == "train":
        return {f"train_{name.removeprefix('eval_')}": float(v) for name, v in scores.items()}, outputs
    suffix = _suffix(data)
    return {f"{name}{suffix}": float(value) for name, value in scores.items()}, outputs


def _suffix(data: TaskData) -> str:
    """What the metric names of an eval split end with: "" (eval), "_mismatched" (MNLI's second)."""
    return "" if data.name == "eval" else "_" + data.name.split("_", 1)[1]


def _majority_baseline(family, data: TaskData, outputs, scores: dict[str, float]) -> dict[str, float]:
    """{"majority_baseline": the accuracy of always answering the commonest class} of a scored
    eval split, said beside its accuracy, with a warning when the model does not beat it."""
    found = family.majority_baseline(outputs)
    if found is None:
        return {}
    label, baseline = found
    suffix = _suffix(data)
    accuracy = scores[f"accuracy{suffix}"]
    logger.info(
        "%s data: accuracy %.4f, majority-class baseline %.4f (always answering %r)",
        data.name,
        accuracy,
        baseline,
        label,
    )
    if accuracy <= baseline:
        logger.warning(
            "%s data: accuracy %.4f does not beat the majority-class baseline %.4f (always answering %r): "
            "the model has not learnt the task; train for more updates (--num_train_epochs), at a higher "
            "--learning_rate, or on more data",
            data.name,
            accuracy,
            baseline,
            label,
        )
    return {f"majority_baseline{suffix}": baseline}


def _train(
    settings: FinetuneSettings,
    strategy,
    model,
    family,
    train: TaskData,
    evals,
    plan: TrainingPlan,
    until: int,
):
    """model.fit with the run's callbacks, from the last backup if there is one, to update
    `until`. Paused there before the run's last update (not stopped early), it returns the
    history of evaluations ([(step, {metric: value})]); finished, None."""
    output_dir = settings.output_dir
    backup_dir = fileio.join(output_dir, BACKUP_DIR)
    log_dir = progress.log_dir(output_dir)
    evaluation, best, stopping = (
        _evaluation_callbacks(settings, family, evals, plan) if plan.eval_every_steps else (None, None, None)
    )
    fit_callbacks = [c for c in (evaluation, best, stopping) if c is not None]
    signals = StopSignals(when="after this update, then stopping")
    # The input's position goes into each backup where fit's iterator can be saved.
    position = InputPosition() if InputPosition.supported(strategy) else None
    backup = callbacks.TrainingBackup(
        backup_dir,
        every_steps=settings.save_checkpoints_steps,
        stateful=fit_callbacks,
        extra_state={"settings": _resume_settings(settings)},
        signals=signals,
        input_position=position,
    )
    with strategy.scope():  # the optimizer's slots were built with its schedule (`_task_model`)
        start = backup.restore(model)
    if not start:  # what an earlier attempt without a backup logged is not this run's
        progress.remove_metrics(output_dir)
        if fileio.exists(fileio.join(output_dir, HISTORY_FILE)):
            fileio.remove(fileio.join(output_dir, HISTORY_FILE))
    progress.record_run(output_dir, "bert_tf.finetune", start)
    fit_callbacks.append(backup)
    fit_callbacks.append(
        callbacks.ProgressLogger(
            plan.num_train_steps,
            settings.train_batch_size,
            every_steps=settings.log_every_steps,
            verbose=int(settings.verbose),
            scalars=progress.ScalarLog(output_dir, "train", fileio.join(log_dir, "train")),
        )
    )
    stopped = stopping is not None and stopping.stopped_step is not None
    if start < until and not stopped:
        accumulation = settings.gradient_accumulation_steps
        # The batches an uninterrupted run would see from this step on: the saved input
        # position continues there; without one, the batches already seen are skipped (read,
        # tokenized and batched again: the longer, the later the step).
        skipped = 0 if backup.input_restored else start * accumulation
        _say_training(plan, settings, start, backup.input_restored, skipped)
        dataset = family.dataset(train, plan.micro_batch_size, training=True)
        # skip(0) too: the saved iterator must be of the same pipeline as the one restoring it.
        dataset = dataset.skip(skipped)
        if position is not None:
            dataset = position.track(dataset)
        with signals:
            # Keras' own fit: TaskModel.fit would compile a fresh optimizer for the updates it
            # runs, dropping the schedule built for the whole run and the state restored above.
            keras.Model.fit(
                model,
                dataset,
                epochs=1,
                steps_per_epoch=(until - start) * accumulation,
                callbacks=fit_callbacks,
                shuffle=False,  # the dataset is shuffled already
                verbose=0,
            )
        if backup.interrupted:
            raise Preempted(
                f"stopped by {signals.received} at update {callbacks.optimizer_updates(model)} of "
                f"{plan.num_train_steps}; the training state is in {backup_dir}: rerun the same command "
                "to continue",
                signals.received,
            )
    stopped = stopping is not None and stopping.stopped_step is not None
    if until < plan.num_train_steps and not stopped:  # saved by `backup` at its last update
        return evaluation.history if evaluation is not None else []
    if best is not None and best.restore(model):
        logger.info("using the best model: %s %.4f at step %d", best.monitor, best.best, best.best_step)
    return None


def _evaluation_callbacks(settings: FinetuneSettings, family, evals: list[TaskData], plan: TrainingPlan):
    """The evaluation every plan.eval_every_steps updates, and what follows its main metric:
    the best model kept (--keep_best_model) and early stopping (--early_stopping_patience)."""
    output_dir = settings.output_dir

    def evaluate(model):
        results = {}
        for data in evals:
            results.update(_evaluate(family, model, data, settings)[0])
        return results

    evaluation = callbacks.TaskEvaluation(
        evaluate,
        every_steps=plan.eval_every_steps,
        history_file=fileio.join(output_dir, HISTORY_FILE),
        scalars=progress.ScalarLog(output_dir, "eval", fileio.join(progress.log_dir(output_dir), "eval")),
    )
    monitor = callbacks.VALIDATION_PREFIX + main_metric(family)
    best = (
        callbacks.BestModel(fileio.join(output_dir, BACKUP_DIR, "best.weights.npz"), monitor)
        if settings.keep_best_model
        else None
    )
    stopping = (
        callbacks.EarlyStopping(monitor, settings.early_stopping_patience)
        if settings.early_stopping_patience
        else None
    )
    return evaluation, best, stopping


def _say_training(plan: TrainingPlan, settings: FinetuneSettings, start: int, restored: bool, skipped: int):
    accumulation = settings.gradient_accumulation_steps
    logger.info(
        "training on %d examples for %d updates of %d examples%s%s",
        plan.num_examples,
        plan.num_train_steps,
        settings.train_batch_size,
        f" ({accumulation} micro-batches of {plan.micro_batch_size})" if accumulation > 1 else "",
        (
            f", from the backup of step {start} "
            + ("(input position restored)" if restored else f"(skipping {skipped} batches)")
            if start
            else ""
        ),
    )


def _resume_settings(settings: FinetuneSettings) -> dict:
    return {name: getattr(settings, name) for name in RESUME_FIELDS}


def _check_resumable(settings: FinetuneSettings) -> None:
    """An unfinished run in output_dir continues only under the same training settings."""
    state = TrainingBackup(fileio.join(settings.output_dir, BACKUP_DIR)).read_state() or {}
    saved = state.get("settings", {})
    changed = [
        f"--{name}={saved[name]!r} there, {value!r} now"
        for name, value in _resume_settings(settings).items()
        if name in saved and saved[name] != value
    ]
    if changed:
        raise UsageError(
            f"--output_dir={settings.output_dir} holds an unfinished run (step {state.get('step')}) with other "
            f"training settings ({'; '.join(changed)}); rerun it with its own flags to continue it, pass "
            "--overwrite to start again, or choose another folder"
        )
