"""The text preprocessor SavedModel: raw strings to packed BERT inputs, in the graph.

The exported module follows the TF Hub BERT preprocessor API (`tokenize`,
`bert_pack_inputs`, calling the model on strings), with the original feature names:

Callable functions of the loaded object (`obj = tf.saved_model.load(dir)`):
  - `obj(text)`: tf.string [batch] -> {input_ids, input_mask, segment_ids} int32
    [batch, seq_length]; `obj([text_a, text_b])` packs pairs.
  - `obj.tokenize(text)`: tf.string [batch] -> ragged int64 [batch, (pieces)].
  - `obj.bert_pack_inputs(segments)` / `obj.bert_pack_inputs(segments, seq_length)`:
    a list of one or two ragged int64 [batch, (pieces)] (what `tokenize` returns) -> the packed dict, at the
    exported seq_length or at a scalar int32 tensor `seq_length` (checked against
    max_position_embeddings at run time).
  - `obj.vocab_file` (asset), `obj.do_lower_case`, `obj.seq_length` (variables).

Signatures (dense tensors only, for TF Serving and `saved_model_cli show`):
  - `serving_default` and `default`: text [batch] string -> input_ids, input_mask,
    segment_ids int32 [batch, seq_length].
  - `serving_pair`: text_a, text_b [batch] string -> the same three.
  - `tokenize`: text [batch] string -> token_ids int64 [batch, max_pieces] (padded with
    [PAD]) and num_tokens int32 [batch].

Example:

>>> from bert_tf.tokenization import BertTokenizer
>>> preprocessor = BertPreprocessor(BertTokenizer("tests/fixtures/bert_uncased_vocab.txt"), 8, 512)
>>> preprocessor(tf.constant(["Hello world!"]))["input_ids"].numpy().tolist()
[[101, 7592, 2088, 999, 102, 0, 0, 0]]
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.preprocessing.segments import combine_segments

_TEXT = tf.TensorSpec([None], tf.string)
# What `tokenize` returns and `bert_pack_inputs` takes after loading: int64 [batch, (pieces)].
_RAGGED_IDS = tf.RaggedTensorSpec([None, None], tf.int64, ragged_rank=1)


class BertPreprocessor(tf.Module):
    """Tokenizes and packs text for a BERT encoder; saves with tensorflow-text ops only.

    Args:
      tokenizer: a `bert_tf.tokenization.BertTokenizer` (a tf.Module; its vocab table
        and asset are saved with this module).
      seq_length: default length of packed rows.
      max_position_embeddings: longest packing allowed (from the model config).
    """

    def __init__(self, tokenizer, seq_length: int, max_position_embeddings: int) -> None:
        super().__init__(name="bert_preprocessor")
        self.tokenizer = tokenizer
        self._cls_id, self._sep_id, self._pad_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
        self._seq_length = seq_length
        self._max_positions = max_position_embeddings
        self.vocab_file = tf.saved_model.Asset(tokenizer.vocab_file)
        self.do_lower_case = tf.Variable(bool(tokenizer.lower_case), trainable=False, name="do_lower_case")
        self.seq_length = tf.Variable(seq_length, dtype=tf.int32, trainable=False, name="seq_length")

    @tf.function
    def tokenize(self, text: tf.Tensor) -> tf.RaggedTensor:
        """tf.string [batch] -> ragged int64 [batch, (pieces)], without [CLS]/[SEP]."""
        return tf.cast(self.tokenizer.tokenize(text), tf.int64)

    @tf.function
    def bert_pack_inputs(self, segments, seq_length=None) -> dict[str, tf.Tensor]:
        """One or two ragged id tensors -> {input_ids, input_mask, segment_ids} int32."""
        if seq_length is None:
            seq_length = self._seq_length
        else:
            seq_length = tf.convert_to_tensor(seq_length, tf.int32)
            tf.debugging.assert_less_equal(
                seq_length,
                self._max_positions,
                message=f"seq_length is above max_position_embeddings={self._max_positions}",
            )
            tf.debugging.assert_greater_equal(seq_length, len(segments) + 1, message="seq_length too small")
        return combine_segments(list(segments), seq_length, self._cls_id, self._sep_id, self._pad_id)

    @tf.function
    def __call__(self, text) -> dict[str, tf.Tensor]:
        """tf.string [batch] (or a list of two) -> the packed dict at the exported seq_length."""
        texts = [text] if isinstance(text, tf.Tensor) else list(text)
        return self.bert_pack_inputs([self.tokenize(t) for t in texts])

    # --- signatures: dense in, dense out --------------------------------------

    def _serve_single(self, text):
        return self(text)

    def _serve_pair(self, text_a, text_b):
        return self([text_a, text_b])

    def _serve_tokenize(self, text):
        ids = self.tokenize(text)
        return {
            "token_ids": ids.to_tensor(default_value=tf.constant(self._pad_id, tf.int64)),
            "num_tokens": tf.cast(ids.row_lengths(), tf.int32),
        }

    def trace(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        """Traces every callable and returns the signatures dict for tf.saved_model.save."""
        self.tokenize.get_concrete_function(_TEXT)
        for count in (1, 2):
            specs = [_RAGGED_IDS] * count
            self.bert_pack_inputs.get_concrete_function(specs)
            self.bert_pack_inputs.get_concrete_function(specs, tf.TensorSpec([], tf.int32))
        self.__call__.get_concrete_function(_TEXT)
        self.__call__.get_concrete_function([_TEXT, _TEXT])
        single = tf.function(self._serve_single).get_concrete_function(
            tf.TensorSpec([None], tf.string, name="text")
        )
        pair = tf.function(self._serve_pair).get_concrete_function(
            tf.TensorSpec([None], tf.string, name="text_a"), tf.TensorSpec([None], tf.string, name="text_b")
        )
        tokenize = tf.function(self._serve_tokenize).get_concrete_function(
            tf.TensorSpec([None], tf.string, name="text")
        )
        return {"serving_default": single, "default": single, "serving_pair": pair, "tokenize": tokenize}
