"""bert_tf: pretrain, fine-tune and export BERT with TensorFlow and Keras 3.

The task models are importable from the top of the package (loaded on first use, so
`import bert_tf` stays light):

>>> import bert_tf
>>> bert_tf.BertClassifier.from_pretrained  # doctest: +ELLIPSIS
<bound method TaskModel.from_pretrained of <class 'bert_tf.tasks.classification.model.BertClassifier'>>
"""

from bert_tf import quiet

# TensorFlow's start-up lines ("failed call to cuInit", "oneDNN custom operations are on")
# are kept out of the session, unless TF_CPP_MIN_LOG_LEVEL is set (see bert_tf.quiet).
quiet.filter_tensorflow_import()

# The task models, each in its family's package (bert_tf.tasks.<family>.model).
_TASK_MODELS = {
    "BertClassifier": "classification",
    "BertMultipleChoice": "choice",
    "BertSentenceEncoder": "sentence_embedding",
    "BertSpanLabeler": "span",
    "BertTokenClassifier": "token",
}


def __getattr__(name):
    if name in _TASK_MODELS:
        import importlib

        return getattr(importlib.import_module(f"bert_tf.tasks.{_TASK_MODELS[name]}.model"), name)
    raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_TASK_MODELS])
