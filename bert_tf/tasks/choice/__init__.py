"""The multiple-choice family: SWAG, the most likely of a context's endings.

- `family.py`: `ChoiceFamily`; `model.py`: `BertMultipleChoice`; `swag.py`: SWAG's CSV;
  `signatures.py`: the raw-text SavedModel's program.
"""

_EXPORTS = {"ChoiceFamily": "family", "BertMultipleChoice": "model"}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
