r"""Predicts the word pieces behind each [MASK] in a text.

    python -m bert_tf.fill_mask --init_checkpoint=uncased_L-12_H-768_A-12 "the [MASK] sat on the mat"

Here, unlike in the tokenizer's raw-text rule (where a typed "[MASK]" is split into "[",
"mask", "]" like any text), the literal upper-case "[MASK]" means the mask token: the text
is split on it and the mask id placed between the tokenized parts. Several texts may be
given; each [MASK] gets --top_k predictions with their probabilities.
"""

from __future__ import annotations

from absl import flags

from bert_tf import cli
from bert_tf.errors import UsageError
from bert_tf.serving.settings import FillMaskSettings

define_flags = cli.settings_flags(FillMaskSettings, required=("init_checkpoint",))


def main(flag_values: flags.FlagValues, texts: list[str]) -> None:
    # lazy: importing this module loads no TensorFlow; running the program does
    from bert_tf.serving.mlm import fill_mask_texts

    if not texts:
        raise UsageError('give one or more texts, e.g. "the [MASK] sat on the mat"')
    settings = cli.settings_from_flags(FillMaskSettings, flag_values)
    for text, masks in zip(texts, fill_mask_texts(settings, texts), strict=True):
        cli.result(text)
        if not masks:
            cli.result("  (no [MASK] in this text within --max_seq_length)")
        for number, predictions in enumerate(masks, 1):
            listed = ", ".join(f"{token} ({score:.4g})" for token, score in predictions)
            cli.result(f"  [MASK] #{number}: {listed}")


def command() -> None:
    """The `bert-tf-fill-mask` command (setup.py's entry point), also `python -m bert_tf.fill_mask`."""
    cli.run(main, define_flags, positional="TEXT ...")


if __name__ == "__main__":
    command()
