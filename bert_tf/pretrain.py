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

from absl import flags

from bert_tf import cli

# Flags of the settings fields defined elsewhere (the shared strategy flags) or not flags.
STRATEGY_FIELDS = ("strategy", "tpu", "num_gpus")


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`: one per `PretrainingConfig` field.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    # lazy: Keras fixes its backend when first imported, which cli.run sets from --backend first
    from bert_tf.training import distribute
    from bert_tf.training.settings import PretrainingConfig

    distribute.define_strategy_flags(flag_values)
    cli.define_settings_flags(PretrainingConfig, flag_values, skip=STRATEGY_FIELDS)


def settings_from_flags(flag_values: flags.FlagValues = flags.FLAGS):
    # lazy: Keras fixes its backend when first imported, which cli.run sets from --backend first
    from bert_tf.training.settings import PretrainingConfig

    return cli.settings_from_flags(PretrainingConfig, flag_values)


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    # lazy: Keras fixes its backend when first imported, which cli.run sets from --backend first
    from bert_tf import fileio
    from bert_tf.training.pretraining import run_pretraining

    result = run_pretraining(settings_from_flags(flag_values))
    if result.is_chief:
        cli.result(
            f"the run is in {fileio.abspath(result.model_dir)}: rerunning the same command resumes it (with "
            "a larger --num_train_steps it trains on); another --model_dir starts afresh"
        )
    else:  # another worker of a multi-worker run, which writes nothing of its own
        cli.result(
            f"this worker's part of the run is done; the chief (worker 0) keeps the run in {result.model_dir}"
        )


def command() -> None:
    """The `bert-tf-pretrain` command (setup.py's entry point), also `python -m bert_tf.pretrain`."""
    cli.run(main, define_flags)  # it reads --backend before define_flags imports Keras


if __name__ == "__main__":
    command()
