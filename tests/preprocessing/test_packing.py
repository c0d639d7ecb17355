"""Packing: first-fit decreasing against a plain Python transcription; every instance of an
epoch kept exactly once, never split, within every budget; the fill rate of the embedded
corpus; records shorter than the rows; the errors of input that cannot be packed."""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from bert_tf.preprocessing import packing
from pipelines import corpus, pretraining_dataset, records
from tests.harness import unpack_sequences

VOCAB_FILE = str(Path(__file__).resolve().parents[1] / "fixtures" / "bert_uncased_vocab.txt")


def python_first_fit_decreasing(lengths, predictions, seq, budget, slots):
    """The textbook algorithm, one instance at a time: (row, slot, token offset, prediction offset)."""
    rows: list[list[int]] = []  # [tokens, predictions, instances] per row
    placement = [None] * len(lengths)
    for item in sorted(range(len(lengths)), key=lambda i: -lengths[i]):  # stable: ties keep their order
        fitting = (
            index
            for index, row in enumerate(rows)
            if row[0] + lengths[item] <= seq and row[1] + predictions[item] <= budget and row[2] < slots
        )
        index = next(fitting, len(rows))
        if index == len(rows):
            rows.append([0, 0, 0])
        row = rows[index]
        placement[item] = (index, row[2], row[0], row[1])
        row[0] += lengths[item]
        row[1] += predictions[item]
        row[2] += 1
    return placement, len(rows)


def instances_of_rows(batches) -> list[tuple]:
    """Every instance of unpacked batches: (ids, segments, predictions, label)."""
    found = []
    for batch in batches:
        batch = {name: value.numpy() for name, value in batch.items()}
        for row in range(len(batch["input_ids"])):
            length = int((batch["input_mask"][row] > 0).sum())
            real = batch["masked_lm_weights"][row] > 0
            predictions = sorted(
                zip(
                    batch["masked_lm_positions"][row][real].tolist(),
                    batch["masked_lm_ids"][row][real].tolist(),
                    strict=True,
                )
            )
            found.append(
                (
                    tuple(batch["input_ids"][row, :length].tolist()),
                    tuple(batch["segment_ids"][row, :length].tolist()),
                    tuple(predictions),
                    int(batch["next_sentence_labels"][row, 0]),
                )
            )
    return found


def instances_of_packed_rows(
    test: tf.test.TestCase, batches, seq, budget, slots
) -> tuple[list[tuple], float]:
    """Unpacks packed batches, checking the layout on the way; returns the instances and the fill."""
    found, real_tokens, positions = [], 0, 0
    for batch in batches:
        batch = {name: value.numpy() for name, value in batch.items()}
        test.assertEqual(batch["input_ids"].shape[1], seq)
        test.assertEqual(batch["masked_lm_positions"].shape[1], budget)
        test.assertEqual(batch["next_sentence_labels"].shape[1], slots)
        for row in range(len(batch["input_ids"])):
            mask = batch["input_mask"][row]
            count = int(mask.max())
            test.assertBetween(count, 1, slots)
            # Instances 1..count one after the other, then padding: nothing split or interleaved.
            test.assertAllEqual(mask[mask > 0], np.sort(mask[mask > 0]))
            test.assertAllEqual(mask[: (mask > 0).sum()] > 0, np.ones((mask > 0).sum(), bool))
            test.assertAllEqual(batch["next_sentence_weights"][row], np.arange(slots) < count)
            real = batch["masked_lm_weights"][row] > 0
            claimed = 0
            for number in range(1, count + 1):
                where = np.nonzero(mask == number)[0]
                start, length = int(where[0]), len(where)
                test.assertEqual(int(batch["next_sentence_positions"][row, number - 1]), start)
                inside = real & (batch["masked_lm_positions"][row] >= start)
                inside &= batch["masked_lm_positions"][row] < start + length
                claimed += int(inside.sum())
                predictions = sorted(
                    zip(
                        (batch["masked_lm_positions"][row][inside] - start).tolist(),
                        batch["masked_lm_ids"][row][inside].tolist(),
                        strict=True,
                    )
                )
                found.append(
                    (
                        tuple(batch["input_ids"][row, start : start + length].tolist()),
                        tuple(batch["segment_ids"][row, start : start + length].tolist()),
                        tuple(predictions),
                        int(batch["next_sentence_labels"][row, number - 1]),
                    )
                )
            test.assertEqual(claimed, int(real.sum()))  # every prediction belongs to an instance
            real_tokens += int((mask > 0).sum())
            positions += seq
    return found, real_tokens / positions


class FirstFitDecreasingTest(tf.test.TestCase):
    def test_matches_the_python_transcription(self):
        rng = np.random.default_rng(0)
        for _ in range(20):
            count = int(rng.integers(1, 60))
            lengths = rng.integers(3, 33, count)
            predictions = np.minimum(rng.integers(0, 6, count), lengths)
            placement = packing.first_fit_decreasing(
                tf.constant(lengths), tf.constant(predictions), max_seq_length=32,
                max_predictions_per_row=8, max_instances_per_row=3,
            )  # fmt: skip
            expected, num_rows = python_first_fit_decreasing(lengths.tolist(), predictions.tolist(), 32, 8, 3)
            got = np.stack(
                [placement[name] for name in ("row", "slot", "token_offset", "prediction_offset")], axis=1
            )
            self.assertAllEqual(got, np.array(expected))
            self.assertEqual(int(placement["num_rows"]), num_rows)


