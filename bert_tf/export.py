r"""Exports a BERT checkpoint as a SavedModel that loads with TensorFlow and tensorflow-text alone.

    python -m bert_tf.export --kind=preprocessor --init_checkpoint=uncased_L-12_H-768_A-12 \
        --export_dir=exports/preprocessor --seq_length=128

Kinds: preprocessor (strings -> input_ids/input_mask/segment_ids), encoder (packed inputs ->
sequence_output/pooled_output/encoder_outputs), mlm (text with [MASK] -> top-k tokens),
task (a fine-tuned model directory from bert_tf.finetune -> predictions from raw strings).
The export is written to a temporary sibling directory and renamed into place when
complete; an existing non-empty --export_dir is refused unless --overwrite.
`saved_model_cli show --dir DIR --all` lists the signatures.
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
    flags.DEFINE_enum(
        "kind", None, ["preprocessor", "encoder", "mlm", "task"], "What to export.", flag_values=flag_values
    )
    flags.DEFINE_string(
        "init_checkpoint",
        None,
        "A Google checkpoint directory or prefix, a Hugging Face BERT directory, a bert_tf "
        "checkpoint, or (for --kind=task) a fine-tuned model directory written by bert_tf.finetune.",
        flag_values=flag_values,
    )
    flags.DEFINE_string("export_dir", None, "Directory to write the SavedModel to.", flag_values=flag_values)
    flags.DEFINE_integer(
        "seq_length",
        None,
        "Packed sequence length, at most the model's max_position_embeddings. Default: 128, or "
        "for --kind=task the max_seq_length the model was fine-tuned with.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer("top_k", 5, "--kind=mlm: predictions returned per [MASK].", flag_values=flag_values)
    flags.DEFINE_bool(
        "overwrite", False, "Replace an existing non-empty --export_dir.", flag_values=flag_values
    )
    flags.mark_flags_as_required(["kind", "init_checkpoint", "export_dir"], flag_values=flag_values)


def main(argv: list[str]) -> None:
    del argv
    from bert_tf.serving.exporter import export_saved_model
    from bert_tf.serving.saving import ExportError

    try:
        path = export_saved_model(
            FLAGS.kind,
            FLAGS.init_checkpoint,
            FLAGS.export_dir,
            seq_length=FLAGS.seq_length,
            overwrite=FLAGS.overwrite,
            top_k=FLAGS.top_k,
        )
    except (ExportError, ValueError, FileNotFoundError) as error:
        print(f"bert_tf.export: error: {error}", file=sys.stderr)
        sys.exit(2)
    print(f"exported {FLAGS.kind} SavedModel to {path}")
    print(f"inspect it with: saved_model_cli show --dir {path} --all")


if __name__ == "__main__":
    define_flags()
    app.run(main)
