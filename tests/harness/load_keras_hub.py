"""Loads keras-hub presets written by bert_tf in a process that imports keras-hub and never bert_tf.

Run by tests/checkpoints/test_keras_hub.py as `python load_keras_hub.py REQUEST.json OUTPUT.npz`,
by path in a fresh interpreter, never imported. REQUEST.json:

  {"classifiers": {"name": preset_dir, ...}, "texts": [...],
   "backbone": preset_dir, "token_ids": [[...]], "segment_ids": [[...]], "padding_mask": [[...]]}

Each classifier is loaded with `keras_hub.models.BertTextClassifier.from_preset` (its
preprocessor too) and run on the texts with `predict` ("NAME/outputs"); its tokenizer's
settings go to "NAME/lowercase" and "NAME/strip_accents". The backbone is loaded with
`BertBackbone.from_preset` and run on the ids ("backbone/sequence_output",
"backbone/pooled_output"). The names of loaded modules that start with "bert_tf" are
written under "__bert_tf_modules__".
"""

import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras_hub  # noqa: E402
import numpy as np  # noqa: E402


def main(request_path: str, output_path: str) -> None:
    with open(request_path, encoding="utf-8") as file:
        request = json.load(file)
    out = {}
    for name, preset in request.get("classifiers", {}).items():
        classifier = keras_hub.models.BertTextClassifier.from_preset(preset)
        out[f"{name}/outputs"] = np.asarray(classifier.predict(request["texts"], verbose=0))
        tokenizer = classifier.preprocessor.tokenizer
        out[f"{name}/lowercase"] = np.asarray(tokenizer.lowercase)
        out[f"{name}/strip_accents"] = np.asarray(tokenizer.strip_accents)
        out[f"{name}/sequence_length"] = np.asarray(classifier.preprocessor.sequence_length)
    if request.get("backbone"):
        backbone = keras_hub.models.BertBackbone.from_preset(request["backbone"])
        inputs = {
            key: np.asarray(request[key], np.int32) for key in ("token_ids", "segment_ids", "padding_mask")
        }
        outputs = backbone(inputs)
        for key in ("sequence_output", "pooled_output"):
            out[f"backbone/{key}"] = np.asarray(outputs[key])
    out["__bert_tf_modules__"] = np.asarray(
        sorted(name for name in sys.modules if name.startswith("bert_tf")), dtype=np.bytes_
    )
    np.savez(output_path, **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