class PackSequencesTest(tf.test.TestCase):
    def test_every_example_is_kept_whole_in_order_within_the_rows(self):
        rng = np.random.default_rng(1)
        for _ in range(20):
            count, seq = int(rng.integers(1, 40)), int(rng.choice([8, 16, 32]))
            lengths = rng.integers(2, seq + 1, count)
            width = int(rng.integers(lengths.max(), seq + 1))  # dynamic padding: any width up to seq
            ids = np.zeros((count, width), "int32")
            segments = np.zeros((count, width), "int32")
            for row, length in enumerate(lengths):
                ids[row, :length] = rng.integers(1, 1000, length)
                segments[row, rng.integers(1, length + 1) : length] = 1
            mask = (np.arange(width) < lengths[:, None]).astype("int32")
            rows = packing.pack_sequences(
                {
                    "input_ids": tf.constant(ids),
                    "input_mask": tf.constant(mask),
                    "segment_ids": tf.constant(segments),
                },
                row_length=seq,
            )
            rows = {name: value.numpy() for name, value in rows.items()}
            self.assertEqual(rows["input_ids"].shape[1], seq)
            expected = [(ids[i, :n].tolist(), segments[i, :n].tolist()) for i, n in enumerate(lengths)]
            self.assertEqual(unpack_sequences(rows), expected)
            # No token outside an instance; rows no more than first-fit decreasing needs.
            self.assertEqual(int((rows["input_mask"] > 0).sum()), int(lengths.sum()))
            _, num_rows = python_first_fit_decreasing(lengths.tolist(), [0] * count, seq, 0, seq)
            self.assertEqual(len(rows["input_ids"]), num_rows)


class PackedDatasetTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)

    def test_an_epoch_of_the_embedded_corpus_keeps_every_instance_once(self):
        path = corpus.write_corpus(os.path.join(self.directory, "corpus.txt"))
        settings = dict(vocab_file=VOCAB_FILE, batch_size=32, seed=5, repeat=False, drop_remainder=False)
        unpacked = instances_of_rows(pretraining_dataset(path, **settings))
        unpacked_fill = np.mean([sum(len(i[0]) for i in unpacked) / (len(unpacked) * 128)])
        budget = packing.default_max_predictions_per_row(20, 4)
        packed_batches = pretraining_dataset(path, packing=True, max_instances_per_row=4, **settings)
        packed, packed_fill = instances_of_packed_rows(self, packed_batches, 128, budget, 4)
        self.assertGreater(len(unpacked), 500)
        self.assertEqual(collections.Counter(packed), collections.Counter(unpacked))
        print(
            f"embedded corpus at 128: {len(unpacked)} instances; fill {unpacked_fill:.1%} unpacked, "
            f"{packed_fill:.1%} packed ({budget} predictions, 4 instances per row)"
        )
        self.assertGreater(packed_fill, unpacked_fill + 0.1)
        self.assertGreater(packed_fill, 0.9)

    def _write_records(self, seq, predictions, masked=True):
        """Records written by our generator at `seq` (masked or for dynamic masking)."""
        from pipelines.generate import GenerationConfig, create_pretraining_data

        text = corpus.write_corpus(os.path.join(self.directory, "corpus.txt"))
        output = os.path.join(self.directory, f"records_{seq}_{masked}.tfrecord")
        create_pretraining_data(
            GenerationConfig(
                input_file=text, output_file=output, vocab_file=VOCAB_FILE, max_seq_length=seq,
                max_predictions_per_seq=predictions, dupe_factor=1, dynamic_masking=not masked,
            )
        )  # fmt: skip
        return output

    def test_masked_records_pack_into_longer_rows_exactly(self):
        path = self._write_records(64, 10)
        settings = dict(batch_size=16, max_predictions_per_seq=10, seed=1, repeat=False, drop_remainder=False)
        unpacked = instances_of_rows(pretraining_dataset(path, max_seq_length=64, **settings))
        rows = pretraining_dataset(
            path, max_seq_length=128, packing=True, max_predictions_per_row=30, **settings
        )
        packed, _ = instances_of_packed_rows(self, rows, 128, 30, packing.DEFAULT_MAX_INSTANCES_PER_ROW)
        self.assertEqual(collections.Counter(packed), collections.Counter(unpacked))

    def test_unmasked_records_are_masked_per_instance_then_packed(self):
        path = self._write_records(64, 10, masked=False)
        settings = dict(vocab_file=VOCAB_FILE, batch_size=16, max_seq_length=64, max_predictions_per_seq=10)
        tokens = collections.Counter(i[0] for i in instances_of_rows(
            pretraining_dataset(path, seed=1, repeat=False, drop_remainder=False, **settings)
        ))  # fmt: skip
        budget = packing.default_max_predictions_per_row(10, 8)
        rows = pretraining_dataset(path, packing=True, seed=2, repeat=False, drop_remainder=False, **settings)
        packed, _ = instances_of_packed_rows(self, rows, 64, budget, 8)
        # The masked tokens differ from epoch to epoch; the instances and their labels do not.
        for ids, _, predictions, _ in packed:
            self.assertBetween(len(predictions), 1, 10)
            self.assertTrue(all(0 < position < len(ids) - 1 for position, _ in predictions))
        self.assertEqual(sum(tokens.values()), len(packed))

    def test_input_that_cannot_be_packed_says_what_to_do(self):
        path = self._write_records(64, 10)
        with self.assertRaisesRegex(
            records.RecordFormatError,
            "sequences of 64 tokens, which cannot be packed into rows of max_seq_length=32.*"
            "regenerate the records with --max_seq_length=32 or less",
        ):
            pretraining_dataset(
                path, batch_size=4, max_seq_length=32, max_predictions_per_seq=10, packing=True
            )
        with self.assertRaisesRegex(
            ValueError, "max_predictions_per_row=6 is too small.*pass max_predictions_per_row=10"
        ):
            pretraining_dataset(
                path, batch_size=4, max_seq_length=64, max_predictions_per_seq=10, packing=True,
                max_predictions_per_row=6,
            )  # fmt: skip
