r"""Exports a BERT checkpoint as a SavedModel that loads with TensorFlow and tensorflow-text alone.

    python -m bert_tf.export --kind=preprocessor --init_checkpoint=uncased_L-12_H-768_A-12 \
        --export_dir=exports/preprocessor --max_seq_length=128

Kinds: preprocessor (strings -> input_ids/input_mask/segment_ids), encoder (packed inputs ->
sequence_output/pooled_output/encoder_outputs), mlm (text with [MASK] -> top-k tokens),
task (a fine-tuned model directory from bert_tf.finetune, or a Hugging Face or original
checkpoint with a task head -> predictions from raw strings). huggingface and google write
a fine-tuned model with its head as a transformers BertFor... folder or an original
checkpoint instead of a SavedModel, keras_hub as a keras-hub preset folder (a fine-tuned
classifier: a BertTextClassifier with its preprocessor; anything else: a BertBackbone):

    python -m bert_tf.export --kind=huggingface --init_checkpoint=out/model --export_dir=hf_model
    python -m bert_tf.export --kind=keras_hub --init_checkpoint=out/model --export_dir=keras_hub_preset

--quantize=int8 stores the encoder's dense kernels of a task or encoder export as int8
(--dev_file scores a task model before and after); --kind=tflite writes a LiteRT model of a
fine-tuned model (token ids in), float32 or --quantize=float16|int8 (--dev_file: scored
before and after, as a task model):

    python -m bert_tf.export --kind=tflite --init_checkpoint=out/model --export_dir=tflite \
        --quantize=int8 --dev_file=glue/MRPC/dev.tsv

The export is written to a temporary sibling directory and renamed into place when
complete; an existing non-empty --export_dir is refused unless --overwrite.
`saved_model_cli show --dir DIR --all` lists the signatures.
"""

from __future__ import annotations

import dataclasses

from absl import flags

from bert_tf import cli
from bert_tf.serving.settings import EXPORT_KINDS, ExportSettings

define_flags = cli.settings_flags(ExportSettings, required=("kind", "init_checkpoint", "export_dir"))


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    # lazy: importing this module loads no TensorFlow; running the program does
    from bert_tf import fileio
    from bert_tf.serving.exporter import export_saved_model

    settings = cli.settings_from_flags(ExportSettings, flag_values)
    print(f"export_dir: {fileio.abspath(settings.export_dir)}", flush=True)  # on stderr (cli.run)
    path = export_saved_model(**dataclasses.asdict(settings))
    if settings.kind in ("huggingface", "google"):
        cli.result(f"exported the fine-tuned model in the {settings.kind} format to {path}")
        return
    if settings.kind == "keras_hub":
        from bert_tf.checkpoints.keras_hub import task_class

        what = task_class(path) or "BertBackbone"
        cli.result(f"exported a keras-hub {what} preset to {path}")
        cli.result(f"load it with: keras_hub.models.{what}.from_preset({path!r})")
        return
    if settings.kind == "tflite":
        cli.result(f"exported {settings.quantize or 'float32'} LiteRT model to {path}/model.tflite")
        return
    if settings.kind not in EXPORT_KINDS:  # a task family's own kind
        cli.result(f"exported the fine-tuned model as {settings.kind} to {path}")
        return
    cli.result(f"exported {settings.kind}{' int8' if settings.quantize else ''} SavedModel to {path}")
    cli.result(f"inspect it with: saved_model_cli show --dir {path} --all")


def command() -> None:
    """The `bert-tf-export` command (setup.py's entry point), also `python -m bert_tf.export`."""
    cli.run(main, define_flags)


if __name__ == "__main__":
    command()
