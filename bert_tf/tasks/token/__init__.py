"""The token family: CoNLL-2003 NER, a tag per word.

- `family.py`: `TokenFamily`; `model.py`: `BertTokenClassifier` and `MaskedAccuracy`;
- `conll.py`: CoNLL files and TFDS conll2003; `entities.py`: tags to entities (seqeval's
  rules) as graph ops; `metrics.py`: entity F1; `signatures.py`: the raw-text SavedModel's program.
"""

_EXPORTS = {"TokenFamily": "family", "BertTokenClassifier": "model"}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
