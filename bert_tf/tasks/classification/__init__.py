"""The classification family: GLUE and users' own CSV/TSV/JSONL, classes, a set of labels
(multi-label) or a score (regression).

- `family.py`: `ClassificationFamily` and its options (columns, threshold, class weights,
  windows of long texts);
- `model.py`: `BertClassifier`, the head on the pooled [CLS] output (packed rows too);
- `tables.py`: users' own files; `glue.py`: GLUE's TSVs, TFDS and submission files;
- `metrics.py`: multi-label scores; `signatures.py`: the raw-text SavedModel's programs;
- `litert.py`: a TensorFlow-free client of its LiteRT files.

The package imports nothing heavy itself (its LiteRT client runs without TensorFlow):
`ClassificationFamily` and `BertClassifier` load on first use.
"""

_EXPORTS = {"ClassificationFamily": "family", "BertClassifier": "model"}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
