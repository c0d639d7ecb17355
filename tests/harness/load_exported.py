"""Runs exported SavedModels in a process that imports only TensorFlow and tensorflow-text.

Used by the export tests as `python load_exported.py REQUEST.json OUTPUT.npz`: this file
is run by path in a fresh interpreter, never imported, and must not import bert_tf (the
point is to show a SavedModel needs nothing of ours). REQUEST.json is a list of calls:

  {"name": "enc", "export_dir": "...", "endpoint": "signature:serving_default" | "call"
   | "attr:tokenize", "args": [...], "kwargs": {...}}

Arguments are JSON values: {"string": [...]}, {"int32": [[...]]}, {"ragged_int64":
[[...]]}, or a dict/list of those. Every output tensor is written to OUTPUT.npz under
"<name>/<key>" (ragged outputs as "<key>.values" and "<key>.row_lengths"). The names of
loaded modules that start with "bert_tf" are written under "__bert_tf_modules__".
"""

import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModels use)


def to_tensor(value):
    if (
        isinstance(value, dict)
        and len(value) == 1
        and next(iter(value)) in ("string", "int32", "int64", "ragged_int64")
    ):
        kind, data = next(iter(value.items()))
        if kind == "string":
            return tf.constant(data, tf.string)
        if kind == "ragged_int64":
            return tf.ragged.constant(data, dtype=tf.int64, ragged_rank=1)
        return tf.constant(data, getattr(tf, kind))
    if isinstance(value, dict):
        return {key: to_tensor(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_tensor(item) for item in value]
    return value


def flatten(prefix, value, out):
    if isinstance(value, dict):
        for key, item in value.items():
            flatten(f"{prefix}/{key}", item, out)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            flatten(f"{prefix}/{index}", item, out)
    elif isinstance(value, tf.RaggedTensor):
        out[prefix + ".values"] = value.flat_values.numpy()
        out[prefix + ".row_lengths"] = value.row_lengths().numpy()
    else:
        array = np.asarray(value.numpy())
        # tf.string tensors come back as object arrays of bytes; store them as fixed bytes.
        out[prefix] = array.astype(np.bytes_) if array.dtype == object else array


def main(request_path, output_path):
    with open(request_path, encoding="utf-8") as file:
        calls = json.load(file)
    loaded, out = {}, {}
    for call in calls:
        directory = call["export_dir"]
        if directory not in loaded:
            loaded[directory] = tf.saved_model.load(directory)
        obj = loaded[directory]
        endpoint = call["endpoint"]
        if endpoint.startswith("signature:"):
            function = obj.signatures[endpoint.split(":", 1)[1]]
        elif endpoint.startswith("attr:"):
            function = getattr(obj, endpoint.split(":", 1)[1])
        else:
            function = obj
        result = function(*to_tensor(call.get("args", [])), **to_tensor(call.get("kwargs", {})))
        flatten(call["name"], result, out)
    out["__bert_tf_modules__"] = np.array(
        sorted(m for m in sys.modules if m.split(".")[0] == "bert_tf"), dtype=str
    )
    np.savez(output_path, **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
