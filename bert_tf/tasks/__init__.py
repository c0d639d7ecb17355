"""Fine-tuning: task data (GLUE, SQuAD, CoNLL NER, SWAG, your own CSV), metrics, models.

The Keras side is imported on first use, so `from bert_tf.tasks import metrics` stays
light:

>>> from bert_tf import tasks
>>> tasks.classifier, tasks.compile_args, tasks.create_optimizer  # doctest: +ELLIPSIS
(<function classifier at ...>, <function compile_args at ...>, <function create_optimizer at ...>)
"""

_MODEL_API = (
    "classifier",
    "token_classifier",
    "span_labeler",
    "multiple_choice",
    "compile_args",
    "create_optimizer",
    "tiny_config",
    "MaskedAccuracy",
)


def __getattr__(name):
    if name in _MODEL_API:
        # lazy: `from bert_tf.tasks import metrics` loads no Keras
        from bert_tf.tasks import models

        return getattr(models, name)
    raise AttributeError(f"module 'bert_tf.tasks' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_MODEL_API])
