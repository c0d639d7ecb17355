"""The offline generator: output files, determinism, and bad input."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.tokenization import BertTokenizer
from pipelines import corpus, generate, records, text_input

ROOT = Path(__file__).resolve().parents[2]
VOCAB_FILE = str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt")


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read(path: str, max_seq_length: int = 128, masked: bool = True) -> dict[str, np.ndarray]:
    spec = records.feature_spec(max_seq_length, 20, masked=masked)
    rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]
    return {name: np.stack([row[name].numpy() for row in rows]) for name in spec}


def _read_spec(path: str, spec: dict) -> dict[str, np.ndarray]:
    rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]
    return {name: np.stack([row[name].numpy() for row in rows]) for name in spec}


class GenerateTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = BertTokenizer(VOCAB_FILE)

    def _run(self, **overrides) -> generate.Summary:
        return generate.create_pretraining_data(
            self._config(**overrides), progress=False, tokenizer=self.tokenizer
        )

    def setUp(self):
        super().setUp()
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)
        # A quarter of the embedded corpus keeps each generation to about a second.
        documents = list(corpus.documents())[:60]
        self.corpus = os.path.join(self.directory, "corpus.txt")
        Path(self.corpus).write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")

    def _config(self, **overrides) -> generate.GenerationConfig:
        values = dict(
            input_file=self.corpus,
            output_file=os.path.join(self.directory, "out.tfrecord"),
            vocab_file=VOCAB_FILE,
            dupe_factor=1,
        )
        values.update(overrides)
        return generate.GenerationConfig(**values)

    def test_masked_lm_only_records_have_no_nsp_labels_and_train_only_as_such(self):
        from pipelines.dataset import pretraining_dataset

        mlm_only = os.path.join(self.directory, "mlm_only.tfrecord")
        summary = self._run(output_file=mlm_only, next_sentence_prediction=False, masked_lm_prob=0.3)
        lengths = records.peek_format(mlm_only)
        self.assertNotIn("next_sentence_labels", lengths)
        self.assertEqual(lengths["masked_lm_positions"], 39)  # follows the rate: ceil(128 x 0.3)
        data = _read_spec(mlm_only, records.feature_spec(128, 39, next_sentence_prediction=False))
        self.assertAllEqual(data["segment_ids"], np.zeros_like(data["segment_ids"]))
        # Full-length segments of whole sentences: each ends where the next sentence would not fit
        # (measured 89% here; the same corpus' pairs fill their rows less, below).
        mlm_only_fill = data["input_mask"].sum() / data["input_mask"].size
        self.assertGreater(mlm_only_fill, 0.85)
        self.assertEqual(summary.random_next, 0)
        # 30% of each segment is predicted (Python's round, capped at 39).
        self.assertAllEqual(
            data["masked_lm_weights"].sum(axis=1),
            np.minimum(39, np.round(data["input_mask"].sum(axis=1) * 0.3)),
        )
        batch = next(
            iter(
                pretraining_dataset(
                    mlm_only, batch_size=4, max_predictions_per_seq=39, next_sentence_prediction=False, seed=1
                )
            )
        )
        self.assertAllEqual(batch["next_sentence_weights"], np.zeros([4, 1]))  # the loss leaves NSP out
        with self.assertRaisesRegex(records.RecordFormatError, "records hold masked-LM-only segments"):
            pretraining_dataset(mlm_only, batch_size=4, max_predictions_per_seq=39)
        pairs = os.path.join(self.directory, "pairs.tfrecord")
        self._run(output_file=pairs)
        pairs_mask = _read(pairs)["input_mask"]
        self.assertLess(pairs_mask.sum() / pairs_mask.size, mlm_only_fill)  # measured 81%
        with self.assertRaisesRegex(records.RecordFormatError, "records hold next-sentence pairs"):
            pretraining_dataset(pairs, batch_size=4, next_sentence_prediction=False)

    def test_shards_round_robin_deterministic_and_readable(self):
        outputs = [os.path.join(self.directory, f"shard-{i}.tfrecord") for i in range(3)]
        summary = self._run(output_file=",".join(outputs))
        counts = [sum(1 for _ in tf.data.TFRecordDataset(path)) for path in outputs]
        self.assertEqual(sum(counts), summary.instances)
        self.assertLessEqual(max(counts) - min(counts), 1)  # round-robin
        self.assertFalse([name for name in os.listdir(self.directory) if "partial" in name])  # none left
        data = _read(outputs[0])
        self.assertEqual(data["input_ids"].shape[1], 128)
        self.assertEqual(summary.tokens, sum(_read(p)["input_mask"].sum() for p in outputs))

        digests = [_digest(p) for p in outputs]
        self._run(output_file=",".join(outputs), overwrite=True)
        self.assertEqual([_digest(p) for p in outputs], digests)
        self._run(output_file=",".join(outputs), random_seed=1, overwrite=True)
        self.assertNotEqual([_digest(p) for p in outputs], digests)

    def test_existing_output_is_kept_without_overwrite(self):
        outputs = [os.path.join(self.directory, f"shard-{i}.tfrecord") for i in range(2)]
        Path(outputs[1]).write_bytes(b"the user's file")
        with self.assertRaisesRegex(
            UsageError,
            f"--output_file={re.escape(outputs[1])} already exists; pass --overwrite to replace it",
        ):
            self._run(output_file=",".join(outputs))
        self.assertEqual(Path(outputs[1]).read_bytes(), b"the user's file")
        self.assertEqual(sorted(os.listdir(self.directory)), ["corpus.txt", "shard-1.tfrecord"])
        self._run(output_file=",".join(outputs), overwrite=True)
        self.assertGreater(records.check_framing(outputs[1]), 0)

    def test_dynamic_masking_records_are_the_same_pairs_unmasked(self):
        masked_path = os.path.join(self.directory, "masked.tfrecord")
        plain_path = os.path.join(self.directory, "plain.tfrecord")
        self._run(output_file=masked_path, dupe_factor=1)
        self._run(output_file=plain_path, dupe_factor=1, dynamic_masking=True)
        self.assertEqual(
            set(records.peek_format(plain_path)),
            {"input_ids", "input_mask", "segment_ids", "next_sentence_labels"},
        )
        masked, plain = _read(masked_path), _read(plain_path, masked=False)
        np.testing.assert_array_equal(masked["segment_ids"], plain["segment_ids"])
        rows = np.arange(len(plain["input_ids"]))[:, None]
        weights = masked["masked_lm_weights"] > 0
        np.testing.assert_array_equal(
            masked["masked_lm_ids"][weights], plain["input_ids"][rows, masked["masked_lm_positions"]][weights]
        )
        # --do_whole_word_mask: the same pairs, other masks.
        whole = os.path.join(self.directory, "whole.tfrecord")
        self._run(output_file=whole, dupe_factor=1, do_whole_word_mask=True)
        whole_word = _read(whole)
        np.testing.assert_array_equal(whole_word["segment_ids"], plain["segment_ids"])
        self.assertFalse(np.array_equal(whole_word["masked_lm_positions"], masked["masked_lm_positions"]))

    def test_missing_input_is_a_clear_error(self):
        missing = os.path.join(self.directory, "nope", "*.txt")
        with self.assertRaisesRegex(text_input.InputFileError, "--input_file=.*nope.* matches no file"):
            self._run(input_file=missing)

    def test_bad_flags_are_clear_errors(self):
        with self.assertRaisesRegex(ValueError, "max_seq_length must be >= 5"):
            self._config(max_seq_length=4).validate()
        with self.assertRaisesRegex(ValueError, "masked_lm_prob"):
            self._config(masked_lm_prob=1.5).validate()

    def test_empty_files_and_no_pairs(self):
        empty = os.path.join(self.directory, "empty.txt")
        Path(empty).write_bytes(b"")
        summary = self._run(input_file=f"{self.corpus},{empty}")
        self.assertEqual(summary.empty_files, [empty])
        self.assertIn("empty input files", "\n".join(summary.lines_of_text()))
        output = os.path.join(self.directory, "none.tfrecord")
        one_liners = os.path.join(self.directory, "one_liners.txt")
        Path(one_liners).write_text("only one sentence.\n\nanother lonely one.\n")
        for path in (empty, one_liners):
            with self.assertRaisesRegex(ValueError, "no training pair could be made"):
                self._run(input_file=path, output_file=output)
            self.assertFalse(os.path.exists(output))
            self.assertEqual(glob.glob(output + "*"), [])

    def test_one_document_corpus_warns(self):
        single = os.path.join(self.directory, "single.txt")
        Path(single).write_text("".join(f"sentence number {i} is here.\n" for i in range(40)))
        with self.assertLogs(level="WARNING") as logs:
            summary = self._run(input_file=single)
        self.assertGreater(summary.instances, 0)
        self.assertIn("single document", "\n".join(logs.output))

    def test_invalid_utf8_long_lines_and_lines_that_tokenize_to_nothing(self):
        messy = os.path.join(self.directory, "messy.txt")
        long_line = b"word " * (text_input.DEFAULT_MAX_LINE_BYTES // 5 + 1000)
        Path(messy).write_bytes(
            b"the caf\xff\xfe is open.\nit sells tea.\n\x00\x01\x02\n\xe2\x80\x8b\n"
            + long_line
            + b"\nthe end of the story.\n\nsecond document here.\nand its second line.\n"
        )
        # One line of eight not UTF-8 is refused (test_text_input); accepted, it is counted.
        summary = self._run(input_file=messy, dupe_factor=1, accept_non_text=True)
        self.assertEqual(summary.invalid_utf8_lines, 1)
        self.assertEqual(summary.long_lines_cut, 1)
        self.assertEqual(summary.empty_sentences, 2)  # "\x00\x01\x02" and a zero-width space
        self.assertEqual(summary.documents, 2)
        text = "\n".join(summary.lines_of_text())
        self.assertIn("invalid UTF-8", text)
        self.assertIn("tokenize to nothing", text)
        data = _read(os.path.join(self.directory, "out.tfrecord"))
        self.assertTrue(np.all(data["input_mask"].sum(axis=1) <= 128))

    def test_output_directory_is_created_and_interrupted_runs_leave_no_file(self):
        nested = os.path.join(self.directory, "new", "dir", "out.tfrecord")
        self._run(output_file=nested, dupe_factor=1)
        self.assertTrue(os.path.exists(nested))

        target = os.path.join(self.directory, "interrupted.tfrecord")
        real_writer = tf.io.TFRecordWriter

        class FailingWriter(real_writer):
            def write(self, record):
                raise KeyboardInterrupt

        with mock.patch.object(tf.io, "TFRecordWriter", FailingWriter), self.assertRaises(KeyboardInterrupt):
            self._run(output_file=target, dupe_factor=1)
        self.assertEqual(glob.glob(target + "*"), [])

    def test_command_line(self):
        output = os.path.join(self.directory, "cli.tfrecord")
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipelines.create_pretraining_data",
                f"--input_file={self.corpus}",
                f"--output_file={output}",
                f"--vocab_file={VOCAB_FILE}",
                "--dupe_factor=1",
                "--max_seq_length=64",
                "--max_predictions_per_seq=10",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
            timeout=300,
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertIn("wrote", result.stderr)  # the summary, with the progress
        # The output named first (on stderr) and last (on stdout: the result, alone there).
        self.assertEqual(result.stderr.splitlines()[0], f"output_file: {os.path.abspath(output)}")
        self.assertEqual(result.stdout, f"wrote {os.path.abspath(output)}\n")
        self.assertEqual(records.peek_format(output)["input_ids"], 64)
        self.assertEqual(records.peek_format(output)["masked_lm_positions"], 10)


if __name__ == "__main__":
    tf.test.main()
