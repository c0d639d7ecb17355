"""Masked-LM predictions as graph ops over a batch of sequences.

The rule of the original release:

- num_to_predict = min(max_predictions_per_seq, max(1, round(length × masked_lm_prob)))
  where length counts [CLS] and [SEP] (round half to even, as Python's `round`);
- [CLS] and [SEP] are never chosen; the other positions are chosen in random order;
- each chosen position becomes [MASK] 80% of the time, a random token 10%, itself 10%;
  its label (masked_lm_ids) is the original id;
- whole-word masking chooses words (a piece and its `##` continuations) in random order,
  skipping a word that would take the count past num_to_predict.

Improvements: the random replacement is drawn only from real word pieces: never [PAD],
[CLS], [SEP], [MASK], [UNK] nor [unused*] (no bracketed token at all; [UNK] is excluded
because it is not text and the model should not learn to accept it in place of a word);
with whole-word masking the 80/10/10 choice is made once per word, so a word is either
fully [MASK]ed, fully replaced or fully kept. A word never spans a [SEP]: a `##` piece
that opens a segment (after a front truncation) starts a word of its own.

With a word segmenter (`pipelines.segmenters`), `word_continues` marks the CJK characters
that continue the word of the character before them; they join that word exactly as `##`
pieces do, so the characters of a Chinese word are chosen and replaced together.

Example:

>>> import tensorflow as tf
>>> from pipelines import masking
>>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s"]
>>> masking_vocab = masking.MaskingVocab.from_vocab(vocab)
>>> ids = tf.constant([[2, 5, 6, 7, 3, 5, 3, 0]], tf.int64)
>>> out = masking.mask_sequences(ids, tf.cast(ids > 0, tf.int64), tf.constant([1, 2], tf.int64),
...                              masking_vocab=masking_vocab, max_predictions_per_seq=3)
>>> int(tf.reduce_sum(out["masked_lm_weights"]))  # round(7 * 0.15) = 1
1
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

_BRACKETED = re.compile(r"^\[.*\]$")


@dataclasses.dataclass(frozen=True)
class MaskingVocab:
    """The vocabulary facts masking needs: special ids, replacement ids, `##` pieces."""

    cls_id: int
    sep_id: int
    mask_id: int
    replacement_ids: np.ndarray  # int64 [n]: ids a random replacement is drawn from
    is_continuation: np.ndarray  # bool [vocab_size]: pieces starting with "##"

    @classmethod
    def from_vocab(cls, vocab: Sequence[str]) -> MaskingVocab:
        """Builds it from a vocab list (id = index); special tokens are looked up by name."""
        index = {token: i for i, token in enumerate(vocab)}
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in index]
        if missing:
            raise ValueError(
                f"vocab has no {', '.join(missing)} token; masked-LM data needs [CLS], [SEP] and [MASK]"
            )
        replacement = [i for i, token in enumerate(vocab) if token and not _BRACKETED.match(token)]
        if not replacement:
            raise ValueError("vocab has no ordinary word piece to draw random replacements from")
        return cls(
            cls_id=index["[CLS]"],
            sep_id=index["[SEP]"],
            mask_id=index["[MASK]"],
            replacement_ids=np.asarray(replacement, np.int64),
            is_continuation=np.asarray([token.startswith("##") for token in vocab], bool),
        )


def num_to_predict(lengths: tf.Tensor, masked_lm_prob: float, max_predictions_per_seq: int) -> tf.Tensor:
    """min(max_predictions, max(1, round(length × prob))), rounding half to even like Python."""
    wanted = tf.cast(tf.round(tf.cast(lengths, tf.float64) * masked_lm_prob), tf.int64)
    return tf.minimum(tf.cast(max_predictions_per_seq, tf.int64), tf.maximum(wanted, 1))


def mask_sequences(
    input_ids: tf.Tensor,
    input_mask: tf.Tensor,
    seed: tf.Tensor,
    *,
    masking_vocab: MaskingVocab,
    max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15,
    whole_word_mask: bool = False,
    word_continues: tf.Tensor | None = None,
) -> dict[str, tf.Tensor]:
    """Chooses and applies masked-LM predictions.

    Args:
      input_ids: int64 [batch, seq], padded.
      input_mask: int [batch, seq], 1 on real tokens.
      seed: int64 [2], stateless seed; the same seed and inputs give the same output.
      word_continues: optional bool [batch, seq]: tokens that continue the word of the token
        before them besides `##` pieces (segmented CJK words); used by whole-word masking.

    Returns a dict: `input_ids` (int64 [batch, seq], with replacements applied),
    `masked_lm_positions`, `masked_lm_ids` (int64 [batch, P], sorted by position, zero
    padded) and `masked_lm_weights` (float32 [batch, P], 1.0 on real predictions).
    """
    input_ids = tf.convert_to_tensor(input_ids, tf.int64)
    real = tf.cast(input_mask, tf.bool)
    lengths = tf.reduce_sum(tf.cast(real, tf.int64), axis=1)
    to_predict = num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq)  # [batch]
    candidate = real & (input_ids != masking_vocab.cls_id) & (input_ids != masking_vocab.sep_id)
    seeds = tf.unstack(tf.random.experimental.stateless_split(seed, num=4))
    shape = tf.shape(input_ids)
    # float64 priorities: ties (which could choose one position too many) have odds ~2^-46.
    priority = tf.random.stateless_uniform(shape, seeds[0], dtype=tf.float64)
    decision = tf.random.stateless_uniform(shape, seeds[1], dtype=tf.float32)

    if whole_word_mask:
        chosen, decision = _choose_whole_words(
            input_ids, candidate, priority, decision, to_predict, masking_vocab, word_continues
        )
    else:
        # The num_to_predict highest priorities among the candidates.
        top = tf.math.top_k(
            tf.where(candidate, priority, tf.constant(-1.0, tf.float64)), k=max_predictions_per_seq
        )
        threshold = tf.gather(top.values, tf.expand_dims(to_predict - 1, 1), batch_dims=1)  # [batch, 1]
        chosen = candidate & (priority >= threshold)

    masked_ids = _replace_chosen(input_ids, chosen, decision, seeds[2], masking_vocab)
    return {"input_ids": masked_ids, **_predictions(input_ids, chosen, max_predictions_per_seq)}


def _word_keys(
    input_ids: tf.Tensor, candidate: tf.Tensor, masking_vocab: MaskingVocab, word_continues: tf.Tensor | None
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Where the words of the candidates start (bool [batch, seq]), a key per word (int64
    [batch, seq]: row × seq + index of the word within its row; non-candidates share a dump
    slot) and the number of keys."""
    batch_size, seq_length = (
        tf.shape(input_ids, out_type=tf.int64)[0],
        tf.shape(input_ids, out_type=tf.int64)[1],
    )
    continuation = tf.gather(tf.constant(masking_vocab.is_continuation), input_ids)
    if word_continues is not None:
        continuation |= tf.cast(word_continues, tf.bool)
    previous_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
    word_start = candidate & ~(continuation & previous_candidate)
    word_index = tf.cumsum(tf.cast(word_start, tf.int64), axis=1) - 1
    word_key = tf.reshape(tf.range(batch_size) * seq_length, [-1, 1]) + tf.maximum(word_index, 0)
    word_key = tf.where(candidate, word_key, batch_size * seq_length)
    return word_start, word_key, batch_size * seq_length + 1


