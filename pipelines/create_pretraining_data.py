"""Creates masked-LM / next-sentence TFRecords: the original generator's command, faster.

Same flags, defaults and output format as google-research/bert's
create_pretraining_data.py, so either trainer can read what this writes:

  python -m pipelines.create_pretraining_data \
    --input_file=corpus/*.txt --output_file=data/train-0.tfrecord,data/train-1.tfrecord \
    --vocab_file=vocab.txt --do_lower_case --max_seq_length=128 --dupe_factor=10

Several output files are shards written round-robin. `--dynamic_masking` writes
unmasked records instead, which `pipelines.pretraining_dataset` masks afresh every
epoch. For Chinese, `--do_whole_word_mask --word_segmenter=jieba` masks the characters
of a segmented word together (see `pipelines.segmenters`). The library call behind it is `pipelines.generate.create_pretraining_data`.
"""

from __future__ import annotations

import gc
import os

from absl import app, flags, logging

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    flags.DEFINE_string(
        "input_file", None, "Input raw text file(s): comma-separated globs.", flag_values=flag_values
    )
    flags.DEFINE_string(
        "output_file",
        None,
        "Output TFRecord file(s): comma-separated, written round-robin.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "vocab_file", None, "The vocabulary file that the BERT model was trained on.", flag_values=flag_values
    )
    flags.DEFINE_bool(
        "do_lower_case", True, "Lower-case the input (True for uncased models).", flag_values=flag_values
    )
    flags.DEFINE_bool(
        "do_whole_word_mask",
        False,
        "Mask whole words (a piece and its ## continuations).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.", flag_values=flag_values)
    flags.DEFINE_integer(
        "max_predictions_per_seq",
        20,
        "Maximum number of masked-LM predictions per sequence.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "random_seed",
        12345,
        "Random seed: the same flags and seed give byte-identical files.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "dupe_factor",
        10,
        "Number of passes over the input (each with different pairs and masks).",
        flag_values=flag_values,
    )
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.", flag_values=flag_values)
    flags.DEFINE_float(
        "short_seq_prob",
        0.1,
        "Probability of a target length shorter than the maximum.",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "dynamic_masking",
        False,
        "Write unmasked records; pipelines.pretraining_dataset masks them afresh each epoch.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "shuffle_buffer_size", 50_000, "Records shuffled together (bounds memory).", flag_values=flag_values
    )
    flags.DEFINE_string(
        "word_segmenter",
        None,
        "With --do_whole_word_mask: segment CJK text into words with this segmenter (jieba) and mask all "
        'characters of a word together; pip install "bert_tf[chinese]".',
        flag_values=flag_values,
    )


def main(argv: list[str]) -> None:
    del argv
    from pipelines.generate import GenerationConfig, create_pretraining_data

    config = GenerationConfig(
        input_file=FLAGS.input_file,
        output_file=FLAGS.output_file,
        vocab_file=FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        random_seed=FLAGS.random_seed,
        dupe_factor=FLAGS.dupe_factor,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        dynamic_masking=FLAGS.dynamic_masking,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size,
        word_segmenter=FLAGS.word_segmenter,
    )
    try:
        summary = create_pretraining_data(config)
    except ValueError as error:  # a user error: say what it was, no traceback
        raise app.UsageError(str(error)) from error
    for line in summary.lines_of_text():
        logging.info("%s", line)
    # Every file is written, closed and renamed. Interpreter shutdown would now run the
    # garbage collector over TensorFlow's objects (a second of a run of a few seconds);
    # frozen, they are left to the operating system. Exit handlers still run.
    gc.freeze()


if __name__ == "__main__":
    define_flags()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])
    app.run(main)
