"""Sequence classification (and regression) on the pooled [CLS] output."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.preprocessing.packing import PACKED_POSITIONS
from bert_tf.tasks.task_model import DenseHeadModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(DenseHeadModel):
    """dropout(pooled_output) -> dense: float32 logits [batch, num_classes].

    `num_classes=1` makes a regression model (e.g. STS-B): the single output is the score.

    An input dict with `cls_positions` holds packed rows (several examples per row,
    `input_mask` numbering them; see `bert_tf.preprocessing.packing.pack_sequences`): the logits are
    then those of each example, [examples, num_classes], in the order of `cls_positions`,
    each as if the example had a row of its own.

    Example:

    >>> import numpy as np
    >>> from bert_tf.config import load_config
    >>> from bert_tf.models import BertEncoder
    >>> encoder = BertEncoder(load_config("bert_tiny").replace(vocab_size=100))
    >>> model = BertClassifier(encoder, num_classes=3)
    >>> ids = np.array([[1, 7, 8, 2, 0]])
    >>> model({"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids}).shape
    TensorShape([1, 3])
    """

    encoder_output = "pooled_output"
    default_name = "bert_classifier"

    def call(self, inputs, training=None, mask=None):
        if not (isinstance(inputs, dict) and PACKED_POSITIONS in inputs):
            return super().call(inputs, training=training, mask=mask)
        hidden = self.encoder.call_packed(inputs, training=training)["sequence_output"]  # [rows, seq, hidden]
        tokens = ops.reshape(hidden, (-1, ops.shape(hidden)[-1]))  # [rows * seq, hidden]
        cls = ops.take(tokens, ops.cast(inputs[PACKED_POSITIONS], "int32"), axis=0)  # [examples, hidden]
        pooled = self.encoder.pooler_dense(cls)
        # Found by name: new attributes would change where a saved model's weights are.
        dropout, classifier = self.get_layer("dropout"), self.get_layer("classifier")
        return ops.cast(classifier(dropout(pooled, training=training)), "float32")
