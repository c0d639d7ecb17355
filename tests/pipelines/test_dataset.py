"""pretraining_dataset: original-format records, dynamic masking, raw text, sharding."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from bert_tf.tokenization import BertTokenizer
from pipelines import corpus, pretraining_dataset, records, text_dataset, text_input
from pipelines.dataset import fixed_evaluation_batches

VOCAB_FILE = str(Path(__file__).resolve().parents[1] / "fixtures" / "bert_uncased_vocab.txt")
SEQ, PRED = 16, 4


def _original_example(rng: np.random.Generator, masked: bool = True) -> tuple[bytes, dict]:
    """A record built the way the original script builds it: Python protos, int64 / float lists."""
    length = int(rng.integers(6, SEQ + 1))
    input_ids = [101] + rng.integers(1000, 2000, length - 2).tolist() + [102]
    values = {
        "input_ids": input_ids + [0] * (SEQ - length),
        "input_mask": [1] * length + [0] * (SEQ - length),
        "segment_ids": [0] * 3 + [1] * (length - 3) + [0] * (SEQ - length),
    }
    if masked:
        values["masked_lm_positions"] = [1, 2, 0, 0]
        values["masked_lm_ids"] = [input_ids[1], input_ids[2], 0, 0]
        values["masked_lm_weights"] = [1.0, 1.0, 0.0, 0.0]
    values["next_sentence_labels"] = [int(rng.integers(0, 2))]

    def feature(name, value):
        if name == "masked_lm_weights":
            return tf.train.Feature(float_list=tf.train.FloatList(value=value))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=value))

    example = tf.train.Example(
        features=tf.train.Features(feature={name: feature(name, value) for name, value in values.items()})
    )
    return example.SerializeToString(), values


class PretrainingDatasetTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)

    def _write(self, name: str, count: int, masked: bool = True) -> tuple[str, list[dict]]:
        rng = np.random.default_rng(list(name.encode()))
        path = os.path.join(self.directory, name)
        rows = []
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(count):
                serialized, values = _original_example(rng, masked)
                writer.write(serialized)
                rows.append(values)
        return path, rows

    def test_reads_original_format_records_exactly(self):
        path, rows = self._write("original.tfrecord", 10)
        dataset = pretraining_dataset(
            path, batch_size=4, max_seq_length=SEQ, max_predictions_per_seq=PRED, shuffle=False, repeat=False,
            drop_remainder=False,
        )  # fmt: skip
        batches = list(dataset)
        self.assertEqual([len(b["input_ids"]) for b in batches], [4, 4, 2])
        first = batches[0]
        expected_dtypes = {name: tf.int32 for name in records.FEATURE_ORDER} | {
            "masked_lm_weights": tf.float32
        }
        self.assertEqual({k: v.dtype for k, v in first.items()}, expected_dtypes)
        self.assertEqual(first["next_sentence_labels"].shape, [4, 1])
        for name in records.FEATURE_ORDER:
            got = np.concatenate([b[name].numpy() for b in batches])
            np.testing.assert_array_equal(got, np.array([row[name] for row in rows]), err_msg=name)

    def test_length_mismatch_is_a_clear_error(self):
        path, _ = self._write("original.tfrecord", 2)
        with self.assertRaisesRegex(
            records.RecordFormatError, "input_ids has length 16 but max_seq_length is 128"
        ):
            pretraining_dataset(path, batch_size=2)
        with self.assertRaisesRegex(records.RecordFormatError, "masked_lm_positions has length 4"):
            pretraining_dataset(path, batch_size=2, max_seq_length=SEQ, max_predictions_per_seq=8)
        with self.assertRaisesRegex(ValueError, "batch_size must be >= 1"):
            pretraining_dataset(path, batch_size=0, max_seq_length=SEQ)

    def test_unmasked_records_get_new_masks_every_epoch(self):
        path, rows = self._write("plain.tfrecord", 8, masked=False)
        with self.assertRaisesRegex(ValueError, "pass vocab_file"):
            pretraining_dataset(path, batch_size=8, max_seq_length=SEQ, max_predictions_per_seq=PRED)
        dataset = pretraining_dataset(
            path, vocab_file=VOCAB_FILE, batch_size=8, max_seq_length=SEQ, max_predictions_per_seq=PRED,
            shuffle=False, seed=3,
        )  # fmt: skip
        epochs = [batch for batch, _ in zip(dataset, range(6), strict=False)]
        original = np.array([row["input_ids"] for row in rows])
        for batch in epochs:
            positions, weights = batch["masked_lm_positions"].numpy(), batch["masked_lm_weights"].numpy()
            labels = np.take_along_axis(original, positions, axis=1)
            np.testing.assert_array_equal(batch["masked_lm_ids"].numpy()[weights > 0], labels[weights > 0])
            np.testing.assert_array_equal(batch["segment_ids"], [row["segment_ids"] for row in rows])
        self.assertGreater(len({e["masked_lm_positions"].numpy().tobytes() for e in epochs}), 1)

    def test_raw_text_batches_deterministic_and_512(self):
        path = corpus.write_corpus(os.path.join(self.directory, "corpus.txt"))

        def make(**kw):
            return pretraining_dataset(
                path, vocab_file=VOCAB_FILE, batch_size=8, seed=11, shuffle_buffer_size=200, **kw
            )

        first, again = next(iter(make())), next(iter(make()))
        for name in records.FEATURE_ORDER:
            self.assertAllEqual(first[name], again[name])
        self.assertEqual(first["input_ids"].shape, [8, 128])
        self.assertEqual(first["masked_lm_weights"].dtype, tf.float32)
        long = next(iter(make(max_seq_length=512, max_predictions_per_seq=76)))
        self.assertEqual(long["input_ids"].shape, [8, 512])
        self.assertGreater(int(tf.reduce_max(tf.reduce_sum(long["input_mask"], axis=1))), 128)

    def test_input_context_shards_and_sets_the_per_replica_batch(self):
        paths = []
        for index in range(2):
            path, _ = self._write(f"shard-{index}.tfrecord", 6)
            paths.append(path)
        seen = []
        for pipeline_id in range(2):
            context = tf.distribute.InputContext(
                num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2
            )
            dataset = pretraining_dataset(
                paths, batch_size=6, max_seq_length=SEQ, max_predictions_per_seq=PRED, repeat=False, seed=1,
                input_context=context,
            )  # fmt: skip
            batches = list(dataset)
            self.assertEqual([len(b["input_ids"]) for b in batches], [3, 3])  # 6 global → 3 per replica
            seen.append({row.tobytes() for b in batches for row in b["input_ids"].numpy()})
        self.assertEmpty(seen[0] & seen[1])
        self.assertLen(seen[0] | seen[1], 12)

    def test_a_corpus_of_one_block_is_shared_by_every_input_pipeline(self):
        # 40 documents: one block at the default size, which round-robin would give to
        # pipeline 0 alone (pipeline 1 then waited for data forever).
        path = os.path.join(self.directory, "small.txt")
        documents = [f"document {d} sentence {s} of the small corpus." for d in range(40) for s in range(3)]
        Path(path).write_text("\n\n".join("\n".join(documents[i : i + 3]) for i in range(0, 120, 3)) + "\n")
        seen = []
        for pipeline_id in range(2):
            context = tf.distribute.InputContext(
                num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2
            )
            dataset = pretraining_dataset(
                path, vocab_file=VOCAB_FILE, batch_size=4, max_seq_length=32, max_predictions_per_seq=5,
                repeat=False, shuffle=False, drop_remainder=False, seed=1, input_context=context,
            )  # fmt: skip
            rows = [row for batch in dataset for row in batch["input_ids"].numpy()]
            self.assertNotEmpty(rows, f"pipeline {pipeline_id} got no data")
            seen.append({row.tobytes() for row in rows})
        self.assertEmpty(seen[0] & seen[1])

    def test_fewer_documents_than_input_pipelines_is_an_error_naming_both(self):
        path = os.path.join(self.directory, "tiny.txt")
        Path(path).write_text("only one document.\nof two lines.\n")
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2
        )
        with self.assertRaisesRegex(text_input.InputFileError, "holds 1 document.*fewer than the 2 input"):
            pretraining_dataset(
                path, vocab_file=VOCAB_FILE, batch_size=4, max_seq_length=32, max_predictions_per_seq=5,
                input_context=context,
            )  # fmt: skip

    def test_mixed_formats_are_rejected(self):
        record_path, _ = self._write("original.tfrecord", 2)
        text_path = os.path.join(self.directory, "text.txt")
        Path(text_path).write_text("one sentence.\nanother one.\n")
        with self.assertRaisesRegex(records.RecordFormatError, "mix formats"):
            pretraining_dataset(
                [record_path, text_path],
                vocab_file=VOCAB_FILE,
                batch_size=2,
                max_seq_length=SEQ,
                max_predictions_per_seq=PRED,
            )

    def test_fixed_evaluation_batches_keep_every_example_once_then_weigh_nothing(self):
        path, rows = self._write("eval.tfrecord", 7)
        dataset = pretraining_dataset(
            path, batch_size=3, max_seq_length=SEQ, max_predictions_per_seq=PRED, repeat=False,
            drop_remainder=False, shuffle=False,
        )  # fmt: skip
        batches = list(fixed_evaluation_batches(dataset, 3).take(5))
        self.assertEqual([b["input_ids"].shape.as_list() for b in batches], [[3, SEQ]] * 5)
        weights = [b["next_sentence_weights"].numpy().ravel().tolist() for b in batches]
        self.assertEqual(weights, [[1, 1, 1], [1, 1, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]])
        real = [
            row
            for b in batches
            for row, w in zip(b["input_ids"].numpy(), b["next_sentence_weights"].numpy(), strict=True)
            if w
        ]
        self.assertAllEqual(real, [r["input_ids"] for r in rows])
        for b in batches[2:]:  # padding rows: no masked-LM weight, no mask
            self.assertEqual(float(tf.reduce_sum(b["masked_lm_weights"][-2:])), 0.0)
            self.assertEqual(int(tf.reduce_sum(b["input_mask"][-2:])), 0)


class HeldOutSliceTest(tf.test.TestCase):
    def test_slices_are_disjoint_cover_the_blocks_and_every_shard_holds_some_out(self):
        path = corpus.write_corpus(os.path.join(tempfile.mkdtemp(), "corpus.txt"))
        tokenizer = BertTokenizer(VOCAB_FILE)

        def blocks(held_out, num_shards=1, shard_index=0):
            # Blocks of 4 documents: the embedded corpus makes about 50 of them.
            dataset = text_dataset.pair_blocks(
                [path], tokenizer, max_seq_length=64, seed=3, min_documents=4, held_out=held_out,
                num_shards=num_shards, shard_index=shard_index,
            )  # fmt: skip
            return {tuple(b["seed"].numpy()): b["input_ids"].numpy().tobytes() for b in dataset}

        every, only, rest = blocks(None), blocks("only"), blocks("exclude")
        self.assertGreaterEqual(len(every), 2 * text_dataset.HELD_OUT_EVERY)
        self.assertEmpty(only.keys() & rest.keys())
        self.assertEqual({**only, **rest}, every)  # a block's pairs do not depend on the slicing
        self.assertLen(only, len(every) // text_dataset.HELD_OUT_EVERY)
        # Two workers: the held-out blocks are shared out by their own number, so neither
        # worker is left without any (by block number alone, all would fall to one).
        shards = [blocks("only", 2, index) for index in range(2)]
        self.assertTrue(all(shards))
        self.assertEqual({**shards[0], **shards[1]}, only)


if __name__ == "__main__":
    tf.test.main()
