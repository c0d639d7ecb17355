"""The settings of a pretraining run: `PretrainingConfig`, one field per flag of
`python -m bert_tf.pretrain` (see `bert_tf.cli.define_settings_flags`), checked on creation.

Example:

>>> from bert_tf.training.settings import PretrainingConfig
>>> settings = PretrainingConfig(model_dir="/tmp/bert_demo", num_train_steps=20, num_warmup_steps=2)
>>> settings.phase1_steps, PretrainingConfig(num_train_steps=300).warmup_steps
(20, 30)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bert_tf.backend import BACKENDS
from bert_tf.cache import cache_dir as default_cache_dir
from bert_tf.cli import setting
from bert_tf.errors import UsageError
from bert_tf.preprocessing.packing import default_max_predictions_per_row
from bert_tf.training import optimization
from pipelines import data_service, segmenters, text_input
from pipelines.dataset import check_packing_budget
from pipelines.settings import MAX_MASKED_LM_PROB, predictions_for

DEFAULT_CONFIG = "demo"
DEMO_MODEL_DIR = "runs/demo"  # relative: in the current directory, where a user finds it
MIXED_PRECISION_POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
WARMUP_PROPORTION = 0.1  # of the steps, when --num_warmup_steps is not given
RECIPE_SEQ_LENGTH = 128  # phase 1 of the original recipe
DEMO_SEQ_LENGTH = 64  # the demo's, for a few minutes on a CPU


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
    do_lower_case: bool | None = setting(
        None,
        "Lower-case and strip accents (uncased models); default: the --init_checkpoint's casing, else true.",
    )
    init_checkpoint: str | None = setting(
        None,
        "Start from this checkpoint (Google, Hugging Face or ours), with its config, vocab and casing unless "
        "given: with --corpus, domain-adaptive pretraining (its heads continue; one it lacks starts afresh).",
    )
    extend_vocab: int = setting(
        0,
        "With --init_checkpoint and --corpus: add up to N words the corpus uses often and the vocab splits into "
        "pieces, in its [unusedN] slots (ids and shapes unchanged); each starts as the mean of its old pieces.",
    )
    extend_vocab_append: bool = setting(
        False,
        "With --extend_vocab: add the words that do not fit the [unusedN] slots as new rows (vocab_size grows).",
    )
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
    num_warmup_steps: int | None = setting(
        None,
        f"Linear warmup steps (default: {WARMUP_PROPORTION:.0%} of --num_train_steps, as fine-tuning's).",
    )
    learning_rate: float = setting(4e-3, "Peak learning rate.")
    optimizer: str = setting("adamw", "AdamW (original) or LAMB (large batches).", choices=("adamw", "lamb"))
    weight_decay: float = setting(0.01, "Decoupled weight decay (not on LayerNorm and biases).")
    max_seq_length: int | None = setting(
        None,
        f"Sequence length of phase 1 (default: the original recipe's {RECIPE_SEQ_LENGTH} for your own data, "
        f"--corpus, --train_files or --init_checkpoint; {DEMO_SEQ_LENGTH} for the CPU demo).",
    )
    max_predictions_per_seq: int | None = setting(
        None,
        "Masked positions per sequence (default: --max_seq_length x --masked_lm_prob rounded up: 20 at 128 and "
        "0.15, the original's).",
    )
    phase2_seq_length: int = setting(512, "Sequence length of phase 2.")
    phase2_fraction: float = setting(0.0, "Fraction of the steps trained at phase 2 (0: off).")
    phase2_max_predictions_per_seq: int | None = setting(
        None, "Masked positions in phase 2 (default: scaled with the length, 20 -> 80)."
    )
    masked_lm_prob: float = setting(
        0.15, "Raw text and unmasked records: fraction of tokens masked, at most 0.5 (MosaicBERT: 0.3)."
    )
    next_sentence_prediction: bool | None = setting(
        None,
        "Train next-sentence prediction on sentence pairs (the original recipe, the default; from an "
        "--init_checkpoint, only if it has the head); false: the masked LM alone on full-length segments of whole "
        "sentences across documents (RoBERTa's FULL-SENTENCES).",
    )
    whole_word_mask: bool = setting(
        False, "Raw text: mask whole words.", flag="do_whole_word_mask", old_flags=("whole_word_mask",)
    )
    word_segmenter: str | None = setting(
        None,
        "Raw text with --do_whole_word_mask: segment CJK text into words (jieba) and mask all characters of a "
        'word together; pip install "bert_tf[chinese]".',
    )
    dupe_factor: int = setting(1, "Raw text: maskings of each document per epoch.")
    input_encoding: str | None = setting(
        None,
        "Raw text: the corpus' encoding (latin-1, cp1252, ...; default UTF-8, and a corpus that is not UTF-8 "
        "is refused with the fix).",
    )
    accept_non_text: bool = setting(
        False,
        "Raw text: train on a corpus even if some lines do not decode (their bad bytes dropped) or most of "
        "them are not text (no word pieces).",
    )
    save_checkpoints_steps: int = setting(600, "Checkpoint every N steps.")
    steps_per_loop: int = setting(100, "Steps per compiled loop (and per progress line).")
    mixed_precision: str = setting(
        "float32",
        "Keras dtype policy; mixed_float16 adds dynamic loss scaling.",
        choices=MIXED_PRECISION_POLICIES,
    )
    jit_compile: bool = setting(False, "XLA-compile the forward/backward pass.")
    remat: bool = setting(
        False,
        "Recompute each Transformer block's activations in the backward pass instead of keeping them "
        "(rematerialization): less memory for long sequences and big batches, more compute; the same "
        "gradients.",
    )
    gradient_accumulation_steps: int = setting(1, "Micro-batches per optimizer step.")
    seed: int | None = setting(12345, "Seed for weights, dropout and data (resumes reproduce it).")
    strategy: str = "default"  # these three: distribute.define_strategy_flags
    tpu: str | None = None
    num_gpus: int = 0
    fill_mask_demo: bool = setting(True, "", flag=None)
    cache_dir: str | None = setting(None, "", flag=None)  # None: bert_tf.cache.cache_dir()
    packing: bool | None = setting(
        None,
        "Pack several sentence pairs into each row: no compute on padding, the same losses (default: on with "
        "next-sentence prediction; masked-LM-only segments fill their rows already).",
    )
    max_predictions_per_row: int | None = setting(
        None, "With --packing: masked positions per row (default: the per-sequence budget, scaled)."
    )
    max_instances_per_row: int = setting(8, "With --packing: instances (NSP slots) per row at most.")
    data_service_address: str | None = setting(
        None,
        "grpc://HOST:PORT of a tf.data service dispatcher (python -m pipelines.data_service): its workers "
        "turn the training data into batches; the input position then lives in the service (a resume "
        "reads on, nothing is replayed).",
    )
    backend: str | None = setting(
        None,
        "Keras backend: tensorflow (the tf.distribute loop) or jax (model.fit on the local devices); "
        "default: $KERAS_BACKEND, else tensorflow.",
        choices=BACKENDS,
    )

    def __post_init__(self) -> None:
        self._fill_length_defaults()
        self._check_choices()
        self._check_data_options()
        self._check_numbers()

    def _fill_length_defaults(self) -> None:
        if self.max_seq_length is None:  # frozen: the default follows what is trained on
            own_data = self.corpus or self.train_files or self.init_checkpoint
            object.__setattr__(self, "max_seq_length", RECIPE_SEQ_LENGTH if own_data else DEMO_SEQ_LENGTH)
        if self.max_predictions_per_seq is None and 0.0 < self.masked_lm_prob <= MAX_MASKED_LM_PROB:
            # frozen: the default follows the length and the masking rate
            predictions = predictions_for(self.max_seq_length, self.masked_lm_prob)
            object.__setattr__(self, "max_predictions_per_seq", predictions)

    def _check_choices(self) -> None:
        if not 0.0 < self.masked_lm_prob <= MAX_MASKED_LM_PROB:
            raise UsageError(
                f"--masked_lm_prob must be in (0, {MAX_MASKED_LM_PROB}], got {self.masked_lm_prob} (the original "
                "masks 0.15, MosaicBERT 0.3; beyond half the text there is too little left to predict from)"
            )
        if self.packing and self.next_sentence_prediction is False:
            raise UsageError(
                "--packing packs next-sentence pairs; with --next_sentence_prediction=false every row is already "
                "a full-length segment: drop --packing"
            )
        if self.backend is not None and self.backend not in BACKENDS:
            raise UsageError(f"unknown --backend={self.backend}; use one of {', '.join(BACKENDS)}")
        if self.mixed_precision not in MIXED_PRECISION_POLICIES:
            raise UsageError(
                f"unknown --mixed_precision={self.mixed_precision}; use one of {', '.join(MIXED_PRECISION_POLICIES)}"
            )
        if self.optimizer not in optimization.OPTIMIZERS:
            raise UsageError(f"unknown --optimizer={self.optimizer}; use adamw or lamb")

    def _check_data_options(self) -> None:
        """The options of the data: vocab extension, encoding, word segmenter, tf.data service."""
        if self.train_files and self.corpus:
            raise UsageError("pass --train_files (TFRecords) or --corpus (raw text), not both")
        if self.extend_vocab < 0:
            raise UsageError(f"--extend_vocab must be >= 0 (words to add), got {self.extend_vocab}")
        if self.extend_vocab and not (self.init_checkpoint and self.corpus):
            raise UsageError(
                "--extend_vocab adds --corpus' words to the vocab of --init_checkpoint: pass both (from scratch, "
                "a vocab is learnt from the corpus anyway)"
            )
        if self.extend_vocab and self.vocab_file:
            raise UsageError("--extend_vocab extends the checkpoint's own vocab: leave --vocab_file out")
        if self.extend_vocab_append and not self.extend_vocab:
            raise UsageError(
                "--extend_vocab_append applies with --extend_vocab=N: pass how many words to add"
            )
        if self.input_encoding is not None:
            text_input.line_encoding(self.input_encoding)
            if self.train_files:
                raise UsageError(
                    "--input_encoding applies to raw text (--corpus), not to --train_files TFRecords"
                )
        if self.word_segmenter is not None:
            problems = segmenters.setting_problems(
                self.word_segmenter,
                whole_word_mask=self.whole_word_mask,
                whole_word_setting="--do_whole_word_mask",
            )
            if self.train_files:
                problems.append(
                    "--word_segmenter applies to raw text (--corpus), not to --train_files TFRecords"
                )
            if problems:
                raise UsageError("; ".join(problems))
        if self.data_service_address is not None:
            data_service.split_address(self.data_service_address)
            if self.word_segmenter is not None:
                raise UsageError(
                    "--word_segmenter runs in Python, which tf.data service workers cannot run; leave out "
                    "--data_service_address or --word_segmenter"
                )
            if self.eval_every_steps and not self.eval_files:
                raise UsageError(
                    "--data_service_address with --eval_every_steps needs --eval_files: the service reads "
                    "the whole corpus, so no slice of it is held out"
                )

    def _check_numbers(self) -> None:
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
        if self.num_warmup_steps is not None and not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise UsageError(
                f"--num_warmup_steps={self.num_warmup_steps} must be in [0, --num_train_steps={self.num_train_steps}]"
            )
        if not self.learning_rate > 0:
            raise UsageError(f"--learning_rate must be > 0, got {self.learning_rate} (BERT-Base used 1e-4)")
        if not self.weight_decay >= 0:
            raise UsageError(f"--weight_decay must be >= 0, got {self.weight_decay}")
        if self.max_predictions_per_seq > self.max_seq_length:
            raise UsageError(
                f"--max_predictions_per_seq={self.max_predictions_per_seq} is above --max_seq_length="
                f"{self.max_seq_length}; use at most about 15% of the length (20 for 128)"
            )

    def resolved(self, lower_case: bool = True, next_sentence_head: bool = True) -> PretrainingConfig:
        """These settings with the defaults that depend on the model decided: casing and
        next-sentence prediction as the --init_checkpoint has them (`lower_case`,
        `next_sentence_head`) unless given, packing on with next-sentence pairs."""
        do_lower_case = lower_case if self.do_lower_case is None else self.do_lower_case
        next_sentence = (
            next_sentence_head if self.next_sentence_prediction is None else self.next_sentence_prediction
        )
        packing = next_sentence if self.packing is None else self.packing
        return dataclasses.replace(
            self, do_lower_case=do_lower_case, next_sentence_prediction=next_sentence, packing=packing
        )

    @property
    def warmup_steps(self) -> int:
        """--num_warmup_steps, else 10% of the steps: a short trial run warms up as a long one does."""
        if self.num_warmup_steps is not None:
            return self.num_warmup_steps
        return round(self.num_train_steps * WARMUP_PROPORTION)

    @property
    def phase1_steps(self) -> int:
        return self.num_train_steps - round(self.num_train_steps * self.phase2_fraction)

    @property
    def phase2_predictions(self) -> int:
        if self.phase2_max_predictions_per_seq:
            return self.phase2_max_predictions_per_seq
        return max(1, round(self.max_predictions_per_seq * self.phase2_seq_length / self.max_seq_length))

    def create_optimizer(
        self, presummed_gradients: bool = False, gradient_accumulation_steps: int | None = None
    ):
        """The run's optimizer on its learning-rate schedule (`optimization.create_optimizer`);
        `presummed_gradients` for the custom loop, which sums gradients over replicas itself;
        `gradient_accumulation_steps` for `model.fit`, where the optimizer accumulates."""
        return optimization.create_optimizer(
            self.learning_rate,
            self.num_train_steps,
            self.warmup_steps,
            optimizer=self.optimizer,
            weight_decay=self.weight_decay,
            presummed_gradients=presummed_gradients,
            gradient_accumulation_steps=gradient_accumulation_steps,
        )

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


@dataclasses.dataclass(frozen=True)
class PhaseData:
    """What one phase of a run reads: steps [start_step, end_step) of `files` at
    `seq_length` with `predictions` masked positions per sequence (`row_predictions` per
    packed row), shuffled from `seed`."""

    name: str
    start_step: int
    end_step: int
    files: list[str]
    seq_length: int
    predictions: int
    seed: int | None
    row_predictions: int | None


def phase_data(
    settings: PretrainingConfig, train_files: list[str], phase2_files: list[str]
) -> list[PhaseData]:
    """The run's phases, both drivers': phase 1 at --max_seq_length (its first entry also
    says how evaluation reads), then phase 2 at --phase2_seq_length where the run has one.
    Phase 1 may be empty (`end_step` 0) when every step is phase 2's."""
    phases = [
        PhaseData(
            f"1 (seq {settings.max_seq_length})",
            0,
            settings.phase1_steps,
            train_files,
            settings.max_seq_length,
            settings.max_predictions_per_seq,
            settings.seed,
            settings.row_predictions(1),
        )
    ]
    if settings.phase1_steps < settings.num_train_steps:
        phases.append(
            PhaseData(
                f"2 (seq {settings.phase2_seq_length})",
                settings.phase1_steps,
                settings.num_train_steps,
                phase2_files,
                settings.phase2_seq_length,
                settings.phase2_predictions,
                None if settings.seed is None else settings.seed + 1,
                settings.row_predictions(2),
            )
        )
    return phases


def cache_dir(settings: PretrainingConfig) -> Path:
    return default_cache_dir(settings.cache_dir)
