"""The BERT encoder network: embeddings, Transformer blocks and the pooler."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from bert_tf.config import BertConfig
from bert_tf.layers.activations import truncated_normal
from bert_tf.layers.attention import attention_bias
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.example_mask import example_attention_bias, example_position_ids
from bert_tf.layers.transformer_block import TransformerBlock

ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")


def as_config(config: BertConfig | dict[str, Any]) -> BertConfig:
    """Accepts a `BertConfig` or its dict (as stored by `get_config`)."""
    if isinstance(config, BertConfig):
        return config
    if isinstance(config, dict):
        return BertConfig.from_dict(config)
    raise TypeError(f"expected a BertConfig or a dict of its fields, got {type(config).__name__}")


def keep_inputs(inputs: dict, names) -> dict:
    """The entries of a feature dict a model takes (training batches carry labels too)."""
    if not isinstance(inputs, dict):
        return inputs
    missing = [name for name in names if name not in inputs]
    if missing:
        raise KeyError(f"the input dict lacks {missing}; it has {sorted(inputs)}")
    return {name: inputs[name] for name in names}


def _encode(embeddings, transformer_layers, pooler_dense, inputs: dict, packed: bool, training=None) -> dict:
    """The encoder's forward pass: built once as the functional graph, run as is when packed."""
    if packed:
        position_ids = example_position_ids(inputs["input_mask"])
        hidden = embeddings(inputs["input_ids"], inputs["segment_ids"], position_ids, training=training)
        bias = example_attention_bias(inputs["input_mask"])  # [batch, 1, seq, seq] float32
    else:
        hidden = embeddings(inputs["input_ids"], inputs["segment_ids"], training=training)
        bias = attention_bias(inputs["input_mask"])  # [batch, 1, 1, seq] float32
    encoder_outputs = []
    for layer in transformer_layers:
        hidden = layer(hidden, bias, training=training)
        encoder_outputs.append(hidden)
    pooled = pooler_dense(ops.take(hidden, 0, axis=1))  # [CLS] -> [batch, hidden]
    return {"sequence_output": hidden, "pooled_output": pooled, "encoder_outputs": encoder_outputs}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(keras.Model):
    """BERT's Transformer encoder (the `bert/` scope of the original checkpoints).

    Takes a dict of int tensors `input_ids`, `input_mask` (1 = real token) and `segment_ids`,
    each [batch, seq]; returns a dict with `sequence_output` [batch, seq, hidden],
    `pooled_output` [batch, hidden] (tanh dense on [CLS]) and `encoder_outputs`, the output
    of every Transformer block. Extra entries in the input dict are ignored.

    `packed=True` takes packed rows (several instances per row, `input_mask` holding the
    instance number of each token; see `bert_tf.layers.example_mask`): positions restart and
    attention stays within each instance; `pooled_output` is then that of each row's first
    instance. The functional graph, and so the checkpoint layout, is the unpacked one
    either way (only `call` differs), so each form loads the other's checkpoints.

    Example:

    >>> import numpy as np
    >>> from bert_tf.config import load_config
    >>> encoder = BertEncoder(load_config("bert_tiny").replace(vocab_size=100))
    >>> ids = np.array([[1, 7, 8, 2, 0]])
    >>> outputs = encoder({"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids})
    >>> outputs["sequence_output"].shape, outputs["pooled_output"].shape
    (TensorShape([1, 5, 128]), TensorShape([1, 128]))
    """

    def __init__(
        self,
        config: BertConfig | dict[str, Any],
        dtype=None,
        name: str = "bert",
        packed: bool = False,
        **kwargs,
    ):
        config = as_config(config)
        embeddings = BertEmbeddings(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            initializer_range=config.initializer_range,
            dropout_rate=config.hidden_dropout_prob,
            dtype=dtype,
            name="embeddings",
        )
        transformer_layers = [
            TransformerBlock(
                hidden_size=config.hidden_size,
                num_attention_heads=config.num_attention_heads,
                intermediate_size=config.intermediate_size,
                hidden_act=config.hidden_act,
                hidden_dropout_prob=config.hidden_dropout_prob,
                attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                initializer_range=config.initializer_range,
                dtype=dtype,
                name=f"layer_{index}",
            )
            for index in range(config.num_hidden_layers)
        ]
        pooler_dense = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=truncated_normal(config.initializer_range),
            dtype=dtype,
            name="pooler_dense",
        )

        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in ENCODER_INPUTS}
        outputs = _encode(embeddings, transformer_layers, pooler_dense, inputs, packed=False)
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, **kwargs)

        self.config = config
        self.packed = packed
        self.embeddings = embeddings
        self.transformer_layers = transformer_layers
        self.pooler_dense = pooler_dense

    def call(self, inputs, training=None, mask=None):
        if self.packed:
            return self.call_packed(inputs, training=training)
        return super().call(keep_inputs(inputs, ENCODER_INPUTS), training=training, mask=mask)

    def call_packed(self, inputs, training=None) -> dict:
        """The forward pass on packed rows (whatever `packed` is): task models call it for
        packed training batches and the encoder as built for everything else."""
        layers = (self.embeddings, self.transformer_layers, self.pooler_dense)
        return _encode(*layers, keep_inputs(inputs, ENCODER_INPUTS), packed=True, training=training)

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
