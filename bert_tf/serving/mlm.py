"""The fill-mask SavedModel: text with "[MASK]" in it to the top-k tokens per mask.

Here a literal "[MASK]" in the text means the mask token (the text is split on it and
the mask id inserted between the tokenized parts); the tokenizer alone would split it
into "[", "mask", "]" like the original. Masks beyond seq_length - 2 word pieces are
trimmed away with the rest of the text and get no prediction.

Callable function and signature `serving_default` (text: tf.string [batch]) ->
  - top_k_tokens  tf.string [batch, max_masks, top_k]  word pieces, best first
  - top_k_ids     int32     [batch, max_masks, top_k]
  - top_k_scores  float32   [batch, max_masks, top_k]  softmax probabilities
  - mask_positions int32    [batch, max_masks]         positions in the packed input
  - num_masks     int32     [batch]
max_masks is the largest number of masks in any text of the batch; rows with fewer
masks are padded with token "", id -1, score 0 and position -1.

Example:

>>> from bert_tf.config import load_config
>>> from bert_tf.models import BertPretrainer
>>> from bert_tf.tokenization import BertTokenizer
>>> tokenizer = BertTokenizer("tests/fixtures/bert_uncased_vocab.txt")
>>> pretrainer = BertPretrainer(load_config("bert_tiny"))
>>> fill_mask = FillMask(pretrainer, tokenizer, seq_length=16, top_k=3)
>>> fill_mask(tf.constant(["the [MASK] sat on the [MASK]"]))["top_k_tokens"].shape
TensorShape([1, 2, 3])
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.preprocessing.segments import combine_segments, tokenize_with_mask_markers
from bert_tf.serving.loading import load_pretrained
from bert_tf.serving.saving import check_seq_length
from bert_tf.tokenization import BertTokenizer


class FillMask(tf.Module):
    """Predicts the tokens behind each "[MASK]" with a `BertPretrainer`'s MLM head.

    Args:
      pretrainer: a `bert_tf.models.BertPretrainer` (its `mlm_logits` output is used).
      tokenizer: the matching `bert_tf.tokenization.BertTokenizer`.
      seq_length: packed length; longer texts are trimmed from the end.
      top_k: how many predictions per mask.
    """

    def __init__(self, pretrainer, tokenizer, seq_length: int, top_k: int = 5) -> None:
        super().__init__(name="bert_fill_mask")
        vocab_size = len(tokenizer.vocab)
        if not 1 <= top_k <= vocab_size:
            raise ValueError(f"top_k must be in [1, vocab size {vocab_size}], got {top_k}")
        self.pretrainer = pretrainer
        self.tokenizer = tokenizer
        self._ids = {"cls": tokenizer.cls_id, "sep": tokenizer.sep_id, "pad": tokenizer.pad_id}
        self._mask_id = tokenizer.mask_id
        self._seq_length = seq_length
        self._top_k = top_k
        self._vocab = tf.constant(tokenizer.vocab)
        self.vocab_file = tf.saved_model.Asset(tokenizer.vocab_file)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def __call__(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        pieces = tokenize_with_mask_markers(self.tokenizer.tokenize, text, self._mask_id)
        packed = combine_segments(
            [pieces], self._seq_length, self._ids["cls"], self._ids["sep"], self._ids["pad"]
        )
        batch_size = tf.shape(text)[0]
        is_mask = tf.equal(packed["input_ids"], self._mask_id)  # [batch, seq]
        where = tf.where(is_mask)  # [total masks, 2] row-major, so positions ascend per row
        positions = tf.RaggedTensor.from_value_rowids(
            tf.cast(where[:, 1], tf.int32), where[:, 0], nrows=tf.cast(batch_size, tf.int64)
        )
        num_masks = tf.cast(positions.row_lengths(), tf.int32)  # [batch]
        max_masks = tf.reduce_max(tf.concat([num_masks, [0]], axis=0))
        # The model always gets at least one position (a batch without masks still runs).
        padded = positions.to_tensor(default_value=0, shape=tf.stack([batch_size, tf.maximum(max_masks, 1)]))
        outputs = self.pretrainer({**packed, "masked_lm_positions": padded}, training=False)
        probabilities = tf.nn.softmax(tf.cast(outputs["mlm_logits"], tf.float32), axis=-1)
        scores, ids = tf.math.top_k(probabilities[:, :max_masks], k=self._top_k)  # [batch, M, k]
        valid = tf.sequence_mask(num_masks, max_masks)[:, :, None]  # [batch, M, 1]
        valid_k = tf.broadcast_to(valid, tf.shape(ids))
        ids = tf.where(valid_k, ids, -1)
        return {
            "top_k_ids": ids,
            "top_k_tokens": tf.where(valid_k, tf.gather(self._vocab, tf.maximum(ids, 0)), ""),
            "top_k_scores": tf.where(valid_k, scores, 0.0),
            "mask_positions": tf.where(valid[:, :, 0], padded[:, :max_masks], -1),
            "num_masks": num_masks,
        }

    def trace(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        """Returns the signatures dict for tf.saved_model.save."""
        return {"serving_default": self.__call__.get_concrete_function()}


def fill_mask_texts(settings, texts: list[str]) -> list[list[list[tuple[str, float]]]]:
    """What `python -m bert_tf.fill_mask` runs (`settings`: a `FillMaskSettings`).

    Returns, for each text, for each [MASK] in it (within max_seq_length), the top_k
    (word piece, probability) pairs, best first.
    """
    pretrainer, config, tokenizer_settings = load_pretrained(settings.init_checkpoint, "pretraining")
    check_seq_length(settings.max_seq_length, config)
    tokenizer = BertTokenizer(tokenizer_settings.vocab_file, lower_case=tokenizer_settings.lower_case)
    fill_mask = FillMask(pretrainer, tokenizer, settings.max_seq_length, settings.top_k)
    outputs = {name: value.numpy() for name, value in fill_mask(tf.constant(texts)).items()}
    return [
        [
            [
                (token.decode("utf-8"), float(score))
                for token, score in zip(
                    outputs["top_k_tokens"][row, mask], outputs["top_k_scores"][row, mask], strict=True
                )
            ]
            for mask in range(outputs["num_masks"][row])
        ]
        for row in range(len(texts))
    ]
