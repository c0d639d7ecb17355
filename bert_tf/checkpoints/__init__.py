"""Original Google (TF1) checkpoints and Hugging Face safetensors, in and out.

`from_pretrained(path, heads=...)` builds a model from either format (or from a directory
written by `export_pretrained`); `load_weights(model, path)` loads into an existing one;
`export_pretrained(model, directory, ...)` writes both formats; a fine-tuned model's head
(`TaskHead`) goes with it both ways, and `find_head` says which head a checkpoint carries.
"""

from bert_tf.checkpoints.names import CheckpointError, TaskHead, hf_name, model_slots
from bert_tf.checkpoints.pretrained import (
    FoundHead,
    TokenizerSettings,
    detect_lower_case,
    export_pretrained,
    find_head,
    from_pretrained,
    inspect_checkpoint,
    load_weights,
)

__all__ = [
    "CheckpointError",
    "FoundHead",
    "TaskHead",
    "TokenizerSettings",
    "detect_lower_case",
    "export_pretrained",
    "find_head",
    "from_pretrained",
    "hf_name",
    "inspect_checkpoint",
    "load_weights",
    "model_slots",
]
