"""Answer-span start/end logits (SQuAD) on the sequence output."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.models.encoder import BertEncoder
from bert_tf.tasks.task_model import TaskModel, encoder_inputs, task_dense


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(TaskModel):
    """A 2-unit dense on every token: {start_logits, end_logits}, float32 [batch, seq].

    As in the original run_squad.py, no dropout is applied before this head.

    Example:

    >>> import numpy as np
    >>> from bert_tf.config import load_config
    >>> from bert_tf.models import BertEncoder
    >>> model = BertSpanLabeler(BertEncoder(load_config("bert_tiny").replace(vocab_size=100)))
    >>> ids = np.array([[1, 7, 8, 2, 0]])
    >>> outputs = model({"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids})
    >>> outputs["start_logits"].shape
    TensorShape([1, 5])
    """

    uses_pooler = False

    def __init__(self, encoder: BertEncoder, name: str = "bert_span_labeler", **kwargs):
        span_dense = task_dense(encoder, 2, "span_dense")
        inputs = encoder_inputs(encoder)
        sequence = encoder(inputs)["sequence_output"]
        logits = ops.cast(span_dense(sequence), "float32")  # [batch, seq, 2]
        outputs = {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self.encoder = encoder
