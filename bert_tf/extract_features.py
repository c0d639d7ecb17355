r"""Writes per-token vectors of chosen layers and a sentence vector for every line of a file.

    python -m bert_tf.extract_features --input_file=sentences.txt --output_file=features.jsonl \
        --init_checkpoint=uncased_L-12_H-768_A-12 --layers=-1,-2,-3,-4 --pooling=mean

One text per input line, or a pair as "text_a ||| text_b" (as in the original
extract_features.py). Output: JSON Lines, one record per input line, with the word pieces,
the chosen layers' vectors for each, and a sentence vector (see bert_tf.serving.features;
the original's key "linex_index" is spelt "line_index" here).
"""

from __future__ import annotations

from absl import flags

from bert_tf import cli
from bert_tf.serving.settings import FeatureSettings

define_flags = cli.settings_flags(FeatureSettings, required=("input_file", "output_file", "init_checkpoint"))


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    # lazy: importing this module loads no TensorFlow; running the program does
    from bert_tf import fileio
    from bert_tf.serving.features import extract_features_to_file

    settings = cli.settings_from_flags(FeatureSettings, flag_values)
    output_file = fileio.abspath(settings.output_file)
    print(f"output_file: {output_file}", flush=True)  # on stderr (cli.run)
    count = extract_features_to_file(settings)
    cli.result(f"wrote {count} records to {output_file}")


def command() -> None:
    """The `bert-tf-extract-features` command (setup.py's entry point), also `python -m bert_tf.extract_features`."""
    cli.run(main, define_flags)


if __name__ == "__main__":
    command()
