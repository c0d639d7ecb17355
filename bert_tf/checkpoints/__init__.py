"""Original Google (TF1) checkpoints and Hugging Face safetensors, in and out.

`from_pretrained(path, heads=...)` builds a model from either format (or from a directory
written by `export_pretrained`); `load_weights(model, path)` loads into an existing one;
`export_pretrained(model, directory, ...)` writes both formats.
"""

from bert_tf.checkpoints.names import CheckpointError, hf_name, model_slots
from bert_tf.checkpoints.pretrained import (
    TokenizerSettings,
    detect_lower_case,
    export_pretrained,
    from_pretrained,
    inspect_checkpoint,
    load_weights,
)

__all__ = [
    "CheckpointError",
    "TokenizerSettings",
    "detect_lower_case",
    "export_pretrained",
    "from_pretrained",
    "hf_name",
    "inspect_checkpoint",
    "load_weights",
    "model_slots",
]
