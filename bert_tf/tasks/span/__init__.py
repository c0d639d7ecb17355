"""The span family: SQuAD v1.1 and v2.0, answers as spans of a context.

- `family.py`: `SpanFamily` and its options (SQuAD's doc_stride, max_query_length,
  n_best_size, max_answer_length, null_score_diff_threshold, defined once, there);
- `model.py`: `BertSpanLabeler`; `squad.py`: SQuAD's JSON and its windows;
- `postprocess.py`: the original run_squad.py's answers; `answers.py`: the same rules as
  graph ops, for the raw-text SavedModel (`signatures.py`); `metrics.py`: the official EM/F1.
"""

_EXPORTS = {"SpanFamily": "family", "BertSpanLabeler": "model"}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
