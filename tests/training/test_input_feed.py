"""InputFeed: a restored input position gives exactly the batches that followed it, for raw
text and for TFRecords, reading a bounded amount of text whatever the step."""

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from bert_tf.training.input_feed import InputFeed
from pipelines import corpus, pretraining_dataset, text_input
from pipelines.generate import GenerationConfig, create_pretraining_data

VOCAB_FILE = str(Path(__file__).resolve().parents[1] / "fixtures" / "bert_uncased_vocab.txt")
SEQ, PRED, BATCH = 32, 5, 8


class InputFeedTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="bert_tf_input_feed_")
        cls.text = corpus.write_corpus(f"{cls.work}/corpus.txt")
        cls.records = f"{cls.work}/data.tfrecord"
        create_pretraining_data(
            GenerationConfig(
                input_file=cls.text,
                output_file=cls.records,
                vocab_file=VOCAB_FILE,
                max_seq_length=SEQ,
                max_predictions_per_seq=PRED,
                dupe_factor=1,
            ),
            progress=False,
        )

    def _dataset_fn(self, files):
        def dataset_fn(context):
            return pretraining_dataset(
                files,
                vocab_file=VOCAB_FILE,
                batch_size=BATCH,
                max_seq_length=SEQ,
                max_predictions_per_seq=PRED,
                seed=5,
                input_context=context,
                shuffle_buffer_size=200,
            )

        return dataset_fn

    def _check_restore(self, files, step: int) -> str:
        strategy = tf.distribute.get_strategy()
        model_dir = tempfile.mkdtemp(dir=self.work)
        feed = InputFeed(strategy, self._dataset_fn(files), model_dir, phase_index=0)
        feed.start(0, 0)
        for _ in range(step):
            next(feed.iterator)
        feed.save(step)
        expected = [next(feed.iterator) for _ in range(3)]
        resumed = InputFeed(strategy, self._dataset_fn(files), model_dir, phase_index=0)
        how = resumed.start(step, step)
        actual = [next(resumed.iterator) for _ in range(3)]
        for want, got in zip(expected, actual, strict=True):
            for name in want:
                self.assertAllEqual(got[name], want[name], msg=f"{name} after step {step}")
        return how

    def test_text_resumes_exactly_and_reads_a_bounded_amount(self):
        blocks_read = {}
        original = text_input.read_block

        def counting(*args, **kwargs):
            counting.calls += 1
            return original(*args, **kwargs)

        text_input.read_block = counting
        try:
            for step in (2, 60):  # 60 steps of 8: past the first pass over the corpus
                counting.calls = 0
                self.assertEqual(self._check_restore([self.text], step), "restored")
                blocks_read[step] = counting.calls
        finally:
            text_input.read_block = original
        # The shuffle buffer is refilled from the restored position: a few blocks, not the
        # blocks before the step.
        self.assertLessEqual(blocks_read[60], blocks_read[2] + 2)

    def test_records_resume_exactly(self):
        for step in (2, 60):
            self.assertEqual(self._check_restore([self.records], step), "restored")

    def test_without_a_saved_position_the_consumed_batches_are_skipped(self):
        strategy = tf.distribute.get_strategy()
        model_dir = tempfile.mkdtemp(dir=self.work)
        feed = InputFeed(strategy, self._dataset_fn([self.records]), model_dir, phase_index=0)
        feed.start(0, 0)
        batches = [next(feed.iterator) for _ in range(6)]
        skipped = InputFeed(strategy, self._dataset_fn([self.records]), model_dir, phase_index=0)
        self.assertEqual(skipped.start(4, 4), "skipped")
        self.assertAllEqual(next(skipped.iterator)["input_ids"], batches[4]["input_ids"])

    def test_old_positions_are_pruned(self):
        strategy = tf.distribute.get_strategy()
        model_dir = tempfile.mkdtemp(dir=self.work)
        feed = InputFeed(strategy, self._dataset_fn([self.records]), model_dir, phase_index=0, max_to_keep=2)
        feed.start(0, 0)
        for step in (1, 2, 3):
            next(feed.iterator)
            feed.save(step)
        kept = sorted(p.name for p in Path(feed.state_dir).glob("*.index"))
        self.assertEqual(kept, ["phase0-2.index", "phase0-3.index"])
        self.assertTrue(np.all([p.stat().st_size > 0 for p in Path(feed.state_dir).iterdir()]))
