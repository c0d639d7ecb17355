"""Packing in the graph matches the original run_classifier.py layout and trimming."""

import os

import numpy as np
import tensorflow as tf

from bert_tf.preprocessing.segments import combine_segments, tokenize_with_mask_markers
from tests.harness.reference import CLS, PAD, SEP, original_features

VOCAB = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bert_uncased_vocab.txt")


class PackSegmentsTest(tf.test.TestCase):
    def test_pairs_match_the_original_on_random_lengths(self):
        rng = np.random.default_rng(7)
        for seq_length in (3, 4, 5, 8, 13):
            lengths = rng.integers(0, 14, size=(60, 2))
            a = [list(rng.integers(1000, 2000, size=n)) for n in lengths[:, 0]]
            b = [list(rng.integers(2000, 3000, size=n)) for n in lengths[:, 1]]
            packed = combine_segments(
                [
                    tf.ragged.constant(a, dtype=tf.int64, ragged_rank=1),
                    tf.ragged.constant(b, dtype=tf.int64, ragged_rank=1),
                ],
                seq_length,
                CLS,
                SEP,
                PAD,
            )
            expected = [original_features(x, y, seq_length) for x, y in zip(a, b, strict=True)]
            self.assertAllEqual(packed["input_ids"], [e[0] for e in expected])
            self.assertAllEqual(packed["input_mask"], [e[1] for e in expected])
            self.assertAllEqual(packed["segment_ids"], [e[2] for e in expected])
            self.assertEqual(packed["input_ids"].dtype, tf.int32)

    def test_single_segments_are_cut_from_the_end(self):
        rows = [[5, 6, 7, 8, 9, 10], [], [11]]
        packed = combine_segments([tf.ragged.constant(rows, dtype=tf.int64, ragged_rank=1)], 5, CLS, SEP, PAD)
        expected = [original_features(row, None, 5) for row in rows]
        self.assertAllEqual(packed["input_ids"], [e[0] for e in expected])
        self.assertAllEqual(packed["input_mask"], [e[1] for e in expected])

    def test_word_level_ragged_is_merged(self):
        words = tf.ragged.constant([[[5, 6], [7]], [[8]]], dtype=tf.int64)
        packed = combine_segments([words], 6, CLS, SEP, PAD)
        self.assertAllEqual(packed["input_ids"], [[CLS, 5, 6, 7, SEP, PAD], [CLS, 8, SEP, PAD, PAD, PAD]])

    def test_three_segments_are_refused(self):
        segment = tf.ragged.constant([[5]], dtype=tf.int64)
        with self.assertRaisesRegex(ValueError, "one or two segments"):
            combine_segments([segment] * 3, 8, CLS, SEP, PAD)


class MaskMarkerTest(tf.test.TestCase):
    def test_literal_mask_becomes_the_mask_token(self):
        from bert_tf.tokenization import BertTokenizer

        tokenizer = BertTokenizer(VOCAB, lower_case=True)
        mask = tokenizer.mask_id
        texts = tf.constant(["The [MASK] sat.", "[MASK]", "", "a[MASK][MASK]b", "no mask", "[mask] is text"])
        ids = tokenize_with_mask_markers(tokenizer.tokenize, texts, mask).to_list()

        def plain(text):
            return tokenizer.tokenize(tf.constant([text])).to_list()[0]

        self.assertEqual(ids[0], plain("the") + [mask] + plain("sat."))
        self.assertEqual(ids[1], [mask])
        self.assertEqual(ids[2], [])
        self.assertEqual(ids[3], plain("a") + [mask, mask] + plain("b"))
        self.assertEqual(ids[4], plain("no mask"))
        # Only the exact upper-case marker is special; "[mask]" is tokenized as text.
        self.assertEqual(ids[5], plain("[mask] is text"))
        self.assertNotIn(mask, ids[5])


if __name__ == "__main__":
    tf.test.main()
