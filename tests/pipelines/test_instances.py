"""NSP pairs on corpora small enough to work out by hand."""

from __future__ import annotations

import random

import numpy as np
import tensorflow as tf

from pipelines import instances

CLS, SEP = 101, 102


_BUILDERS = {}


def _pairs(documents, seed, max_seq_length=64, short_seq_prob=0.0):
    key = (max_seq_length, short_seq_prob)
    if key not in _BUILDERS:  # one traced graph per configuration keeps the tests fast
        _BUILDERS[key] = tf.function(
            lambda documents, seed: instances.build_pairs(
                documents,
                seed,
                max_seq_length=max_seq_length,
                cls_id=CLS,
                sep_id=SEP,
                short_seq_prob=short_seq_prob,
            ),
            reduce_retracing=True,
        )
    out = _BUILDERS[key](
        tf.ragged.constant(documents, dtype=tf.int64, ragged_rank=2), tf.constant([seed, 3], tf.int64)
    )
    triples = []
    lengths = out["input_mask"].numpy().sum(axis=1)
    for ids, length, label in zip(
        out["input_ids"].numpy(), lengths, out["next_sentence_labels"].numpy(), strict=True
    ):
        ids = ids.tolist()
        assert all(i == 0 for i in ids[length:])
        ids = ids[:length]
        first_sep = ids.index(SEP)
        triples.append((tuple(ids[1:first_sep]), tuple(ids[first_sep + 1 : -1]), int(label)))
        assert ids[0] == CLS and ids[-1] == SEP
    return triples, out


def _original_truncation(length_a, length_b, max_num_tokens):
    """The original loop: trim the longer side (B on ties) until the pair fits."""
    trim_a = trim_b = 0
    while (length_a - trim_a) + (length_b - trim_b) > max_num_tokens:
        if length_a - trim_a > length_b - trim_b:
            trim_a += 1
        else:
            trim_b += 1
    return trim_a, trim_b


class PairsByHandTest(tf.test.TestCase):
    def test_two_documents_give_exactly_the_hand_worked_pairs(self):
        # Target length 61 covers each document, so each is one chunk of two sentences.
        documents = [[[10, 11, 12], [13, 14]], [[20, 21], [22]]]
        a0, b0, a1, b1 = (10, 11, 12), (13, 14), (20, 21), (22,)
        allowed = {
            # Document 0: actual next, or A = its first sentence with B from document 1
            # (from either of its sentences, up to its end); the put-back second
            # sentence is then a one-sentence chunk at the end: actual next borrows the
            # preceding sentence as A, random next takes B from document 1.
            (a0, b0, 0),
            (a0, (20, 21, 22), 1),
            (a0, (22,), 1),
            (b0, (20, 21, 22), 1),
            (b0, (22,), 1),
            # Document 1, the same way.
            (a1, b1, 0),
            (a1, (10, 11, 12, 13, 14), 1),
            (a1, (13, 14), 1),
            (b1, (10, 11, 12, 13, 14), 1),
            (b1, (13, 14), 1),
        }
        seen = set()
        for seed in range(300):
            triples, out = _pairs(documents, seed)
            self.assertContainsSubset(set(triples), allowed)
            seen |= set(triples)
            # One pair per document when its first pair is an actual next, two otherwise.
            first_of_doc1 = 1 if triples[0][2] == 0 else 2
            self.assertLen(triples, first_of_doc1 + (1 if triples[first_of_doc1][2] == 0 else 2))
            segments = out["segment_ids"].numpy().tolist()
            for (a, b, _), segment in zip(triples, segments, strict=True):
                padding = [0] * (64 - len(a) - len(b) - 3)
                self.assertEqual(segment, [0] * (len(a) + 2) + [1] * (len(b) + 1) + padding)
        self.assertEqual(seen, allowed)

    def test_truncation_counts_match_the_original_loop(self):
        rng = random.Random(0)
        cases = [(rng.randint(1, 300), rng.randint(1, 300), rng.randint(2, 300)) for _ in range(2000)]
        cases += [(50, 50, 17), (1, 100, 10), (100, 1, 10), (5, 5, 10), (6, 5, 10)]
        length_a, length_b, max_tokens = (np.array(column, np.int64) for column in zip(*cases, strict=True))
        trim_a, trim_b = [], []
        for max_num_tokens in sorted(set(max_tokens.tolist())):
            rows = max_tokens == max_num_tokens
            got_a, got_b = instances.truncation_counts(
                tf.constant(length_a[rows]), tf.constant(length_b[rows]), max_num_tokens
            )
            trim_a += got_a.numpy().tolist()
            trim_b += got_b.numpy().tolist()
        expected = [
            _original_truncation(a, b, m)
            for m in sorted(set(max_tokens.tolist()))
            for a, b, mm in zip(length_a, length_b, max_tokens, strict=True)
            if mm == m
        ]
        self.assertEqual(list(zip(trim_a, trim_b, strict=True)), expected)

    def test_truncation_keeps_contiguous_text_trimmed_at_both_ends(self):
        documents = [[list(range(1000, 1050)), list(range(2000, 2050))]]
        front_trims = []
        for seed in range(40):
            triples, _ = _pairs(documents, seed, max_seq_length=20)
            for a, b, _ in triples:
                self.assertLessEqual(len(a) + len(b), 17)
                for part in (a, b):
                    self.assertEqual(list(part), list(range(part[0], part[0] + len(part))))
                front_trims.append(a[0] % 1000)
        # 41 of A's 50 tokens go; each from the front with probability 1/2.
        self.assertGreater(len(set(front_trims)), 5)
        self.assertAllInRange(np.mean(front_trims), 16, 25)

    def test_labels_are_fair_on_short_documents(self):
        # Two-sentence documents: the original gives ~64% random labels here (the
        # put-back sentence is a one-sentence chunk that always gets a random B).
        rng = np.random.default_rng(0)
        documents = [[[int(t) for t in rng.integers(1000, 5000, 6)] for _ in range(2)] for _ in range(200)]
        labels = []
        for seed in range(30):
            triples, _ = _pairs(documents, seed)
            labels += [label for _, _, label in triples]
            for a, b, label in triples:
                if label == 0:  # actual next: consecutive sentences of one document
                    self.assertIn([list(a), list(b)], documents)
        self.assertGreater(len(labels), 8000)
        self.assertAllInRange(np.mean(labels), 0.48, 0.52)

    def test_one_sentence_documents_only_give_random_text(self):
        documents = [[[30, 31]], [[40, 41], [42]], [[50]]]
        for seed in range(50):
            triples, out = _pairs(documents, seed)
            self.assertEqual(int(out["single_sentence_documents"]), 2)
            self.assertTrue(all(a in {(40, 41), (42,)} for a, _, _ in triples))

    def test_empty_sentences_and_documents_are_dropped_and_counted(self):
        documents = [[[], [60, 61], [], [62]], [[]], [[70], [71, 72]]]
        triples, out = _pairs(documents, seed=1)
        self.assertEqual(int(out["empty_sentences"]), 3)
        self.assertEqual(int(out["empty_documents"]), 1)
        for a, b, _ in triples:
            self.assertTrue(a and b)

    def test_a_single_document_draws_random_text_from_itself(self):
        documents = [[[1, 2], [3, 4], [5, 6], [7, 8]]]
        for seed in range(20):
            triples, _ = _pairs(documents, seed, max_seq_length=8)
            for a, b, _ in triples:
                self.assertTrue(set(a) | set(b) <= set(range(1, 9)))

    def test_same_seed_same_pairs(self):
        documents = [[[i, i + 1, i + 2] for i in range(d * 100, d * 100 + 30, 3)] for d in range(1, 9)]
        first, _ = _pairs(documents, seed=5, max_seq_length=16, short_seq_prob=0.3)
        again, _ = _pairs(documents, seed=5, max_seq_length=16, short_seq_prob=0.3)
        other, _ = _pairs(documents, seed=6, max_seq_length=16, short_seq_prob=0.3)
        self.assertEqual(first, again)
        self.assertNotEqual(first, other)


