"""Per-token classification (NER, tagging) on the sequence output."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.models._task import TaskModel, encoder_inputs, task_dense
from bert_tf.models.encoder import BertEncoder


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(TaskModel):
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

    config_fields = ("num_classes", "dropout_rate")

    uses_pooler = False

    def __init__(
        self,
        encoder: BertEncoder,
        num_classes: int,
        dropout_rate: float = 0.1,
        name: str = "bert_token_classifier",
        **kwargs,
    ):
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        dropout = keras.layers.Dropout(dropout_rate, name="dropout")
        classifier = task_dense(encoder, num_classes, "classifier")
        inputs = encoder_inputs(encoder)
        sequence = encoder(inputs)["sequence_output"]
        logits = ops.cast(classifier(dropout(sequence)), "float32")
        super().__init__(inputs=inputs, outputs=logits, name=name, **kwargs)
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
