"""BERT pretraining: joins the pipelines, the model and the training loop.

`run_pretraining(PretrainingConfig(...))` is what `python -m bert_tf.pretrain` calls.
With the defaults it runs the demo: a vocab learnt from the embedded corpus (cached), the
`demo` config pretrained on the CPU for a few minutes, and a [MASK] filled at the end.

Example:

>>> from bert_tf.training.pretraining import PretrainingConfig, run_pretraining
>>> settings = PretrainingConfig(model_dir="/tmp/bert_demo", num_train_steps=20, num_warmup_steps=2)
>>> settings.phase1_steps
20
>>> result = run_pretraining(settings)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import keras
import tensorflow as tf

from bert_tf import fileio
from bert_tf.backend import BACKENDS
from bert_tf.cache import cache_dir as default_cache_dir
from bert_tf.checkpoints import export_pretrained, inspect_checkpoint, load_weights
from bert_tf.checkpoints.google import is_object_based
from bert_tf.cli import setting
from bert_tf.config import BertConfig, load_config
from bert_tf.errors import UsageError
from bert_tf.models import BertPretrainer
from bert_tf.models.losses import next_sentence_weights, pretraining_losses
from bert_tf.models.pretrainer import example_features
from bert_tf.outputs import check_output
from bert_tf.tokenization import BertTokenizer, load_vocab
from bert_tf.training import distribute, inputs, keras_pretraining, optimization
from bert_tf.training.evaluation import PeriodicEvaluator
from bert_tf.training.fill_mask import fill_mask_demo
from bert_tf.training.loop import Phase, PretrainingResult, Trainer
from pipelines import corpus, segmenters
from pipelines.build_vocab import build_vocab
from pipelines.dataset import check_packing_budget
from pipelines.packing import default_max_predictions_per_row
from pipelines.text_input import check_mostly_text

DEFAULT_CONFIG = "demo"
DEMO_MODEL_DIR = "runs/demo"  # relative: in the current directory, where a user finds it
MIXED_PRECISION_POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """Everything a pretraining run needs; the defaults are the CPU demo's.

    `train_files` (TFRecords, original or ours) and `corpus` (raw text: one sentence per
    line, blank lines between documents) are comma-separated globs; with neither, the
    embedded corpus is used. `phase2_fraction` > 0 trains the last fraction of the steps
    at `phase2_seq_length` (the original recipe: 0.1 at 512).
    """

    model_dir: str | None = setting(
        None,
        "Checkpoints, logs and the export; rerun the same command to resume. Default: runs/demo "
        "in the current directory.",
    )
    config: str | None = setting(
        None,
        f"Model config: a name in configs/ (bert_base, ...) or a JSON path. Default: the --init_checkpoint's "
        f"own config, else {DEFAULT_CONFIG}.",
    )
    vocab_file: str | None = setting(
        None,
        "WordPiece vocab; default: the --init_checkpoint's own, else with the embedded corpus learnt "
        "and cached. From scratch, its size replaces the config's vocab_size.",
    )
    do_lower_case: bool = setting(True, "Lower-case and strip accents (uncased models).")
    init_checkpoint: str | None = setting(None, "Start from this checkpoint (Google, Hugging Face or ours).")
    train_files: str | None = setting(
        None, "Comma-separated globs of pretraining TFRecords (original format or ours)."
    )
    corpus: str | None = setting(
        None, "Comma-separated globs of raw text (one sentence per line), masked on the fly."
    )
    eval_files: str | None = setting(
        None, "Held-out data (TFRecords or raw text) for MLM/NSP metrics at the end."
    )
    eval_steps: int = setting(20, "Batches of --eval_files to evaluate.")
    eval_every_steps: int = setting(
        0,
        "Evaluate every N steps (0: only at the end, with --eval_files): MLM loss and accuracy, NSP "
        "accuracy to the progress line and model_dir/logs/eval; the best checkpoint by eval MLM loss is "
        "kept in model_dir/best. Without --eval_files, every 20th block of 256 documents (raw text) or "
        "every 20th record (TFRecords) is held out of training for it.",
    )
    phase2_train_files: str | None = setting(
        None, "TFRecords at --phase2_seq_length for phase 2 (raw text: not needed)."
    )
    train_batch_size: int = setting(64, "Global batch size (all replicas).")
    num_train_steps: int = setting(1800, "Optimizer steps in all.")
    num_warmup_steps: int = setting(150, "Linear warmup steps.")
    learning_rate: float = setting(5e-3, "Peak learning rate.")
    optimizer: str = setting("adamw", "AdamW (original) or LAMB (large batches).", choices=("adamw", "lamb"))
    weight_decay: float = setting(0.01, "Decoupled weight decay (not on LayerNorm and biases).")
    max_seq_length: int = setting(64, "Sequence length of phase 1.")
    max_predictions_per_seq: int = setting(10, "Masked positions per sequence.")
    phase2_seq_length: int = setting(512, "Sequence length of phase 2.")
    phase2_fraction: float = setting(0.0, "Fraction of the steps trained at phase 2 (0: off).")
    phase2_max_predictions_per_seq: int | None = setting(
        None, "Masked positions in phase 2 (default: scaled with the length, 20 -> 80)."
    )
    masked_lm_prob: float = setting(0.15, "Raw text: fraction of tokens masked.")
    whole_word_mask: bool = setting(False, "Raw text: mask whole words.")
    word_segmenter: str | None = setting(
        None,
        "Raw text with --whole_word_mask: segment CJK text into words (jieba) and mask all characters of a "
        'word together; pip install "bert_tf[chinese]".',
    )
    dupe_factor: int = setting(1, "Raw text: maskings of each document per epoch.")
    accept_non_text: bool = setting(
        False,
        "Raw text: train on a corpus even if most of its lines are not text (invalid UTF-8, no word pieces).",
    )
    save_checkpoints_steps: int = setting(600, "Checkpoint every N steps.")
    steps_per_loop: int = setting(100, "Steps per compiled loop (and per progress line).")
    mixed_precision: str = setting(
        "float32",
        "Keras dtype policy; mixed_float16 adds dynamic loss scaling.",
        choices=MIXED_PRECISION_POLICIES,
    )
    jit_compile: bool = setting(False, "XLA-compile the forward/backward pass.")
    gradient_accumulation_steps: int = setting(1, "Micro-batches per optimizer step.")
    seed: int | None = setting(12345, "Seed for weights, dropout and data (resumes reproduce it).")
    strategy: str = "default"  # these three: distribute.define_strategy_flags
    tpu: str | None = None
    num_gpus: int = 0
    fill_mask_demo: bool = setting(True, "", flag=None)
    cache_dir: str | None = setting(None, "", flag=None)  # None: $BERT_TF_CACHE or ~/.cache/bert_tf
    packing: bool = setting(
        False, "Pack several instances into each row: no compute on padding, same losses."
    )
    max_predictions_per_row: int | None = setting(
        None, "With --packing: masked positions per row (default: the per-sequence budget, scaled)."
    )
    max_instances_per_row: int = setting(8, "With --packing: instances (NSP slots) per row at most.")
    backend: str | None = setting(
        None,
        "Keras backend: tensorflow (the tf.distribute loop) or jax (model.fit on the local devices); "
        "default: $KERAS_BACKEND, else tensorflow.",
        choices=BACKENDS,
    )

    def __post_init__(self) -> None:
        if self.backend is not None and self.backend not in BACKENDS:
            raise UsageError(f"unknown --backend={self.backend}; use one of {', '.join(BACKENDS)}")
        if self.mixed_precision not in MIXED_PRECISION_POLICIES:
            raise UsageError(
                f"unknown --mixed_precision={self.mixed_precision}; use one of {', '.join(MIXED_PRECISION_POLICIES)}"
            )
        if self.optimizer not in optimization.OPTIMIZERS:
            raise UsageError(f"unknown --optimizer={self.optimizer}; use adamw or lamb")
        if self.train_files and self.corpus:
            raise UsageError("pass --train_files (TFRecords) or --corpus (raw text), not both")
        if self.word_segmenter is not None:
            problems = segmenters.setting_problems(
                self.word_segmenter,
                whole_word_mask=self.whole_word_mask,
                whole_word_setting="--whole_word_mask",
            )
            if self.train_files:
                problems.append(
                    "--word_segmenter applies to raw text (--corpus), not to --train_files TFRecords"
                )
            if problems:
                raise UsageError("; ".join(problems))
        if not 0.0 <= self.phase2_fraction < 1.0:
            raise UsageError(f"--phase2_fraction must be in [0, 1), got {self.phase2_fraction}")
        for name in (
            "train_batch_size",
            "num_train_steps",
            "max_seq_length",
            "max_predictions_per_seq",
            "phase2_seq_length",
            "eval_steps",
            "dupe_factor",
            "save_checkpoints_steps",
            "steps_per_loop",
            "gradient_accumulation_steps",
        ):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if self.packing:
            try:
                check_packing_budget(
                    self.max_predictions_per_seq, self.row_predictions(1), self.max_instances_per_row
                )
            except ValueError as error:
                raise UsageError(f"--packing: {error}") from None
        if self.eval_every_steps < 0 or self.eval_steps < 1:
            raise UsageError(
                f"--eval_every_steps must be >= 0 and --eval_steps >= 1, got {self.eval_every_steps} "
                f"and {self.eval_steps}"
            )
        if self.num_warmup_steps < 0 or self.num_warmup_steps > self.num_train_steps:
            raise UsageError(
                f"--num_warmup_steps={self.num_warmup_steps} must be in [0, --num_train_steps={self.num_train_steps}]"
            )
        if not self.learning_rate > 0:
            raise UsageError(f"--learning_rate must be > 0, got {self.learning_rate} (BERT-Base used 1e-4)")
        if not self.weight_decay >= 0:
            raise UsageError(f"--weight_decay must be >= 0, got {self.weight_decay}")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise UsageError(f"--masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")
        if self.max_predictions_per_seq > self.max_seq_length:
            raise UsageError(
                f"--max_predictions_per_seq={self.max_predictions_per_seq} is above --max_seq_length="
                f"{self.max_seq_length}; use at most about 15% of the length (20 for 128)"
            )

    @property
    def phase1_steps(self) -> int:
        return self.num_train_steps - round(self.num_train_steps * self.phase2_fraction)

    @property
    def phase2_predictions(self) -> int:
        if self.phase2_max_predictions_per_seq:
            return self.phase2_max_predictions_per_seq
        return max(1, round(self.max_predictions_per_seq * self.phase2_seq_length / self.max_seq_length))

    def row_predictions(self, phase: int) -> int | None:
        """With --packing: the masked positions of a packed row in phase 1 or 2 (None: unpacked)."""
        if not self.packing:
            return None
        if self.max_predictions_per_row is None:
            per_sequence = self.max_predictions_per_seq if phase == 1 else self.phase2_predictions
            return default_max_predictions_per_row(per_sequence, self.max_instances_per_row)
        if phase == 1:
            return self.max_predictions_per_row
        return max(1, round(self.max_predictions_per_row * self.phase2_seq_length / self.max_seq_length))


def cache_dir(settings: PretrainingConfig) -> Path:
    return default_cache_dir(settings.cache_dir)


# --- the pieces ------------------------------------------------------------------


def embedded_corpus_and_vocab(
    settings: PretrainingConfig, vocab_size: int, vocab_file: str | None = None
) -> tuple[str, str]:
    """The embedded corpus as a file, and `vocab_file` or else a vocab learnt from it (both cached)."""
    directory = cache_dir(settings)
    corpus_file = directory / "pydoc_corpus.txt"
    if not corpus_file.exists():
        corpus.write_corpus(str(corpus_file))
    if vocab_file:
        return str(corpus_file), vocab_file
    casing = "uncased" if settings.do_lower_case else "cased"
    vocab_file = directory / f"pydoc_vocab_{vocab_size}_{casing}.txt"
    if not vocab_file.exists():
        print(
            f"learning a vocab of up to {vocab_size} tokens from the embedded corpus -> {vocab_file}",
            flush=True,
        )
        # build_vocab writes to a temporary name and renames: a killed run leaves no half file.
        build_vocab([str(corpus_file)], vocab_size, str(vocab_file), settings.do_lower_case)
    return str(corpus_file), str(vocab_file)


def masked_lm_totals(features) -> dict:
    """Normalizers of the pretraining loss, summed over the global batch by the loop.

    `examples` counts NSP instances (several per row when packed); `positions` the row
    positions, for the fill rate.
    """
    return {
        "masked_lm_weight": tf.reduce_sum(tf.cast(features["masked_lm_weights"], tf.float32)),
        "examples": tf.reduce_sum(next_sentence_weights(features)),
        "positions": tf.cast(tf.size(features["input_mask"]), tf.float32),
    }


def pretraining_loss_share(features, outputs, totals) -> dict:
    """This batch's share of the global batch's loss and metrics (see loop.py).

    `pretraining_losses` averages over the local batch: the masked-LM terms over the
    masked-LM weights, the next-sentence terms over the examples. Re-weighting each by the
    local fraction of the global normalizer makes the shares sum (over replicas and
    micro-batches) to the values of the whole global batch. `real_tokens` (non-padding
    tokens of the global batch) and `fill_rate` (their fraction of its positions) are
    shares in the same way.
    """
    local = pretraining_losses(features, outputs)
    local_weight = tf.reduce_sum(tf.cast(features["masked_lm_weights"], tf.float32))
    masked_lm_share = (local_weight + 1e-5) / (totals["masked_lm_weight"] + 1e-5)
    examples_share = tf.reduce_sum(next_sentence_weights(features)) / totals["examples"]
    real_tokens = tf.reduce_sum(tf.cast(tf.cast(features["input_mask"], tf.int32) > 0, tf.float32))
    masked_lm_loss = tf.cast(local["masked_lm_loss"], tf.float32) * masked_lm_share
    next_sentence_loss = tf.cast(local["next_sentence_loss"], tf.float32) * examples_share
    return {
        "loss": masked_lm_loss + next_sentence_loss,
        "masked_lm_loss": masked_lm_loss,
        "next_sentence_loss": next_sentence_loss,
        "masked_lm_accuracy": tf.cast(local["masked_lm_accuracy"], tf.float32) * masked_lm_share,
        "next_sentence_accuracy": tf.cast(local["next_sentence_accuracy"], tf.float32) * examples_share,
        "real_tokens": real_tokens,
        "fill_rate": real_tokens / totals["positions"],
    }


# Evaluation weighs each batch's metrics by what they average over (padding batches weigh 0).
EVALUATION_WEIGHTS = {
    "masked_lm_loss": "masked_lm_weight",
    "masked_lm_accuracy": "masked_lm_weight",
    "next_sentence_loss": "examples",
    "next_sentence_accuracy": "examples",
}


def model_inputs(features) -> dict:
    # Packed batches also carry the [CLS] position of each instance.
    names = (
        (*MODEL_INPUTS, "next_sentence_positions") if "next_sentence_positions" in features else MODEL_INPUTS
    )
    return {name: features[name] for name in names}


# --- the run ---------------------------------------------------------------------


def run_pretraining(settings: PretrainingConfig) -> PretrainingResult:
    """Validates the inputs, then pretrains, evaluates, exports and (demo) fills a [MASK].

    Without `model_dir` the run goes to `runs/demo` in the current directory, named in the
    first and the last line printed; a rerun resumes there."""
    if not settings.model_dir:
        print(
            f"model_dir: {_shown(DEMO_MODEL_DIR)} (the default; --model_dir chooses another)",
            flush=True,
        )
    result = _run_pretraining(settings)
    if not result.is_chief:
        return result
    print(
        f"the run is in {_shown(settings.model_dir or DEMO_MODEL_DIR)}: rerunning the same command resumes it (with a "
        "larger --num_train_steps it trains on); another --model_dir starts afresh",
        flush=True,
    )
    return result


def _shown(path: str) -> str:
    """A local path made absolute, so the line says where the folder is; gs:// and the like as given."""
    return path if "://" in path else os.path.abspath(path)


