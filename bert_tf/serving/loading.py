"""The checkpoint an export or a serving program starts from, read with clear errors.

`check_init_checkpoint` refuses a path that holds no checkpoint before anything is
written; `load_pretrained` is `from_pretrained` after that check.
"""

from __future__ import annotations

from bert_tf import fileio
from bert_tf.checkpoints import from_pretrained
from bert_tf.serving.saving import ExportError


def check_init_checkpoint(init_checkpoint: str) -> None:
    """A clear error for a path that holds no checkpoint at all."""
    if not init_checkpoint:
        raise ExportError(
            "--init_checkpoint is required: a checkpoint directory, file prefix or model directory"
        )
    path = fileio.check_path(init_checkpoint)
    if not fileio.exists(path) and not fileio.glob(path + "*"):
        raise ExportError(
            f"--init_checkpoint {path} does not exist; pass a checkpoint directory or file prefix"
        )
    if fileio.isdir(path) and not fileio.exists(path + ".index") and not fileio.listdir(path):
        raise ExportError(
            f"--init_checkpoint {path} is an empty directory; it must hold a checkpoint "
            "(bert_model.ckpt.*, model.safetensors, or a bert_tf model directory)"
        )


def load_pretrained(init_checkpoint: str, heads: str):
    """from_pretrained with the export's error checks: returns (model, config, tokenizer settings)."""
    check_init_checkpoint(init_checkpoint)
    model, settings = from_pretrained(init_checkpoint, heads=heads)
    encoder = getattr(model, "encoder", model)
    return model, encoder.config, settings