def _choose_whole_words(
    input_ids: tf.Tensor,
    candidate: tf.Tensor,
    priority: tf.Tensor,
    decision: tf.Tensor,
    to_predict: tf.Tensor,
    masking_vocab: MaskingVocab,
    word_continues: tf.Tensor | None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Whole-word masking: words in random order, each taken unless it would pass
    num_to_predict. Returns the chosen positions and the 80/10/10 draws, one per word
    (bool and float32 [batch, seq])."""
    word_start, word_key, num_keys = _word_keys(input_ids, candidate, masking_vocab, word_continues)
    word_length = tf.math.unsorted_segment_sum(tf.cast(candidate, tf.int64), word_key, num_keys)
    start_length = tf.where(word_start, tf.gather(word_length, word_key), 0)  # [batch, seq]

    order = tf.argsort(
        tf.where(word_start, priority, tf.constant(-1.0, tf.float64)),
        axis=1,
        direction="DESCENDING",
        stable=True,
    )
    ordered_length = tf.transpose(tf.gather(start_length, order, batch_dims=1))  # [seq, batch]

    def take_word(state, word_length_at_rank):
        count, _ = state
        take = (word_length_at_rank > 0) & (count + word_length_at_rank <= to_predict)
        return count + tf.where(take, word_length_at_rank, 0), take

    _, taken = tf.scan(
        take_word, ordered_length, initializer=(tf.zeros_like(to_predict), tf.zeros_like(candidate[:, 0]))
    )
    taken_at_start = tf.gather(tf.transpose(taken), tf.argsort(order, axis=1, stable=True), batch_dims=1)
    # Spread the word's choice and its 80/10/10 draw to all its pieces.
    word_taken = tf.math.unsorted_segment_max(tf.cast(taken_at_start, tf.int64), word_key, num_keys)
    chosen = candidate & (tf.gather(word_taken, word_key) > 0)
    word_decision = tf.math.unsorted_segment_max(tf.where(word_start, decision, -1.0), word_key, num_keys)
    return chosen, tf.gather(word_decision, word_key)


def _replace_chosen(
    input_ids: tf.Tensor, chosen: tf.Tensor, decision: tf.Tensor, seed: tf.Tensor, masking_vocab: MaskingVocab
) -> tf.Tensor:
    """The chosen positions become [MASK] (decision < 0.8), a random word piece (< 0.9) or stay."""
    replacement_ids = tf.constant(masking_vocab.replacement_ids)
    random_index = tf.random.stateless_uniform(
        tf.shape(input_ids),
        seed,
        minval=0,
        maxval=tf.size(replacement_ids, out_type=tf.int64),
        dtype=tf.int64,
    )
    random_tokens = tf.gather(replacement_ids, random_index)
    masked_ids = tf.where(chosen & (decision < 0.8), tf.constant(masking_vocab.mask_id, tf.int64), input_ids)
    return tf.where(chosen & (decision >= 0.8) & (decision < 0.9), random_tokens, masked_ids)


def _predictions(
    input_ids: tf.Tensor, chosen: tf.Tensor, max_predictions_per_seq: int
) -> dict[str, tf.Tensor]:
    """masked_lm_positions, masked_lm_ids and masked_lm_weights of the chosen positions, in
    increasing order (the top -position values), padded with 0 (weight 0.0)."""
    seq_length = tf.shape(input_ids, out_type=tf.int64)[1]
    positions = tf.range(seq_length, dtype=tf.int64)[tf.newaxis, :]
    smallest_first = tf.math.top_k(
        tf.where(chosen, -positions, -seq_length), k=max_predictions_per_seq
    ).values
    sorted_positions = -smallest_first
    weights = sorted_positions < seq_length
    masked_lm_positions = tf.where(weights, sorted_positions, 0)
    masked_lm_ids = tf.where(weights, tf.gather(input_ids, masked_lm_positions, batch_dims=1), 0)
    return {
        "masked_lm_positions": masked_lm_positions,
        "masked_lm_ids": masked_lm_ids,
        "masked_lm_weights": tf.cast(weights, tf.float32),
    }
