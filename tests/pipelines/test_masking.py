"""Masked-LM selection: the counting rule, the replacement vocabulary, whole words."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pipelines import masking

VOCAB = [
    "[PAD]",
    "[unused0]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "<S>",
    "the",
    "cat",
    "##s",
    "##y",
    "sat",
    ".",
]
PAD, CLS, SEP, MASK = 0, 3, 4, 5


class MaskingTest(tf.test.TestCase):
    def test_num_to_predict_is_the_original_rule_with_pythons_rounding(self):
        lengths = np.arange(1, 513)
        for prob in (0.15, 0.1, 0.2):
            got = masking.num_to_predict(tf.constant(lengths), prob, 20).numpy()
            # The original: min(max_predictions, max(1, int(round(len(tokens) * prob)))).
            expected = [min(20, max(1, int(round(n * prob)))) for n in lengths]
            self.assertEqual(got.tolist(), expected)

    def test_replacements_are_only_real_word_pieces(self):
        masking_vocab = masking.MaskingVocab.from_vocab(VOCAB)
        self.assertEqual(
            [VOCAB[i] for i in masking_vocab.replacement_ids], ["<S>", "the", "cat", "##s", "##y", "sat", "."]
        )
        self.assertEqual(
            (masking_vocab.cls_id, masking_vocab.sep_id, masking_vocab.mask_id), (CLS, SEP, MASK)
        )
        with self.assertRaisesRegex(ValueError, r"no \[MASK\]"):
            masking.MaskingVocab.from_vocab(["[PAD]", "[CLS]", "[SEP]", "a"])

    def test_hand_worked_whole_word_masking(self):
        # [CLS] cat ##s ##y sat [SEP] the [SEP] [PAD]: length 8, round(8 × 0.4) = 3 predictions.
        # Words: "cat ##s ##y" (3 pieces), "sat", "the". Either the 3-piece word alone, or
        # "sat" and "the" (the 3-piece word no longer fits after any other word).
        masking_vocab = masking.MaskingVocab.from_vocab(VOCAB)
        ids = tf.constant([[CLS, 8, 9, 10, 11, SEP, 7, SEP, PAD]] * 400, tf.int64)
        out = masking.mask_sequences(
            ids,
            tf.cast(ids != PAD, tf.int64),
            tf.constant([4, 2], tf.int64),
            masking_vocab=masking_vocab,
            max_predictions_per_seq=4,
            masked_lm_prob=0.4,
            whole_word_mask=True,
        )
        positions = out["masked_lm_positions"].numpy()
        weights = out["masked_lm_weights"].numpy()
        chosen = {tuple(p[w > 0]) for p, w in zip(positions, weights, strict=True)}
        self.assertEqual(chosen, {(1, 2, 3), (4, 6)})
        # A word's pieces are all [MASK]ed or none is (a random piece may equal the
        # original in a 7-piece vocabulary, so kept and random are not told apart here).
        masked = out["input_ids"].numpy()
        word = masked[positions[:, 0] == 1, 1:4]
        is_mask = word == MASK
        self.assertTrue(np.all(is_mask == is_mask[:, :1]))
        self.assertAllInRange(is_mask[:, 0].mean(), 0.7, 0.9)

    def test_special_tokens_and_padding_are_never_chosen(self):
        masking_vocab = masking.MaskingVocab.from_vocab(VOCAB)
        rng = np.random.default_rng(0)
        ids = rng.integers(7, len(VOCAB), size=(2000, 16))
        ids[:, 0] = CLS
        ids[:, 7] = SEP
        ids[:, 12] = SEP
        ids[:, 13:] = PAD
        for whole_word in (False, True):
            out = masking.mask_sequences(
                tf.constant(ids),
                tf.constant((ids != PAD).astype(np.int64)),
                tf.constant([1, 1], tf.int64),
                masking_vocab=masking_vocab,
                max_predictions_per_seq=5,
                masked_lm_prob=0.3,
                whole_word_mask=whole_word,
            )
            positions = out["masked_lm_positions"].numpy()[out["masked_lm_weights"].numpy() > 0]
            self.assertFalse(np.isin(positions, [0, 7, 12, 13, 14, 15]).any())
            masked = out["input_ids"].numpy()
            np.testing.assert_array_equal(masked[:, [0, 7, 12]], ids[:, [0, 7, 12]])
            np.testing.assert_array_equal(masked[:, 13:], 0)
            text_positions = [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
            self.assertFalse(np.isin(masked[:, text_positions], [PAD, 1, 2, CLS, SEP]).any())


if __name__ == "__main__":
    tf.test.main()
