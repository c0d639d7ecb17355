r"""Writes per-token vectors of chosen layers and a sentence vector for every line of a file.

    python -m bert_tf.extract_features --input_file=sentences.txt --output_file=features.jsonl \
        --init_checkpoint=uncased_L-12_H-768_A-12 --layers=-1,-2,-3,-4 --pooling=mean

One text per input line, or a pair as "text_a ||| text_b" (as in the original
extract_features.py). Output: JSON Lines, one record per input line, with the word pieces,
the chosen layers' vectors for each, and a sentence vector (see bert_tf.serving.features;
the original's key "linex_index" is spelt "line_index" here).
"""

from __future__ import annotations

import os

# TensorFlow's C++ INFO and WARNING lines (CUDA probing, oneDNN notes) mean nothing to a
# user of this command; set TF_CPP_MIN_LOG_LEVEL=0 to see them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import io
import json
import sys

from absl import app, flags

from bert_tf import fileio

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    flags.DEFINE_string(
        "input_file", None, "Text file: one text (or 'a ||| b' pair) per line.", flag_values=flag_values
    )
    flags.DEFINE_string("output_file", None, "JSON Lines file to write.", flag_values=flag_values)
    flags.DEFINE_string(
        "init_checkpoint",
        None,
        "A Google checkpoint directory or prefix, a Hugging Face BERT directory, or ours.",
        flag_values=flag_values,
    )
    flags.DEFINE_list(
        "layers",
        ["-1", "-2", "-3", "-4"],
        "Transformer block indices; -1 is the last.",
        flag_values=flag_values,
    )
    flags.DEFINE_enum(
        "pooling",
        "cls",
        ["cls", "mean"],
        "Sentence vector: [CLS] vector or mean over tokens.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_seq_length",
        128,
        "Packed length; longer texts are trimmed from the end.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer("batch_size", 32, "Texts per encoder call.", flag_values=flag_values)
    flags.mark_flags_as_required(["input_file", "output_file", "init_checkpoint"], flag_values=flag_values)


def main(argv: list[str]) -> None:
    del argv
    import keras

    from bert_tf.serving.exporter import load_pretrained
    from bert_tf.serving.features import FeatureExtractor
    from bert_tf.tokenization import BertTokenizer

    try:
        layers = [int(layer) for layer in FLAGS.layers]
    except ValueError:
        sys.exit(f"bert_tf.extract_features: error: --layers must be integers, got {FLAGS.layers}")
    try:
        # Universal newlines, as a text-mode open() reads them.
        lines = [line.rstrip("\n") for line in io.StringIO(fileio.read_text(FLAGS.input_file), newline=None)]
        encoder, _, settings = load_pretrained(FLAGS.init_checkpoint, "encoder")
        tokenizer = BertTokenizer(settings.vocab_file, lower_case=settings.lower_case)
        extractor = FeatureExtractor(
            encoder, tokenizer, layers, FLAGS.pooling, FLAGS.max_seq_length, FLAGS.batch_size
        )
    except (OSError, ValueError) as error:
        sys.exit(f"bert_tf.extract_features: error: {error}")
    bar = keras.utils.Progbar(len(lines), unit_name="line")
    with fileio.writing(FLAGS.output_file) as output:
        for record in extractor.extract(lines, progress=bar.update):
            output.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {len(lines)} records to {FLAGS.output_file}", file=sys.stderr)


if __name__ == "__main__":
    define_flags()
    app.run(main)
