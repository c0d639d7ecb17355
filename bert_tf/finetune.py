r"""Fine-tune BERT on a task: `python -m bert_tf.finetune --task=NAME [flags]`.

Tasks: the GLUE tasks (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli), squad
(v1.1), squad_v2, ner (CoNLL-2003 files), swag (multiple choice), classification /
regression / multi_label on your own CSV, TSV or JSONL files, and `--task=MODULE:CLASS`, a
task family of your own (docs/task-families.md). Hyperparameter flags are named as in the
original run_classifier.py / run_squad.py. For example, MRPC from the GLUE download:

    python -m bert_tf.finetune --task=mrpc --init_checkpoint=uncased_L-12_H-768_A-12 \
      --data_dir=glue_data/MRPC --output_dir=/tmp/mrpc --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3

writes /tmp/mrpc/eval_results.json ({"accuracy": ..., "f1": ..., "eval_loss": ...}),
/tmp/mrpc/MRPC.tsv (the GLUE submission) and /tmp/mrpc/model/ (the fine-tuned model).
Everything here is `bert_tf.tasks.search.run(FinetuneSettings(...))` from Python (one run is
`bert_tf.tasks.runner.run`; --search and --seeds make several).
"""

from __future__ import annotations

import dataclasses
import typing

from absl import flags

from bert_tf import cli
from bert_tf.tasks.settings import FinetuneSettings

# Flags of the settings fields that are defined elsewhere (the shared strategy flags).
STRATEGY_FIELDS = ("strategy", "tpu", "num_gpus")


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`: one per `FinetuneSettings` field, and
    one per option of the task families (`TaskFamily.Options`: `--doc_stride`,
    `--max_query_length`, ...), those of `--task=MODULE:CLASS` included.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    # lazy: importing this module loads no TensorFlow; running the program does
    from bert_tf.tasks import registry
    from bert_tf.training import distribute

    cli.define_settings_flags(
        FinetuneSettings, flag_values, skip=STRATEGY_FIELDS, required=("task", "output_dir")
    )
    task = cli.argv_flag("task")
    if task and ":" in task:  # a family of the user's: its options are flags too
        registry.load_family(task)
    for family in registry.families():
        hints = typing.get_type_hints(family.Options)
        for field in dataclasses.fields(family.Options):
            if field.name not in flag_values:  # a name several families share: one flag
                # No default: an option the command line does not give is the family's own default.
                cli.define_field_flag(field, hints[field.name], None, flag_values)
    distribute.define_strategy_flags(flag_values)


def settings_from_flags(flag_values: flags.FlagValues = flags.FLAGS):
    """The run's settings: the shared ones, and the family options the command line gives."""
    from bert_tf.tasks import registry

    settings = cli.settings_from_flags(FinetuneSettings, flag_values)
    options = {
        name: flag_values[name].value for name in registry.option_fields() if flag_values[name].present
    }
    return dataclasses.replace(settings, options=options)


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    # lazy: importing this module loads no TensorFlow; running the program does
    from bert_tf import fileio
    from bert_tf.tasks.search import run  # one run, or the several of --search and --seeds

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
