"""Original Google (TF1) checkpoints, Hugging Face safetensors and keras-hub presets, in and out.

`from_pretrained(path, heads=...)` builds a model from any of them (or from a directory
written by `export_pretrained`); `load_weights(model, path)` loads into an existing one;
`export_pretrained(model, directory, ...)` writes the first two formats, `export_keras_hub`
a keras-hub preset; a fine-tuned model's head (`TaskHead`) goes with it both ways, and
`find_head` says which head a checkpoint carries.
"""

from bert_tf.checkpoints.keras_hub import is_preset as is_keras_hub_preset
from bert_tf.checkpoints.keras_hub_export import export_keras_hub
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
    "export_keras_hub",
    "export_pretrained",
    "find_head",
    "from_pretrained",
    "hf_name",
    "inspect_checkpoint",
    "is_keras_hub_preset",
    "load_weights",
    "model_slots",
]
