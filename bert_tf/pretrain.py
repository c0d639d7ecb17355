r"""Pretrain BERT: `python -m bert_tf.pretrain [flags]`.

With no flags it runs the CPU demo (a vocab learnt from the embedded corpus, the `demo`
config, a few minutes, a [MASK] filled at the end). A real run, e.g. BERT-Base phase 1+2
on a TPU from the original TFRecords:

    python -m bert_tf.pretrain --tpu=my-tpu --config=bert_base \
      --vocab_file=gs://b/vocab.txt --train_files='gs://b/seq128/*.tfrecord' \
      --phase2_train_files='gs://b/seq512/*.tfrecord' --phase2_fraction=0.1 \
      --max_seq_length=128 --max_predictions_per_seq=20 --train_batch_size=256 \
      --num_train_steps=1000000 --num_warmup_steps=10000 --learning_rate=1e-4 \
      --model_dir=gs://b/bert_base --mixed_precision=mixed_bfloat16
"""

from __future__ import annotations

import os

# TensorFlow's C++ INFO and WARNING lines (CUDA probing, oneDNN notes) mean nothing to a
# user of this command; set TF_CPP_MIN_LOG_LEVEL=0 to see them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import dataclasses
import sys

from absl import app, flags

from bert_tf.training import distribute
from bert_tf.training.pretraining import PretrainingConfig

_DEFAULTS = PretrainingConfig()


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    distribute.define_strategy_flags(flag_values)
    flags.adopt_module_key_flags(distribute, flag_values=flag_values)  # listed by --helpshort
    flags.DEFINE_string(
        "config",
        _DEFAULTS.config,
        "Model config: a name in configs/ (bert_base, ...) or a JSON path.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "init_checkpoint",
        None,
        "Start from this checkpoint (Google, Hugging Face or ours).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "vocab_file",
        None,
        "WordPiece vocab; default with the embedded corpus: learnt and cached.",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "do_lower_case",
        _DEFAULTS.do_lower_case,
        "Lower-case and strip accents (uncased models).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "train_files",
        None,
        "Comma-separated globs of pretraining TFRecords (original format or ours).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "corpus",
        None,
        "Comma-separated globs of raw text (one sentence per line), masked on the fly.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "eval_files",
        None,
        "Held-out data (TFRecords or raw text) for MLM/NSP metrics at the end.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "eval_steps", _DEFAULTS.eval_steps, "Batches of --eval_files to evaluate.", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "eval_every_steps",
        _DEFAULTS.eval_every_steps,
        PretrainingConfig.__dataclass_fields__["eval_every_steps"].metadata["help"],
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "phase2_train_files",
        None,
        "TFRecords at --phase2_seq_length for phase 2 (raw text: not needed).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "train_batch_size",
        _DEFAULTS.train_batch_size,
        "Global batch size (all replicas).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "num_train_steps", _DEFAULTS.num_train_steps, "Optimizer steps in all.", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "num_warmup_steps", _DEFAULTS.num_warmup_steps, "Linear warmup steps.", flag_values=flag_values
    )
    flags.DEFINE_float(
        "learning_rate", _DEFAULTS.learning_rate, "Peak learning rate.", flag_values=flag_values
    )
    flags.DEFINE_enum(
        "optimizer",
        _DEFAULTS.optimizer,
        ["adamw", "lamb"],
        "AdamW (original) or LAMB (large batches).",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "weight_decay",
        _DEFAULTS.weight_decay,
        "Decoupled weight decay (not on LayerNorm and biases).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_seq_length", _DEFAULTS.max_seq_length, "Sequence length of phase 1.", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "max_predictions_per_seq",
        _DEFAULTS.max_predictions_per_seq,
        "Masked positions per sequence.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "phase2_seq_length",
        _DEFAULTS.phase2_seq_length,
        "Sequence length of phase 2.",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "phase2_fraction",
        _DEFAULTS.phase2_fraction,
        "Fraction of the steps trained at phase 2 (0: off).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "phase2_max_predictions_per_seq",
        None,
        "Masked positions in phase 2 (default: scaled).",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "masked_lm_prob",
        _DEFAULTS.masked_lm_prob,
        "Raw text: fraction of tokens masked.",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "whole_word_mask", _DEFAULTS.whole_word_mask, "Raw text: mask whole words.", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "dupe_factor",
        _DEFAULTS.dupe_factor,
        "Raw text: maskings of each document per epoch.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "model_dir",
        None,
        "Checkpoints, logs and the export; rerun to resume. Default: a temp dir.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "save_checkpoints_steps",
        _DEFAULTS.save_checkpoints_steps,
        "Checkpoint every N steps.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "steps_per_loop",
        _DEFAULTS.steps_per_loop,
        "Steps per compiled loop (and per progress line).",
        flag_values=flag_values,
    )
    flags.DEFINE_enum(
        "mixed_precision",
        _DEFAULTS.mixed_precision,
        ["float32", "mixed_float16", "mixed_bfloat16"],
        "Keras dtype policy; mixed_float16 adds dynamic loss scaling.",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "jit_compile",
        _DEFAULTS.jit_compile,
        "XLA-compile the forward/backward pass.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "gradient_accumulation_steps", 1, "Micro-batches per optimizer step.", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "seed",
        _DEFAULTS.seed,
        "Seed for weights, dropout and data (resumes reproduce it).",
        flag_values=flag_values,
    )


FLAGS = flags.FLAGS


def settings_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> PretrainingConfig:
    names = {field.name for field in dataclasses.fields(PretrainingConfig)}
    # Every field has a flag with the same default (tested), so all values can be passed.
    values = {name: flag_values[name].value for name in names if name in flag_values}
    return PretrainingConfig(**values)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    from bert_tf.checkpoints import CheckpointError
    from bert_tf.config import ConfigError
    from bert_tf.fileio import FileSystemError
    from bert_tf.tokenization import VocabError
    from bert_tf.training.distribute import StrategyError
    from bert_tf.training.inputs import InputError
    from bert_tf.training.loop import NonFiniteLossError
    from bert_tf.training.preemption import Preempted
    from bert_tf.training.pretraining import run_pretraining
    from pipelines.records import RecordFormatError
    from pipelines.text_input import InputFileError

    user_errors = (
        InputError,
        ConfigError,
        VocabError,
        StrategyError,
        CheckpointError,
        InputFileError,
        RecordFormatError,
        NonFiniteLossError,
        FileSystemError,
    )
    try:
        run_pretraining(settings_from_flags())
    except Preempted as stopped:
        print(str(stopped), file=sys.stderr, flush=True)
        sys.exit(stopped.exit_code)
    except user_errors as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    define_flags()
    app.run(main)
