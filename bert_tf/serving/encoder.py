"""The encoder SavedModel: packed inputs to sequence, pooled and per-layer outputs.

Callable function of the loaded object (`obj = tf.saved_model.load(dir)`):
  - `obj(inputs)`: {input_ids, input_mask, segment_ids} int32 [batch, seq] ->
    {sequence_output float32 [batch, seq, hidden], pooled_output float32 [batch, hidden],
    encoder_outputs: a list of num_hidden_layers float32 [batch, seq, hidden]}, exactly the
    dict the in-process `BertEncoder` returns. Also traced for int64 inputs.

Signature `serving_default` (what TF Serving, `saved_model_cli` and
`keras.layers.TFSMLayer` see; signatures hold tensors, not lists):
  inputs input_ids, input_mask, segment_ids int32 [batch, seq] (any seq up to
  max_position_embeddings) -> sequence_output [batch, seq, hidden], pooled_output
  [batch, hidden] and encoder_outputs float32 [num_hidden_layers, batch, seq, hidden]
  (the list stacked on a new first axis, so encoder_outputs[-1] == sequence_output).

Example:

>>> from bert_tf.config import load_config
>>> from bert_tf.models import BertEncoder
>>> encoder = BertEncoder(load_config("bert_tiny").replace(vocab_size=100))
>>> serving = EncoderServing(encoder)
>>> ids = tf.constant([[2, 5, 3, 0]])
>>> out = serving({"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32), "segment_ids": tf.zeros_like(ids)})
>>> out["pooled_output"].shape
TensorShape([1, 128])
"""

from __future__ import annotations

import tensorflow as tf

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def packed_input_specs(dtype: tf.DType = tf.int32, seq_length: int | None = None) -> dict[str, tf.TensorSpec]:
    """{input_ids, input_mask, segment_ids} specs of shape [batch, seq_length]."""
    return {name: tf.TensorSpec([None, seq_length], dtype, name=name) for name in INPUT_NAMES}


class EncoderServing(tf.Module):
    """Wraps a `BertEncoder` for saving: one call traced for int32 and int64 inputs.

    Like TF Hub encoders, the saved object also carries `vocab_file` (an asset) and
    `do_lower_case`, so a client can check it is pairing the right preprocessor.
    """

    def __init__(self, encoder, vocab_file: str | None = None, lower_case: bool | None = None) -> None:
        super().__init__(name="bert_encoder")
        self.encoder = encoder
        if vocab_file is not None:
            self.vocab_file = tf.saved_model.Asset(vocab_file)
        if lower_case is not None:
            self.do_lower_case = tf.Variable(bool(lower_case), trainable=False, name="do_lower_case")

    @tf.function
    def __call__(self, inputs: dict[str, tf.Tensor]) -> dict:
        inputs = {name: tf.cast(inputs[name], tf.int32) for name in INPUT_NAMES}
        outputs = self.encoder(inputs, training=False)
        return {
            "sequence_output": outputs["sequence_output"],
            "pooled_output": outputs["pooled_output"],
            "encoder_outputs": list(outputs["encoder_outputs"]),
        }

    def _serve(self, input_ids, input_mask, segment_ids):
        outputs = self({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids})
        return {
            "sequence_output": outputs["sequence_output"],
            "pooled_output": outputs["pooled_output"],
            "encoder_outputs": tf.stack(outputs["encoder_outputs"], axis=0),
        }

    def trace(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        """Traces every callable and returns the signatures dict for tf.saved_model.save."""
        self.__call__.get_concrete_function(packed_input_specs(tf.int32))
        self.__call__.get_concrete_function(packed_input_specs(tf.int64))
        specs = packed_input_specs(tf.int32)
        serving = tf.function(self._serve).get_concrete_function(**specs)
        return {"serving_default": serving}