def _run_pretraining(settings: PretrainingConfig) -> PretrainingResult:
    strategy = None
    if (
        settings.strategy in ("multi_worker", "tpu") or settings.tpu
    ) and keras.backend.backend() == "tensorflow":
        # Collectives and the TPU system are configured when TensorFlow starts: the strategy
        # comes before the checks below, which run TensorFlow ops.
        strategy = distribute.get_strategy(settings.strategy, settings.tpu, settings.num_gpus)
    config, vocab_file = model_config_and_vocab(settings)

    # 1. Data and vocab. Nothing is written to model_dir before every check has passed.
    if settings.train_files:
        train_files = inputs.expand_files(settings.train_files, "train_files")
    elif settings.corpus:
        train_files = inputs.expand_files(settings.corpus, "corpus")
        if not vocab_file:
            raise UsageError(
                "--corpus (raw text) needs --vocab_file to tokenize it; learn one with "
                "python -m pipelines.build_vocab, or pass --train_files (TFRecords)"
            )
    else:
        corpus_file, vocab_file = embedded_corpus_and_vocab(settings, config.vocab_size, vocab_file)
        train_files = [corpus_file]
    if vocab_file:
        vocab = load_vocab(vocab_file)
        if len(vocab) != config.vocab_size and not settings.init_checkpoint:
            # From scratch the vocab decides the embedding size (the demo's vocab is learnt to
            # the config's size, but the learner may stop short of it on a small corpus).
            if settings.vocab_file:
                named = settings.config or DEFAULT_CONFIG
                print(
                    f"vocab_size {len(vocab)} from {vocab_file} (the config {named} says {config.vocab_size}): "
                    "pretraining from scratch, the vocab decides",
                    flush=True,
                )
            config = config.replace(vocab_size=len(vocab))
        inputs.check_vocab(vocab, vocab_file, config)
        if settings.corpus:
            tokenizer = BertTokenizer(vocab_file, lower_case=settings.do_lower_case)
            check_mostly_text(train_files, tokenizer, "--corpus", accept=settings.accept_non_text)
    if settings.init_checkpoint:
        check_init_checkpoint(settings.init_checkpoint, config)
    for length, name in (
        (settings.max_seq_length, "max_seq_length"),
        (settings.phase2_seq_length, "phase2_seq_length"),
    ):
        if (name == "max_seq_length" or settings.phase2_fraction) and length > config.max_position_embeddings:
            raise UsageError(
                f"--{name}={length} is above the config's max_position_embeddings="
                f"{config.max_position_embeddings}; pass --{name}={config.max_position_embeddings} or less"
            )
    inputs.check_record_shapes(
        train_files,
        settings.max_seq_length,
        settings.max_predictions_per_seq,
        "train_files",
        settings.packing,
    )
    phase2_files = train_files
    if settings.phase2_fraction:
        if settings.phase2_train_files:
            phase2_files = inputs.expand_files(settings.phase2_train_files, "phase2_train_files")
        elif settings.train_files and inputs.is_tfrecord(train_files[0]):
            raise inputs.InputError(
                f"--phase2_fraction={settings.phase2_fraction} with TFRecords needs --phase2_train_files made "
                f"at --max_seq_length={settings.phase2_seq_length} (TFRecords have a fixed length)"
            )
        inputs.check_record_shapes(
            phase2_files,
            settings.phase2_seq_length,
            settings.phase2_predictions,
            "phase2_train_files",
            settings.packing,
        )
    eval_files = inputs.expand_files(settings.eval_files, "eval_files") if settings.eval_files else None
    if settings.eval_every_steps and not eval_files:
        inputs.check_holdout(train_files, "train_files" if settings.train_files else "corpus")
    if eval_files:
        inputs.check_record_shapes(
            eval_files,
            settings.max_seq_length,
            settings.max_predictions_per_seq,
            "eval_files",
            settings.packing,
        )

    # An earlier run in model_dir resumes (check_model_dir: of the same config and vocab).
    model_dir = settings.model_dir or DEMO_MODEL_DIR
    check_output(model_dir, "--model_dir", overwrite=False)
    inputs.check_model_dir(model_dir, config, vocab_file)
    if settings.backend and settings.backend != keras.backend.backend():
        raise UsageError(
            f"--backend={settings.backend}, but Keras runs on {keras.backend.backend()}: the backend is fixed "
            f"when Keras is first imported; start Python with KERAS_BACKEND={settings.backend}"
        )
    if keras.backend.backend() != "tensorflow":  # model.fit under keras.distribution
        return keras_pretraining.train(
            settings, config, model_dir, vocab_file, train_files, phase2_files, eval_files
        )
    strategy = strategy or distribute.get_strategy(settings.strategy, settings.tpu, settings.num_gpus)
    replicas = strategy.num_replicas_in_sync
    if settings.train_batch_size % replicas:
        raise inputs.InputError(
            f"--train_batch_size={settings.train_batch_size} is not divisible by the {replicas} replicas of "
            f"{type(strategy).__name__}; use a multiple of {replicas}"
        )
    return _train(settings, config, strategy, model_dir, vocab_file, train_files, phase2_files, eval_files)


