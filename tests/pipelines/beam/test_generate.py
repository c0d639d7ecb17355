"""create_pretraining_data on Apache Beam: records in the original format, the same records
whatever the workers, the one-process generator's statistics, and outputs checked first."""

from __future__ import annotations

import collections
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.tokenization import BertTokenizer
from pipelines import corpus, generate, records
from pipelines.beam import generate as beam_generate
from pipelines.settings import GenerationConfig

ROOT = Path(__file__).resolve().parents[3]
VOCAB_FILE = str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt")
# In this process, one worker: where many processes are not what a test is about.
IN_PROCESS = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]


def _records(pattern: str) -> collections.Counter:
    return collections.Counter(
        record.numpy() for record in tf.data.TFRecordDataset(sorted(glob.glob(pattern)))
    )


def _parse(serialized, max_seq_length: int = 128) -> dict[str, np.ndarray]:
    # The feature spec of the original run_pretraining.py, which pretrain --train_files reads too.
    parsed = tf.io.parse_example(list(serialized), records.feature_spec(max_seq_length, 20))
    return {name: value.numpy() for name, value in parsed.items()}


def _statistics(
    features: dict[str, np.ndarray], documents: int, passes: int, mask_id: int
) -> dict[str, float]:
    """What the generator promises: instances per document, NSP balance, 80/10/10, lengths."""
    weights = features["masked_lm_weights"] > 0
    lengths = features["input_mask"].sum(axis=1)
    rows = np.nonzero(weights)[0]
    positions = features["masked_lm_positions"][weights]
    shown = features["input_ids"][rows, positions]
    labels = features["masked_lm_ids"][weights]
    return {
        "instances_per_document": len(lengths) / documents / passes,
        "random_next": features["next_sentence_labels"].mean(),
        "masked_share_of_tokens": weights.sum() / lengths.sum(),
        "mask_token": np.mean(shown == mask_id),
        "kept": np.mean(shown == labels),
        "mean_length": lengths.mean(),
        "full_length": np.mean(lengths == 128),
        "short": np.mean(lengths < 64),
    }


class BeamGenerateTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.directory = tempfile.mkdtemp()
        cls.corpus = corpus.write_corpus(os.path.join(cls.directory, "corpus.txt"))
        cls.tokenizer = BertTokenizer(VOCAB_FILE)
        # Ranges of 16 KB (a 0.24 MB corpus in 15 ranges) and blocks of 64 documents: the
        # file is read in parallel pieces and the random next segments come from 3 pools.
        cls.prefix = os.path.join(cls.directory, "beam", "train")
        os.makedirs(os.path.dirname(cls.prefix))
        # A finished run's shards of another count: --overwrite replaces them all.
        for index in range(7):
            Path(f"{cls.prefix}-{index:05d}-of-00007").write_bytes(b"")
        cls.summary = beam_generate.create_pretraining_data(
            cls.config(cls.prefix, overwrite=True), IN_PROCESS, range_bytes=16_000, min_documents=64
        )

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.directory, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def config(cls, output_file: str, **overrides) -> GenerationConfig:
        values = dict(
            input_file=cls.corpus,
            output_file=output_file,
            vocab_file=VOCAB_FILE,
            dupe_factor=3,
            runner="DirectRunner",
            num_output_shards=3,
        )
        values.update(overrides)
        return GenerationConfig(**values)

    def test_shards_in_the_original_format_and_the_summary(self):
        shards = sorted(glob.glob(self.prefix + "-*"))
        self.assertEqual(shards, [f"{self.prefix}-{index:05d}-of-00003" for index in range(3)])
        self.assertEqual(self.summary.output_files, shards)
        written = _records(self.prefix + "-*")
        self.assertEqual(sum(written.values()), self.summary.instances)
        features = _parse(written.elements())
        self.assertEqual(int(features["input_mask"].sum()), self.summary.tokens)
        self.assertEqual(int(features["next_sentence_labels"].sum()), self.summary.random_next)
        self.assertEqual(int(features["masked_lm_weights"].sum()), self.summary.masked_lm_predictions)
        self.assertTrue(np.all(features["input_ids"][:, 0] == self.tokenizer.cls_id))
        # What was read is what the one-process reader counts.
        one_process = generate.create_pretraining_data(
            self.config(
                os.path.join(self.directory, "one.tfrecord"), runner=None, num_output_shards=0, dupe_factor=1
            ),
            progress=False,
            tokenizer=self.tokenizer,
        )
        for name in ("files", "bytes", "lines", "documents", "single_sentence_documents"):
            self.assertEqual(getattr(self.summary, name), getattr(one_process, name), name)

    def test_two_worker_processes_write_the_same_records_from_the_command_line(self):
        prefix = os.path.join(self.directory, "two_workers", "train")
        result = subprocess.run(
            [sys.executable, "-m", "pipelines.create_pretraining_data", "--runner=DirectRunner",
             "--direct_num_workers=2", "--direct_running_mode=multi_processing",
             f"--input_file={self.corpus}", f"--output_file={prefix}", f"--vocab_file={VOCAB_FILE}",
             "--dupe_factor=3", "--num_output_shards=3"],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
            # As a user starts it: TensorFlow's logging as it comes (the program quiets it).
            env={**{k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(result.stdout, f"wrote {prefix}-?????-of-00003 (3 shards)\n")
        # Nor the workers' start-up lines: TensorFlow's native notes, Beam's notes on Google Cloud.
        for noise in (
            "cuInit",
            "oneDNN",
            "cuda",
            "apitools",
            "Logging handler created",
            "absl::InitializeLog",
        ):
            self.assertNotIn(noise, result.stderr)
        # The same run with one worker, in this process: the same records, as a multiset.
        same = os.path.join(self.directory, "same", "train")
        beam_generate.create_pretraining_data(self.config(same), IN_PROCESS)
        self.assertEqual(_records(prefix + "-*"), _records(same + "-*"))

    def test_the_one_process_generators_statistics(self):
        passes = 8
        beam_prefix = os.path.join(self.directory, "stats", "beam")
        beam_summary = beam_generate.create_pretraining_data(
            self.config(beam_prefix, dupe_factor=passes), IN_PROCESS, min_documents=64
        )
        one_file = os.path.join(self.directory, "stats", "one.tfrecord")
        one_summary = generate.create_pretraining_data(
            self.config(one_file, runner=None, num_output_shards=0, dupe_factor=passes),
            progress=False,
            tokenizer=self.tokenizer,
        )
        mask_id = self.tokenizer.vocab.index("[MASK]")
        ours = _statistics(
            _parse(_records(beam_prefix + "-*").elements()), beam_summary.documents, passes, mask_id
        )
        reference = _statistics(_parse(_records(one_file).elements()), one_summary.documents, passes, mask_id)
        tolerance = {"instances_per_document": 0.05 * reference["instances_per_document"],
                     "mean_length": 0.03 * reference["mean_length"]}  # fmt: skip
        for name, value in reference.items():
            with self.subTest(statistic=name):
                self.assertAllClose(ours[name], value, atol=tolerance.get(name, 0.02), rtol=0)
        self.assertAllClose(reference["random_next"], 0.5, atol=0.03)
        self.assertAllClose(reference["mask_token"], 0.8, atol=0.02)

    def test_another_seed_other_records(self):
        other = os.path.join(self.directory, "seed", "train")
        beam_generate.create_pretraining_data(
            self.config(other, random_seed=1, dupe_factor=1), IN_PROCESS, min_documents=64
        )
        overlap = _records(other + "-*") & _records(self.prefix + "-*")
        self.assertLess(sum(overlap.values()), 10)

    def test_existing_shards_are_kept_without_overwrite_and_checked_first(self):
        before = {path: os.path.getmtime(path) for path in glob.glob(self.prefix + "-*")}
        with self.assertRaisesRegex(UsageError, "3 shard\\(s\\) of an earlier run exist.*--overwrite"):
            beam_generate.create_pretraining_data(self.config(self.prefix), IN_PROCESS)
        self.assertEqual({path: os.path.getmtime(path) for path in glob.glob(self.prefix + "-*")}, before)
        with self.assertRaisesRegex(UsageError, "one name, the prefix"):
            beam_generate.create_pretraining_data(self.config("a,b"), IN_PROCESS)
        with self.assertRaisesRegex(UsageError, "num_output_shards applies with --runner"):
            self.config("x", runner=None).validate()


if __name__ == "__main__":
    tf.test.main()
