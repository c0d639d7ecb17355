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
"""

from __future__ import annotations

import gc
import sys

from absl import flags

from bert_tf import cli
from pipelines.settings import GenerationConfig

define_flags = cli.settings_flags(GenerationConfig, required=("input_file", "output_file", "vocab_file"))


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    # lazy: importing this module loads no TensorFlow; running the program does
    from pipelines.generate import create_pretraining_data

    summary = create_pretraining_data(cli.settings_from_flags(GenerationConfig, flag_values))
    for line in summary.lines_of_text():  # on stderr, with the progress line
        print(line, file=sys.stderr)
    # Every file is written, closed and renamed. Interpreter shutdown would now run the
    # garbage collector over TensorFlow's objects (a second of a run of a few seconds);
    # frozen, they are left to the operating system. Exit handlers still run.
    gc.freeze()


if __name__ == "__main__":
    cli.run(main, define_flags)
