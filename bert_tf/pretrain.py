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
import sys

from absl import flags

from bert_tf import cli
from bert_tf.backend import backend_from_argv

# Flags of the settings fields defined elsewhere (the shared strategy flags) or not flags.
STRATEGY_FIELDS = ("strategy", "tpu", "num_gpus")


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`: one per `PretrainingConfig` field.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    # lazy: Keras fixes its backend when first imported, which --backend sets in __main__ first
    from bert_tf.training import distribute
    from bert_tf.training.settings import PretrainingConfig

    distribute.define_strategy_flags(flag_values)
    cli.define_settings_flags(PretrainingConfig, flag_values, skip=STRATEGY_FIELDS)


def settings_from_flags(flag_values: flags.FlagValues = flags.FLAGS):
    # lazy: Keras fixes its backend when first imported, which --backend sets in __main__ first
    from bert_tf.training.settings import PretrainingConfig

    return cli.settings_from_flags(PretrainingConfig, flag_values)


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    # lazy: Keras fixes its backend when first imported, which --backend sets in __main__ first
    from bert_tf.training.pretraining import run_pretraining

    run_pretraining(settings_from_flags(flag_values))


if __name__ == "__main__":
    # --backend=jax must reach Keras before its first import (in define_flags), which fixes it.
    os.environ.update(backend_from_argv(sys.argv))
    cli.run(main, define_flags)
