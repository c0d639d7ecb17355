"""BERT with its pretraining heads: masked LM and next sentence prediction."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from bert_tf.config import BertConfig
from bert_tf.layers.masked_lm_head import MaskedLMHead, gather_positions
from bert_tf.layers.next_sentence_head import NextSentenceHead
from bert_tf.models.encoder import ENCODER_INPUTS, BertEncoder, as_config, keep_inputs

PRETRAINER_INPUTS = (*ENCODER_INPUTS, "masked_lm_positions")
PACKED_PRETRAINER_INPUTS = (*PRETRAINER_INPUTS, "next_sentence_positions")


def example_features(
    batch_size: int, seq_length: int, predictions: int, instances: int | None = None
) -> dict:
    """A batch of pretraining features (zeros; every token real), to build a model before
    training; `instances` adds the NSP slots of packed rows."""
    features = {name: np.zeros((batch_size, seq_length), "int32") for name in ("input_ids", "segment_ids")}
    features["input_mask"] = np.ones((batch_size, seq_length), "int32")
    features["masked_lm_positions"] = np.zeros((batch_size, predictions), "int32")
    if instances is not None:
        features["next_sentence_positions"] = np.zeros((batch_size, instances), "int32")
    return features


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(keras.Model):
    """The encoder plus `cls/predictions` (masked LM) and `cls/seq_relationship` (NSP).

    Takes the pretraining feature dict (the original TFRecord names; only `input_ids`,
    `input_mask`, `segment_ids` and `masked_lm_positions` are read, the labels may ride
    along) and returns float32 `mlm_logits` [batch, predictions, vocab] and `nsp_logits`
    [batch, 2]. `bert_tf.models.losses.pretraining_losses` turns them into the loss.

    `packed=True` takes packed rows (`bert_tf.layers.example_mask`; made by `bert_tf.preprocessing.packing`)
    and one more input, `next_sentence_positions` [batch, instances]: the [CLS] of each
    instance, whose pooled output gives `nsp_logits` [batch, instances, 2] (without it,
    each row is one instance). The weights and the functional graph are the unpacked ones
    (only `call` differs), so checkpoints load packed or unpacked.

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
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in PRETRAINER_INPUTS}
        encoded = encoder({name: inputs[name] for name in ENCODER_INPUTS})
        outputs = {
            "mlm_logits": masked_lm_head(encoded["sequence_output"], inputs["masked_lm_positions"]),
            "nsp_logits": next_sentence_head(encoded["pooled_output"]),
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, **kwargs)
        self.config = config
        self.packed = packed
        self.encoder = encoder
        self.masked_lm_head = masked_lm_head
        self.next_sentence_head = next_sentence_head

    def call(self, inputs, training=None, mask=None):
        if not self.packed:
            return super().call(keep_inputs(inputs, PRETRAINER_INPUTS), training=training, mask=mask)
        if isinstance(inputs, dict) and "next_sentence_positions" not in inputs:
            # Ordinary rows (e.g. the fill-mask demo): one instance each, its [CLS] first.
            inputs = {name: ops.convert_to_tensor(inputs[name]) for name in PRETRAINER_INPUTS}
            inputs["next_sentence_positions"] = ops.zeros_like(inputs["input_ids"][:, :1])
        inputs = keep_inputs(inputs, PACKED_PRETRAINER_INPUTS)
        encoded = self.encoder(inputs, training=training)  # [batch, seq, hidden]
        # The pooler on every instance's [CLS]: [batch, instances, hidden].
        pooled_output = self.encoder.pooler_dense(
            gather_positions(encoded["sequence_output"], inputs["next_sentence_positions"])
        )
        return {
            "mlm_logits": self.masked_lm_head(encoded["sequence_output"], inputs["masked_lm_positions"]),
            "nsp_logits": self.next_sentence_head(pooled_output),
        }

    def get_config(self):
        # The encoder is built from the pretrainer's own arguments (config, dtype, packed).
        return {**self.encoder.get_config(), "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
