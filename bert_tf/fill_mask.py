r"""Predicts the word pieces behind each [MASK] in a text.

    python -m bert_tf.fill_mask --init_checkpoint=uncased_L-12_H-768_A-12 "the [MASK] sat on the mat"

Here, unlike in the tokenizer's raw-text rule (where a typed "[MASK]" is split into "[",
"mask", "]" like any text), the literal upper-case "[MASK]" means the mask token: the text
is split on it and the mask id placed between the tokenized parts. Several texts may be
given; each [MASK] gets --top_k predictions with their probabilities.
"""

from __future__ import annotations

import os

# TensorFlow's C++ INFO and WARNING lines (CUDA probing, oneDNN notes) mean nothing to a
# user of this command; set TF_CPP_MIN_LOG_LEVEL=0 to see them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sys

from absl import app, flags

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    flags.DEFINE_string(
        "init_checkpoint",
        None,
        "A checkpoint with the pretraining heads (Google, Hugging Face BertForPreTraining/"
        "BertForMaskedLM, or ours).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer("top_k", 5, "Predictions per [MASK].", flag_values=flag_values)
    flags.DEFINE_integer(
        "max_seq_length",
        128,
        "Packed length; text beyond it (and its masks) is dropped.",
        flag_values=flag_values,
    )
    flags.mark_flags_as_required(["init_checkpoint"], flag_values=flag_values)


def main(argv: list[str]) -> None:
    texts = argv[1:]
    if not texts:
        sys.exit('bert_tf.fill_mask: error: give one or more texts, e.g. "the [MASK] sat on the mat"')
    import tensorflow as tf

    from bert_tf.serving.exporter import load_pretrained
    from bert_tf.serving.mlm import FillMask
    from bert_tf.serving.saving import check_seq_length
    from bert_tf.tokenization import BertTokenizer

    try:
        pretrainer, config, settings = load_pretrained(FLAGS.init_checkpoint, "pretraining")
        check_seq_length(FLAGS.max_seq_length, config, "--max_seq_length")
        tokenizer = BertTokenizer(settings.vocab_file, lower_case=settings.lower_case)
        fill_mask = FillMask(pretrainer, tokenizer, FLAGS.max_seq_length, FLAGS.top_k)
    except (OSError, ValueError) as error:
        sys.exit(f"bert_tf.fill_mask: error: {error}")
    outputs = {name: value.numpy() for name, value in fill_mask(tf.constant(texts)).items()}
    for row, text in enumerate(texts):
        print(text)
        if outputs["num_masks"][row] == 0:
            print("  (no [MASK] in this text within --max_seq_length)")
        for mask in range(outputs["num_masks"][row]):
            predictions = ", ".join(
                f"{token.decode('utf-8')} ({score:.4g})"
                for token, score in zip(
                    outputs["top_k_tokens"][row, mask], outputs["top_k_scores"][row, mask], strict=True
                )
            )
            print(f"  [MASK] #{mask + 1}: {predictions}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