def _train(settings, config, strategy, model_dir, vocab_file, train_files, phase2_files, eval_files):
    previous_policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(settings.mixed_precision)
    try:
        if settings.seed is not None:
            keras.utils.set_random_seed(settings.seed)
        is_chief = distribute.is_chief(strategy)
        if is_chief:
            fileio.makedirs(model_dir)
            config.to_json_file(fileio.join(model_dir, inputs.CONFIG_FILE))
            if vocab_file and not fileio.exists(fileio.join(model_dir, inputs.VOCAB_FILE)):
                fileio.copy(vocab_file, fileio.join(model_dir, inputs.VOCAB_FILE))
            if settings.model_dir:  # the default one is named in the run's first line
                print(f"model_dir: {model_dir}", flush=True)

        with strategy.scope():
            model = BertPretrainer(config, packed=settings.packing)
            instances = settings.max_instances_per_row if settings.packing else None
            model(example_features(1, settings.max_seq_length, settings.max_predictions_per_seq, instances))
            optimizer = optimization.create_optimizer(
                settings.learning_rate,
                settings.num_train_steps,
                settings.num_warmup_steps,
                optimizer=settings.optimizer,
                weight_decay=settings.weight_decay,
                presummed_gradients=True,
            )
        trainer = Trainer(
            strategy,
            model,
            optimizer,
            pretraining_loss_share,
            model_dir,
            global_batch_size=settings.train_batch_size,
            totals_fn=masked_lm_totals,
            model_inputs=model_inputs,
            steps_per_loop=settings.steps_per_loop,
            save_checkpoints_steps=settings.save_checkpoints_steps,
            gradient_accumulation_steps=settings.gradient_accumulation_steps,
            jit_compile=settings.jit_compile,
            loop_end_every_steps=settings.eval_every_steps,
            metric_weights=EVALUATION_WEIGHTS,
        )

        def evaluate(dataset_fn, steps: int) -> dict:
            metrics = trainer.evaluate(dataset_fn, steps)
            return {"loss": metrics["masked_lm_loss"] + metrics["next_sentence_loss"], **metrics}

        if settings.init_checkpoint and not tf.train.latest_checkpoint(model_dir):
            _load_init_checkpoint(model, settings.init_checkpoint)

        seed = settings.seed
        # Without --eval_files, periodic evaluation reads a slice held out of phase 1's data.
        holdout = bool(settings.eval_every_steps and not eval_files)
        phases = [
            Phase(
                f"1 (seq {settings.max_seq_length})",
                0,
                settings.phase1_steps,
                inputs.pretraining_dataset_fn(
                    settings,
                    train_files,
                    vocab_file,
                    settings.max_seq_length,
                    settings.max_predictions_per_seq,
                    seed,
                    row_predictions=settings.row_predictions(1),
                    held_out="exclude" if holdout else None,
                ),
            )
        ]
        if settings.phase1_steps < settings.num_train_steps:
            phases.append(
                Phase(
                    f"2 (seq {settings.phase2_seq_length})",
                    settings.phase1_steps,
                    settings.num_train_steps,
                    inputs.pretraining_dataset_fn(
                        settings,
                        phase2_files,
                        vocab_file,
                        settings.phase2_seq_length,
                        settings.phase2_predictions,
                        None if seed is None else seed + 1,
                        row_predictions=settings.row_predictions(2),
                        # Phase 2 on the same raw text must not train on the evaluation slice.
                        held_out="exclude" if holdout and phase2_files == train_files else None,
                    ),
                )
            )
        if phases[0].end_step == 0:
            phases = phases[1:]
        eval_fn = None
        if eval_files or holdout:
            eval_fn = inputs.pretraining_dataset_fn(
                settings,
                eval_files or train_files,
                vocab_file,
                settings.max_seq_length,
                settings.max_predictions_per_seq,
                seed,
                training=False,
                row_predictions=settings.row_predictions(1),
                held_out="only" if holdout else None,
            )
        evaluator = None
        if settings.eval_every_steps:
            evaluator = PeriodicEvaluator(
                trainer, eval_fn, settings.eval_steps, settings.eval_every_steps, evaluate=evaluate
            )
        try:
            result = trainer.train(phases, on_loop_end=evaluator)
        finally:
            if evaluator is not None:
                evaluator.close()

        eval_metrics = None
        if evaluator is not None and evaluator.history and evaluator.history[-1]["step"] == result.step:
            eval_metrics = {k: v for k, v in evaluator.history[-1].items() if k != "step"}
        elif eval_fn is not None:
            eval_metrics = evaluate(eval_fn, settings.eval_steps)
            if is_chief:
                print("eval: " + "  ".join(f"{k} {v:.4f}" for k, v in eval_metrics.items()), flush=True)

        export_dir = None
        if is_chief:
            export_dir = export_pretrained(
                model,
                fileio.join(model_dir, "export"),
                vocab_file=vocab_file,
                lower_case=settings.do_lower_case,
            )
            print(f"saved the pretrained model for from_pretrained: {export_dir}", flush=True)
        fill_mask = None
        if (
            settings.fill_mask_demo
            and is_chief
            and vocab_file
            and not (settings.train_files or settings.corpus)
        ):
            fill_mask = fill_mask_demo(model, vocab_file, settings.do_lower_case, train_files[0])
        return PretrainingResult(
            model_dir,
            export_dir,
            result,
            eval_metrics,
            fill_mask,
            evaluator.history if evaluator else [],
            is_chief=is_chief,
        )
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


