"""The settings of the serving programs (export, extract_features, fill_mask); light: no TensorFlow.

Each dataclass is what its program's flags fill in (`bert_tf.cli` makes one flag per field)
and checks its own values, so a bad value is refused before anything is loaded or written.

Example:

>>> from bert_tf.serving.settings import ExportSettings
>>> ExportSettings(kind="encoder", init_checkpoint="ckpt", export_dir="out").seq_length is None
True
"""

from __future__ import annotations

import dataclasses

from bert_tf.cli import flag_name, setting
from bert_tf.errors import UsageError

EXPORT_KINDS = ("preprocessor", "encoder", "mlm", "task", "huggingface", "google", "tflite", "keras_hub")
# What --quantize does to each kind that takes it (bert_tf.serving.quantize, bert_tf.serving.litert_conversion).
QUANTIZABLE = {"task": ("int8",), "encoder": ("int8",), "tflite": ("int8", "float16")}


def _required(help_text: str) -> dataclasses.Field:
    return dataclasses.field(metadata={"help": help_text})


def _check_positive(settings, names) -> None:
    fields = {field.name: field for field in dataclasses.fields(settings)}
    for name in names:
        value = getattr(settings, name)
        if value is not None and value <= 0:
            raise UsageError(f"--{flag_name(fields[name])} must be a positive integer, got {value}")


@dataclasses.dataclass(frozen=True)
class ExportSettings:
    """`python -m bert_tf.export`: `export_saved_model(**dataclasses.asdict(settings))`."""

    kind: str = dataclasses.field(
        metadata={
            "help": f"What to export: {', '.join(EXPORT_KINDS)}, or an export kind a task family adds "
            "for its fine-tuned models (its docs name it)."
        }
    )
    init_checkpoint: str = _required(
        "A Google checkpoint directory or prefix, a Hugging Face BERT directory, a bert_tf checkpoint "
        "(a pretraining model_dir: its export/), a keras-hub BERT preset, or (for --kind=task, huggingface, "
        "google, tflite; keras_hub too) a fine-tuned model: a directory written by bert_tf.finetune, or a "
        "Hugging Face or original checkpoint or a keras-hub BertTextClassifier preset with a task head."
    )
    export_dir: str = _required(
        "Directory to write the SavedModel (or the checkpoint, the LiteRT model, the keras-hub preset) to."
    )
    seq_length: int | None = setting(
        None,
        "Packed sequence length, at most the model's max_position_embeddings. Default: 128 (or the "
        "model's max_position_embeddings where fewer), or for --kind=task (and a keras_hub classifier's "
        "preprocessor) the max_seq_length the model was fine-tuned with.",
        flag="max_seq_length",
        old_flags=("seq_length",),
    )
    top_k: int = setting(5, "--kind=mlm: predictions returned per [MASK].")
    overwrite: bool = setting(False, "Replace an existing non-empty --export_dir.")
    quantize: str | None = setting(
        None,
        "--kind=task, encoder: int8 stores the encoder's dense kernels as int8 (weight-only). "
        "--kind=tflite: int8 (dynamic range) or float16 weights. Default: float32.",
        choices=("int8", "float16"),
    )
    dev_file: str | None = setting(
        None,
        "--kind=task --quantize=int8, --kind=tflite --quantize=int8|float16: labelled data in the "
        "fine-tuning format (as --eval_file); the float and the quantized model are scored on it "
        "and a quantized model that loses more than a point is refused.",
    )
    accept_accuracy_loss: bool = setting(
        False, "Write a quantized model that scores more than a point below the float model on --dev_file."
    )

    def __post_init__(self) -> None:
        if self.kind not in EXPORT_KINDS:
            # lazy: the task families (and TensorFlow) are imported for a kind of theirs only
            from bert_tf.tasks import registry

            if self.kind not in registry.export_kinds():
                kinds = ", ".join((*EXPORT_KINDS, *registry.export_kinds()))
                raise UsageError(f"unknown --kind={self.kind}; use one of {kinds}")
        _check_positive(self, ("seq_length", "top_k"))
        if self.quantize is not None and self.quantize not in QUANTIZABLE.get(self.kind, ()):
            takes = " and ".join(
                f"--kind={kind}" for kind, modes in QUANTIZABLE.items() if self.quantize in modes
            )
            if self.kind not in QUANTIZABLE:
                raise UsageError(
                    f"--kind={self.kind} cannot be quantized: --quantize={self.quantize} applies to {takes}; "
                    "drop --quantize or pass one of those kinds"
                )
            raise UsageError(
                f"--quantize={self.quantize} applies to {takes}, not --kind={self.kind}; "
                f"--kind={self.kind} takes --quantize={' or '.join(QUANTIZABLE[self.kind])}"
            )
        if self.dev_file and not (
            (self.kind == "task" and self.quantize == "int8") or (self.kind == "tflite" and self.quantize)
        ):
            raise UsageError(
                "--dev_file scores a quantized model against the float one: pass it with "
                "--kind=task --quantize=int8 or --kind=tflite --quantize=int8|float16"
            )


@dataclasses.dataclass(frozen=True)
class FeatureSettings:
    """`python -m bert_tf.extract_features`: per-token and sentence vectors of a text file."""

    input_file: str = _required("Text file: one text (or 'a ||| b' pair) per line.")
    output_file: str = _required("JSON Lines file to write.")
    init_checkpoint: str = _required(
        "A Google checkpoint directory or prefix, a Hugging Face BERT directory, or ours (a "
        "pretraining model_dir: its export/)."
    )
    layers: tuple[int, ...] = setting((-1, -2, -3, -4), "Transformer block indices; -1 is the last.")
    pooling: str = setting(
        "cls", "Sentence vector: [CLS] vector or mean over tokens.", choices=("cls", "mean")
    )
    max_seq_length: int = setting(128, "Packed length; longer texts are trimmed from the end.")
    batch_size: int = setting(32, "Texts per encoder call.")
    overwrite: bool = setting(False, "Replace an existing --output_file.")

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "layers", tuple(int(layer) for layer in self.layers))
        except ValueError:
            raise UsageError(
                f"--layers must be comma-separated integers such as -1,-2, got {','.join(map(str, self.layers))}"
            ) from None
        if not self.layers:
            raise UsageError("--layers is empty; name at least one layer, e.g. --layers=-1")
        _check_positive(self, ("max_seq_length", "batch_size"))


@dataclasses.dataclass(frozen=True)
class FillMaskSettings:
    """`python -m bert_tf.fill_mask TEXT ...`: the word pieces behind each [MASK]."""

    init_checkpoint: str = _required(
        "A checkpoint with the pretraining heads (Google, Hugging Face BertForPreTraining/"
        "BertForMaskedLM, or ours; a pretraining model_dir: its export/)."
    )
    top_k: int = setting(5, "Predictions per [MASK].")
    max_seq_length: int = setting(128, "Packed length; text beyond it (and its masks) is dropped.")

    def __post_init__(self) -> None:
        _check_positive(self, ("top_k", "max_seq_length"))
