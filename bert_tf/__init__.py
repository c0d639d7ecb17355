"""bert_tf: pretrain, fine-tune and export BERT with TensorFlow and Keras 3.

The task models are importable from the top of the package (loaded on first use, so
`import bert_tf` stays light):

>>> import bert_tf
>>> bert_tf.BertClassifier.from_pretrained  # doctest: +ELLIPSIS
<bound method TaskModel.from_pretrained of <class 'bert_tf.models.classifier.BertClassifier'>>
"""

from bert_tf import quiet

# TensorFlow's start-up lines ("failed call to cuInit", "oneDNN custom operations are on")
# are kept out of the session, unless TF_CPP_MIN_LOG_LEVEL is set (see bert_tf.quiet).
quiet.filter_tensorflow_import()

_TASK_MODELS = ("BertClassifier", "BertMultipleChoice", "BertSpanLabeler", "BertTokenClassifier")


def __getattr__(name):
    if name in _TASK_MODELS:
        from bert_tf import models
        from bert_tf.tasks import keras_task  # noqa: F401  (installs the task models' API)

        return getattr(models, name)
    raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_TASK_MODELS])
