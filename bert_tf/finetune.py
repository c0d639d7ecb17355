r"""Fine-tune BERT on a task: `python -m bert_tf.finetune --task=NAME [flags]`.

Tasks: the GLUE tasks (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli), squad
(v1.1), squad_v2, ner (CoNLL-2003 files), swag (multiple choice), and classification /
regression on your own CSV, TSV or JSONL files. Hyperparameter flags are named as in the
original run_classifier.py / run_squad.py. For example, MRPC from the GLUE download:

    python -m bert_tf.finetune --task=mrpc --init_checkpoint=uncased_L-12_H-768_A-12 \
      --data_dir=glue_data/MRPC --output_dir=/tmp/mrpc --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3

writes /tmp/mrpc/eval_results.json ({"accuracy": ..., "f1": ..., "eval_loss": ...}),
/tmp/mrpc/MRPC.tsv (the GLUE submission) and /tmp/mrpc/model/ (the fine-tuned model).
Everything here is `bert_tf.tasks.runner.run(FinetuneSettings(...))` from Python.
"""

from __future__ import annotations

from absl import flags

from bert_tf import cli
from bert_tf.tasks.settings import FinetuneSettings

# Flags of the settings fields that are defined elsewhere (the shared strategy flags).
STRATEGY_FIELDS = ("strategy", "tpu", "num_gpus")


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`: one per `FinetuneSettings` field.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    # lazy: importing this module loads no TensorFlow; running the program does
    from bert_tf.tasks.families import TASKS
    from bert_tf.training import distribute

    cli.define_settings_flags(
        FinetuneSettings,
        flag_values,
        skip=STRATEGY_FIELDS,
        required=("task", "output_dir"),
        choices={"task": TASKS},
    )
    distribute.define_strategy_flags(flag_values)


def settings_from_flags(flag_values: flags.FlagValues = flags.FLAGS):
    return cli.settings_from_flags(FinetuneSettings, flag_values)


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    # lazy: importing this module loads no TensorFlow; running the program does
    from bert_tf import fileio
    from bert_tf.tasks.runner import run

    settings = settings_from_flags(flag_values)
    output_dir = fileio.abspath(settings.output_dir)
    print(f"output_dir: {output_dir}", flush=True)  # on stderr, as everything but the results (cli.run)
    results = run(settings)
    for name, value in sorted(results.items()):
        cli.result(f"{name} = {value:.4f}")
    cli.result(f"the run is in {output_dir}")


def command() -> None:
    """The `bert-tf-finetune` command (setup.py's entry point), also `python -m bert_tf.finetune`."""
    cli.run(main, define_flags)


if __name__ == "__main__":
    command()
