"""Creates masked-LM / next-sentence TFRecords: the original generator's command, faster.

Same flags, defaults and output format as google-research/bert's
create_pretraining_data.py, so either trainer can read what this writes:

  python -m pipelines.create_pretraining_data \
    --input_file=corpus/*.txt --output_file=data/train-0.tfrecord,data/train-1.tfrecord \
    --vocab_file=vocab.txt --do_lower_case --max_seq_length=128 --dupe_factor=10

Several output files are shards written round-robin. `--dynamic_masking` writes
unmasked records instead, which `pipelines.pretraining_dataset` masks afresh every
epoch. For Chinese, `--do_whole_word_mask --word_segmenter=jieba` masks the characters
of a segmented word together (see `pipelines.segmenters`). The library call behind it is
`pipelines.generate.create_pretraining_data`.

With `--runner` it runs as an Apache Beam pipeline (`pipelines.beam.generate`) and the
flags this program does not define are Beam's pipeline options; the output is then
`--output_file` as the prefix of `--num_output_shards` shards:

  python -m pipelines.create_pretraining_data --runner=DirectRunner \
    --direct_num_workers=2 --direct_running_mode=multi_processing \
    --input_file=corpus/*.txt --output_file=data/train --num_output_shards=16 --vocab_file=vocab.txt
"""

from __future__ import annotations

import gc

from absl import flags

from bert_tf import cli
from bert_tf.errors import UsageError
from pipelines.settings import GenerationConfig

define_flags = cli.settings_flags(GenerationConfig, required=("input_file", "output_file", "vocab_file"))


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    # lazy: importing this module loads no TensorFlow; running the program does
    settings = cli.settings_from_flags(GenerationConfig, flag_values)
    if settings.runner:
        run_on_beam(settings, args, verbose=flag_values.verbose)
        return
    if args:
        raise UsageError(
            f"unknown flag(s) or argument(s) {' '.join(args)}: see --helpshort for this program's flags (Beam's pipeline "
            "options go with --runner)"
        )
    from bert_tf import fileio
    from pipelines.generate import create_pretraining_data

    output_files = [fileio.abspath(name.strip()) for name in settings.output_file.split(",") if name.strip()]
    print(f"output_file: {','.join(output_files)}", flush=True)  # on stderr, as the progress (cli.run)
    summary = create_pretraining_data(settings)
    for line in summary.lines_of_text():
        print(line)
    cli.result(f"wrote {','.join(output_files)}")
    # Every file is written, closed and renamed. Interpreter shutdown would now run the
    # garbage collector over TensorFlow's objects (a second of a run of a few seconds);
    # frozen, they are left to the operating system. Exit handlers still run.
    gc.freeze()


def run_on_beam(settings: GenerationConfig, beam_args: list[str], verbose: bool = False) -> None:
    from pipelines.beam import quiet_logs, require_beam

    require_beam()
    from bert_tf import fileio
    from pipelines.beam.generate import create_pretraining_data

    if not verbose:
        beam_args = quiet_logs(beam_args)
    prefix = fileio.abspath(settings.output_file.strip())
    print(f"output_file: {prefix}-?????-of-?????", flush=True)  # on stderr, as the progress (cli.run)
    summary = create_pretraining_data(settings, beam_args)
    for line in summary.lines_of_text():
        print(line)
    shards = len(summary.output_files)
    cli.result(f"wrote {prefix}-?????-of-{shards:05d} ({shards} shards)")


def command() -> None:
    """The `bert-tf-create-pretraining-data` command (setup.py's entry point), also `python -m pipelines.create_pretraining_data`."""
    cli.run(main, define_flags, pass_unknown_flags=True)


if __name__ == "__main__":
    command()
