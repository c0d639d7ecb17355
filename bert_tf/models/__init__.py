"""BERT models: the encoder, the pretrainer and the task models.

Models know nothing about files: `bert_tf.checkpoints.from_pretrained` builds one from a
checkpoint directory.
"""

from bert_tf.models.classifier import BertClassifier
from bert_tf.models.encoder import BertEncoder
from bert_tf.models.multiple_choice import BertMultipleChoice
from bert_tf.models.pretrainer import BertPretrainer
from bert_tf.models.span_labeler import BertSpanLabeler
from bert_tf.models.token_classifier import BertTokenClassifier

__all__ = [
    "BertClassifier",
    "BertEncoder",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanLabeler",
    "BertTokenClassifier",
]