def model_config_and_vocab(settings: PretrainingConfig) -> tuple[BertConfig, str | None]:
    """(BertConfig, vocab file or None): --config and --vocab_file, or, for those not given,
    the --init_checkpoint's own (said in one line), else the demo config."""
    if settings.config or not settings.init_checkpoint:
        return load_config(settings.config or DEFAULT_CONFIG), settings.vocab_file

    path = settings.init_checkpoint
    ours = tf.train.latest_checkpoint(path) if fileio.isdir(path) else None
    if ours and is_object_based(ours):  # another run's model_dir: its config and vocab beside
        config = load_config(fileio.join(path, inputs.CONFIG_FILE))
        vocab = fileio.join(path, inputs.VOCAB_FILE)
        vocab_file = vocab if fileio.isfile(vocab) else None
    else:
        config, tokenizer_settings = inspect_checkpoint(path)
        vocab_file = tokenizer_settings.vocab_file
    vocab_file = settings.vocab_file or vocab_file
    own = "config and vocab" if vocab_file and not settings.vocab_file else "config"
    print(f"using the {own} of --init_checkpoint={path} (no --config given)", flush=True)
    return config, vocab_file


def check_init_checkpoint(path: str, config) -> None:
    """--init_checkpoint must be a checkpoint of this config's shapes (checked before writing)."""
    ours = tf.train.latest_checkpoint(path) if fileio.isdir(path) else None
    if ours and is_object_based(ours):
        return  # another run's model_dir: restored object by object, checked by the restore
    found, _ = inspect_checkpoint(path)
    shapes = (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "intermediate_size",
        "max_position_embeddings",
    )
    differences = [
        f"{name} {getattr(found, name)} there, {getattr(config, name)} here"
        for name in shapes
        if getattr(found, name) != getattr(config, name)
    ]
    if differences:
        own = fileio.join(path if fileio.isdir(path) else fileio.dirname(path), inputs.CONFIG_FILE)
        fix = (
            f"pass --config={own} (and its vocab)"
            if fileio.isfile(own)
            else "pass the --config (and vocab) it was trained with"
        )
        raise inputs.InputError(
            f"--init_checkpoint={path} was trained with another config ({', '.join(differences)}); "
            f"{fix}, or leave --config out to use the checkpoint's own"
        )


def _load_init_checkpoint(model, path: str) -> None:
    """Starts from a Google or Hugging Face checkpoint, an export, or another run's model_dir."""
    # A run's model_dir holds object-based checkpoints; a Google directory a name-based one.
    ours = tf.train.latest_checkpoint(path) if fileio.isdir(path) else None
    if ours and not is_object_based(ours):
        ours = None
    if ours:
        tf.train.Checkpoint(model=model).restore(ours).expect_partial().assert_existing_objects_matched()
    else:
        load_weights(model, path)
    print(f"initialized from {ours or path}", flush=True)
