"""BERT with its pretraining heads: masked LM and next sentence prediction."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from bert_tf.config import BertConfig
from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.layers.next_sentence_head import NextSentenceHead
from bert_tf.models.encoder import ENCODER_INPUTS, BertEncoder, as_config, keep_inputs

PRETRAINER_INPUTS = (*ENCODER_INPUTS, "masked_lm_positions")
PACKED_PRETRAINER_INPUTS = (*PRETRAINER_INPUTS, "next_sentence_positions")


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(keras.Model):
    """The encoder plus `cls/predictions` (masked LM) and `cls/seq_relationship` (NSP).

    Takes the pretraining feature dict (the original TFRecord names; only `input_ids`,
    `input_mask`, `segment_ids` and `masked_lm_positions` are read, the labels may ride
    along) and returns float32 `mlm_logits` [batch, predictions, vocab] and `nsp_logits`
    [batch, 2]. `bert_tf.models.losses.pretraining_losses` turns them into the loss.

    `packed=True` takes packed rows (`bert_tf.layers.packing`; made by `pipelines.packing`)
    and one more input, `next_sentence_positions` [batch, instances]: the [CLS] of each
    instance, whose pooled output gives `nsp_logits` [batch, instances, 2]. The weights are
    the same, so checkpoints load packed or unpacked.

    Example:

    >>> import numpy as np
    >>> from bert_tf.config import load_config
    >>> model = BertPretrainer(load_config("bert_tiny").replace(vocab_size=100))
    >>> ids = np.array([[1, 7, 4, 2, 0]])
    >>> outputs = model({"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids,
    ...                  "masked_lm_positions": np.array([[2]])})
    >>> outputs["mlm_logits"].shape, outputs["nsp_logits"].shape
    (TensorShape([1, 1, 100]), TensorShape([1, 2]))
    """

    def __init__(
        self,
        config: BertConfig | dict[str, Any],
        dtype=None,
        name: str = "bert_pretrainer",
        packed: bool = False,
        **kwargs,
    ):
        config = as_config(config)
        encoder = BertEncoder(config, dtype=dtype, packed=packed)
        masked_lm_head = MaskedLMHead(
            encoder.embeddings,
            hidden_act=config.hidden_act,
            initializer_range=config.initializer_range,
            dtype=dtype,
            name="masked_lm_head",
        )
        next_sentence_head = NextSentenceHead(
            initializer_range=config.initializer_range, dtype=dtype, name="next_sentence_head"
        )
        input_names = PACKED_PRETRAINER_INPUTS if packed else PRETRAINER_INPUTS
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in input_names}
        encoded = encoder({name: inputs[name] for name in ENCODER_INPUTS})
        pooled_output = encoded["pooled_output"]
        if packed:  # the pooler on every instance's [CLS]: [batch, instances, hidden]
            cls_positions = ops.expand_dims(inputs["next_sentence_positions"], -1)  # [batch, instances, 1]
            cls_output = ops.take_along_axis(encoded["sequence_output"], cls_positions, axis=1)
            pooled_output = encoder.pooler_dense(cls_output)
        outputs = {
            "mlm_logits": masked_lm_head(encoded["sequence_output"], inputs["masked_lm_positions"]),
            "nsp_logits": next_sentence_head(pooled_output),
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, **kwargs)
        self.config = config
        self.packed = packed
        self._feature_names = input_names
        self.encoder = encoder
        self.masked_lm_head = masked_lm_head
        self.next_sentence_head = next_sentence_head

    def call(self, inputs, training=None, mask=None):
        return super().call(keep_inputs(inputs, self._feature_names), training=training, mask=mask)

    def get_config(self):
        return {
            "config": self.config.to_dict(),
            "name": self.name,
            "packed": self.packed,
            "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
