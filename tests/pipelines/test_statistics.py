"""Statistical properties of generated pretraining data over >= 50,000 sequences.

The sequences come from the embedded corpus (pipelines.corpus), several passes over it
(dupe_factor), through the same pair builder and masking the generator and the online
dataset use. Each block is masked twice, normally and with whole-word masking, and the
unmasked ids are kept as the reference for labels and replacements.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from bert_tf.tokenization import BertTokenizer
from pipelines import corpus, masking, text_dataset

VOCAB_FILE = str(Path(__file__).resolve().parents[1] / "fixtures" / "bert_uncased_vocab.txt")
MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS = 20
MASKED_LM_PROB = 0.15
MIN_SEQUENCES = 50_000


def _generate(seed: int, num_passes: int):
    tokenizer = BertTokenizer(VOCAB_FILE, lower_case=True)
    masking_vocab = masking.MaskingVocab.from_vocab(tokenizer.vocab)
    directory = tempfile.mkdtemp()
    path = corpus.write_corpus(os.path.join(directory, "corpus.txt"))
    blocks = text_dataset.pair_blocks(
        [path], tokenizer, max_seq_length=MAX_SEQ_LENGTH, seed=seed, num_passes=num_passes
    )

    def mask_both(block):
        out = {
            name: block[name] for name in ("input_ids", "input_mask", "segment_ids", "next_sentence_labels")
        }
        for prefix, whole_word in (("mlm_", False), ("wwm_", True)):
            masked = masking.mask_sequences(
                block["input_ids"],
                block["input_mask"],
                block["seed"],
                masking_vocab=masking_vocab,
                max_predictions_per_seq=MAX_PREDICTIONS,
                masked_lm_prob=MASKED_LM_PROB,
                whole_word_mask=whole_word,
            )
            out.update({prefix + name: value for name, value in masked.items()})
        return out

    parts: dict[str, list[np.ndarray]] = {}
    for block in blocks.map(mask_both, num_parallel_calls=tf.data.AUTOTUNE).as_numpy_iterator():
        for name, value in block.items():
            parts.setdefault(name, []).append(value)
    return tokenizer, masking_vocab, {name: np.concatenate(value) for name, value in parts.items()}


class GeneratedSequencesTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # One pass over the corpus gives ~700 pairs; 75 passes give > 50,000.
        cls.tokenizer, cls.masking_vocab, cls.data = _generate(seed=7, num_passes=75)
        cls.real = cls.data["input_mask"].astype(bool)
        cls.lengths = cls.real.sum(axis=1)
        vocab = cls.tokenizer.vocab
        cls.special_ids = np.array([i for i, t in enumerate(vocab) if re.match(r"^\[.*\]$", t)])

    def test_enough_sequences(self):
        self.assertGreaterEqual(len(self.lengths), MIN_SEQUENCES)

    def test_layout_segments_and_mask(self):
        ids, segments = self.data["input_ids"], self.data["segment_ids"]
        cls_id, sep_id = self.tokenizer.cls_id, self.tokenizer.sep_id
        self.assertTrue(np.all(self.lengths <= MAX_SEQ_LENGTH))
        self.assertTrue(np.all(self.lengths >= 5))
        # input_mask is a prefix of ones; padding is 0 everywhere.
        positions = np.arange(MAX_SEQ_LENGTH)[None, :]
        np.testing.assert_array_equal(self.real, positions < self.lengths[:, None])
        self.assertTrue(np.all(ids[~self.real] == 0) and np.all(segments[~self.real] == 0))
        np.testing.assert_array_equal(ids[:, 0], cls_id)
        np.testing.assert_array_equal(ids[np.arange(len(ids)), self.lengths - 1], sep_id)
        is_sep = ids == sep_id
        np.testing.assert_array_equal(is_sep.sum(axis=1), 2)
        first_sep = np.argmax(is_sep, axis=1)
        self.assertTrue(np.all(first_sep >= 2) and np.all(first_sep <= self.lengths - 3))  # A and B non-empty
        expected_segments = (positions > first_sep[:, None]) & self.real
        np.testing.assert_array_equal(segments, expected_segments.astype(segments.dtype))
        # No special token other than [CLS], [SEP] (and [UNK] for unknown words) in the text.
        allowed = [cls_id, sep_id, self.tokenizer.unk_id]
        self.assertFalse(np.isin(ids[self.real], self.special_ids[~np.isin(self.special_ids, allowed)]).any())

    def test_next_sentence_labels_are_fair(self):
        labels = self.data["next_sentence_labels"][:, 0]
        self.assertTrue(set(np.unique(labels)) <= {0, 1})
        self.assertAllInRange(labels.mean(), 0.49, 0.51)

    def _check_masking(self, prefix: str):
        data = self.data
        weights = data[prefix + "masked_lm_weights"]
        positions = data[prefix + "masked_lm_positions"]
        labels = data[prefix + "masked_lm_ids"]
        masked = data[prefix + "input_ids"]
        original = data["input_ids"]
        real_prediction = weights > 0
        rows = np.broadcast_to(np.arange(len(original))[:, None], positions.shape)

        # Padding slots are zero; real ones sorted, unique, inside the sequence.
        self.assertTrue(np.all(positions[~real_prediction] == 0) and np.all(labels[~real_prediction] == 0))
        self.assertTrue(np.all(positions[real_prediction] < self.lengths[rows[real_prediction]]))
        shifted = np.where(real_prediction, positions, MAX_SEQ_LENGTH + np.arange(MAX_PREDICTIONS))
        self.assertTrue(np.all(np.diff(shifted, axis=1) > 0))
        # Labels are the original ids; [CLS]/[SEP] are never chosen.
        np.testing.assert_array_equal(labels[real_prediction], original[rows, positions][real_prediction])
        self.assertFalse(
            np.isin(labels[real_prediction], [self.tokenizer.cls_id, self.tokenizer.sep_id]).any()
        )
        # Positions that were not chosen are unchanged.
        chosen = np.zeros_like(self.real)
        chosen[rows[real_prediction], positions[real_prediction]] = True
        np.testing.assert_array_equal(masked[~chosen], original[~chosen])

        # 80 / 10 / 10 over the chosen positions.
        new, old = masked[chosen], original[chosen]
        is_mask = new == self.tokenizer.mask_id
        is_kept = new == old
        is_random = ~is_mask & ~is_kept
        total = chosen.sum()
        self.assertAllInRange(is_mask.sum() / total, 0.79, 0.81)
        self.assertAllInRange(is_random.sum() / total, 0.09, 0.11)
        self.assertAllInRange(is_kept.sum() / total, 0.09, 0.11)
        # Random replacements are real word pieces only.
        self.assertFalse(np.isin(new[is_random], self.special_ids).any())
        self.assertTrue(np.isin(new[is_random], self.masking_vocab.replacement_ids).all())
        return chosen, is_mask, is_random

    def test_masking_rule_and_80_10_10(self):
        chosen, _, _ = self._check_masking("mlm_")
        rule = np.minimum(MAX_PREDICTIONS, np.maximum(1, np.round(self.lengths * MASKED_LM_PROB)))
        # Exactly num_to_predict per sequence, so the overall fraction is the rule's.
        np.testing.assert_array_equal(chosen.sum(axis=1), rule)
        self.assertAllInRange(
            chosen.sum() / self.lengths.sum(), MASKED_LM_PROB - 0.005, MASKED_LM_PROB + 0.005
        )

    def test_whole_word_masking_never_splits_a_word(self):
        chosen, is_mask, is_random = self._check_masking("wwm_")
        rule = np.minimum(MAX_PREDICTIONS, np.maximum(1, np.round(self.lengths * MASKED_LM_PROB)))
        per_row = chosen.sum(axis=1)
        self.assertTrue(np.all(per_row <= rule) and np.all(per_row >= 1))
        self.assertAllInRange(
            chosen.sum() / self.lengths.sum(), MASKED_LM_PROB - 0.005, MASKED_LM_PROB + 0.005
        )
        original, masked = self.data["input_ids"], self.data["wwm_input_ids"]
        continuation = self.masking_vocab.is_continuation[original]
        candidate = self.real & (original != self.tokenizer.cls_id) & (original != self.tokenizer.sep_id)
        # A ## piece continuing a word shares its choice and its 80/10/10 outcome.
        joined = continuation[:, 1:] & candidate[:, 1:] & candidate[:, :-1]
        self.assertGreater(joined.sum(), 1000)
        np.testing.assert_array_equal(chosen[:, 1:][joined], chosen[:, :-1][joined])
        both = joined & chosen[:, 1:]
        self.assertGreater(both.sum(), 100)
        # All pieces of a word are [MASK]ed or none is; a word not masked is kept whole or
        # replaced whole (a random piece equals the original only by a 1-in-30,000 chance).
        is_mask = masked == self.tokenizer.mask_id
        np.testing.assert_array_equal(is_mask[:, 1:][both], is_mask[:, :-1][both])
        kept = masked == original
        not_masked = both & ~is_mask[:, 1:]
        mixed = kept[:, 1:][not_masked] != kept[:, :-1][not_masked]
        self.assertGreater(not_masked.sum(), 20)
        self.assertLessEqual(mixed.sum(), 2)

    def test_same_seed_same_data_other_seed_other_data(self):
        _, _, again = _generate(seed=7, num_passes=2)
        count = len(again["input_ids"])
        for name in (
            "input_ids",
            "segment_ids",
            "next_sentence_labels",
            "mlm_masked_lm_positions",
            "wwm_input_ids",
        ):
            np.testing.assert_array_equal(again[name], self.data[name][:count])
        _, _, other = _generate(seed=8, num_passes=1)
        self.assertFalse(np.array_equal(other["input_ids"][:100], self.data["input_ids"][:100]))


if __name__ == "__main__":
    tf.test.main()
