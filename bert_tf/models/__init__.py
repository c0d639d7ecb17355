"""BERT models: the encoder and the pretrainer.

Models know nothing about files: `bert_tf.checkpoints.from_pretrained` builds one from a
checkpoint directory. The task models (an encoder with a task's head) are their families'
(`bert_tf.tasks`).
"""

from bert_tf.models.encoder import BertEncoder
from bert_tf.models.pretrainer import BertPretrainer

__all__ = ["BertEncoder", "BertPretrainer"]
