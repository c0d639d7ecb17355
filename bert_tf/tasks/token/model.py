"""Per-token classification (NER, tagging) on the sequence output."""

from __future__ import annotations

import keras

from bert_tf.tasks.task_model import DenseHeadModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(DenseHeadModel):
    """dropout(sequence_output) -> dense: float32 logits [batch, seq, num_classes].

    Example:

    >>> import numpy as np
    >>> from bert_tf.config import load_config
    >>> from bert_tf.models import BertEncoder
    >>> encoder = BertEncoder(load_config("bert_tiny").replace(vocab_size=100))
    >>> model = BertTokenClassifier(encoder, num_classes=5)
    >>> ids = np.array([[1, 7, 8, 2, 0]])
    >>> model({"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids}).shape
    TensorShape([1, 5, 5])
    """

    encoder_output = "sequence_output"
    default_name = "bert_token_classifier"
    uses_pooler = False