if __name__ == "__main__":
    tf.test.main()


def _greedy_segments(documents, max_seq_length):
    """A plain-Python reference of full-sentence segments: the sentences of all documents in
    order, a [SEP] after every document but the last, each unit (sentence or [SEP]) longer
    than the room cut into pieces that fit, then units taken greedily while they fit."""
    room = max_seq_length - 2
    units = []
    for index, document in enumerate(documents):
        units += [sentence for sentence in document if sentence]
        if index < len(documents) - 1:
            units.append([SEP])
    pieces = [unit[start : start + room] for unit in units for start in range(0, len(unit), room)]
    segments, current = [], []
    for piece in pieces:
        if len(current) + len(piece) > room:
            segments.append(current)
            current = []
        current = current + piece
    if current:
        segments.append(current)
    return [[CLS, *segment, SEP] for segment in segments]


class SegmentsTest(tf.test.TestCase):
    def test_segments_match_the_greedy_reference_on_random_blocks(self):
        rng = random.Random(5)
        builders = {
            length: tf.function(
                lambda documents, length=length: instances.build_segments(
                    documents, max_seq_length=length, cls_id=CLS, sep_id=SEP
                ),
                reduce_retracing=True,
            )
            for length in (5, 8, 16, 64)
        }
        for trial in range(30):
            max_seq_length = rng.choice([5, 8, 16, 64])
            documents = [
                [
                    [rng.randrange(1000, 2000) for _ in range(rng.choice([0, 1, 3, 7, 20]))]
                    for _ in range(rng.randrange(1, 5))
                ]
                for _ in range(rng.randrange(1, 6))
            ]
            out = builders[max_seq_length](tf.ragged.constant(documents, dtype=tf.int64, ragged_rank=2))
            ids, mask = out["input_ids"].numpy(), out["input_mask"].numpy()
            got = [row[: int(length)].tolist() for row, length in zip(ids, mask.sum(axis=1), strict=True)]
            self.assertEqual(got, _greedy_segments(documents, max_seq_length), f"trial {trial}")
            self.assertAllEqual(out["segment_ids"], np.zeros_like(ids))
            self.assertAllEqual(ids[mask == 0], np.zeros(int((mask == 0).sum())))
