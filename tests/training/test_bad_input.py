"""Bad pretraining input: one clear message each, and nothing in model_dir overwritten."""

import contextlib
import io
import os
import re
import tempfile
from pathlib import Path
from unittest import mock

import tensorflow as tf

from bert_tf.config import load_config
from bert_tf.errors import UsageError
from bert_tf.training import distribute, inputs
from bert_tf.training.pretraining import model_config_and_vocab, run_pretraining
from bert_tf.training.settings import PretrainingConfig


def write_records(path: Path, seq_length: int, predictions: int, count: int = 4) -> str:
    """Original-format pretraining TFRecords (int64 features, zero padded)."""

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for index in range(count):
            ids = [101, 5 + index, 102] + [0] * (seq_length - 3)
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "input_ids": int_feature(ids),
                        "input_mask": int_feature([1, 1, 1] + [0] * (seq_length - 3)),
                        "segment_ids": int_feature([0] * seq_length),
                        "masked_lm_positions": int_feature([1] + [0] * (predictions - 1)),
                        "masked_lm_ids": int_feature([5 + index] + [0] * (predictions - 1)),
                        "masked_lm_weights": tf.train.Feature(
                            float_list=tf.train.FloatList(value=[1.0] + [0.0] * (predictions - 1))
                        ),
                        "next_sentence_labels": int_feature([index % 2]),
                    }
                )
            )
            writer.write(example.SerializeToString())
    return str(path)


def snapshot(directory: Path) -> dict:
    return {
        str(path.relative_to(directory)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in directory.rglob("*")
        if path.is_file()
    }


class BadInputTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.work = Path(tempfile.mkdtemp(prefix="bert_tf_bad_input_"))
        self.model_dir = self.work / "model"
        self.model_dir.mkdir()
        # An earlier run's model_dir: its config, a checkpoint, and a log.
        self.config = load_config("bert_tiny").replace(vocab_size=200)
        self.config.to_json_file(self.model_dir / "bert_config.json")
        tf.train.Checkpoint(step=tf.Variable(7)).write(str(self.model_dir / "ckpt-7"))
        (self.model_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-7"\n')
        self.config_file = self.work / "bert_config.json"
        self.config.to_json_file(self.config_file)
        self.records = write_records(self.work / "train.tfrecord", seq_length=32, predictions=5)
        self.before = snapshot(self.model_dir)

    def run_and_expect(self, message: str, **changes):
        settings = dict(
            model_dir=str(self.model_dir),
            config=str(self.config_file),
            train_files=self.records,
            max_seq_length=32,
            max_predictions_per_seq=5,
            train_batch_size=4,
            num_train_steps=10,
            num_warmup_steps=1,
        )
        settings.update(changes)
        with self.assertRaisesRegex(ValueError, message) as raised:
            run_pretraining(PretrainingConfig(**settings))
        self.assertEqual(snapshot(self.model_dir), self.before, "model_dir was modified")
        return raised.exception

    def test_glob_matching_nothing(self):
        missing = os.path.join(self.work, "nothing_*.tfrecord")
        self.run_and_expect(re.escape(f"--train_files={missing} matches no file"), train_files=missing)

    def test_sequence_length_disagrees_with_records(self):
        self.run_and_expect(
            "holds sequences of length 32, but --max_seq_length=64; pass --max_seq_length=32",
            max_seq_length=64,
            packing=False,  # packed, shorter records fill longer rows
        )

    def test_predictions_disagree_with_records(self):
        self.run_and_expect(
            "holds 5 masked positions per sequence, but --max_predictions_per_seq=20",
            max_predictions_per_seq=20,
        )

    def test_model_dir_of_another_config(self):
        other = self.work / "other.json"
        self.config.replace(hidden_size=256, num_attention_heads=4).to_json_file(other)
        self.run_and_expect(
            r"holds a run of another config \(hidden_size 128 there vs 256 now, num_attention_heads 2 there vs 4 now\)",
            config=str(other),
        )

    def test_vocab_of_another_size(self):
        vocab = self.work / "vocab.txt"
        vocab.write_text(
            "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(45)]) + "\n"
        )
        # From scratch the vocab decides the size, so this model_dir (200) is another config's run.
        self.run_and_expect(
            r"holds a run of another config \(vocab_size 200 there vs 50 now\)", vocab_file=str(vocab)
        )
        # Starting from a checkpoint, the config must be the checkpoint's: still an error.
        self.run_and_expect(
            r"vocab .*vocab.txt has 50 tokens but the config's vocab_size is 200",
            vocab_file=str(vocab),
            init_checkpoint=str(self.work),
        )

    def test_unreadable_checkpoint_state_is_an_error_not_a_fresh_start(self):
        (self.model_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-7\n')
        self.before = snapshot(self.model_dir)
        self.run_and_expect("checkpoint is truncated or corrupt")

    def test_a_damaged_checkpoint_of_the_run_itself_says_how_to_resume_from_an_earlier_one(self):
        data = self.model_dir / "ckpt-7.data-00000-of-00001"
        data.write_bytes(data.read_bytes()[:2])
        self.before = snapshot(self.model_dir)
        error = self.run_and_expect(
            r"ckpt-7.data-00000-of-00001 is truncated or corrupt \(expected at least \d+ bytes, found 2\); "
            f"delete {re.escape(str(self.model_dir / 'ckpt-7'))}\\.\\* and edit or delete "
            f"{re.escape(str(self.model_dir / 'checkpoint'))} to resume from an earlier checkpoint, "
            "or use a new --model_dir$"
        )
        self.assertNotIn("download", str(error))

    def test_damaged_records_are_named_before_training(self):
        size = os.path.getsize(self.records)
        with open(self.records, "r+b") as file:
            file.truncate(size - 10)
        self.run_and_expect(r"train.tfrecord is truncated or corrupt \(record 4 at byte")

    def test_batch_not_divisible_by_replicas(self):
        three_replicas = mock.Mock(spec=tf.distribute.Strategy, num_replicas_in_sync=3)
        with mock.patch.object(distribute, "get_strategy", return_value=three_replicas):
            self.run_and_expect("--train_batch_size=4 is not divisible by the 3 replicas", train_batch_size=4)

    def test_unknown_filesystem_scheme(self):
        self.run_and_expect(
            r"--model_dir=bogus://bucket/model: TensorFlow has no filesystem for the scheme 'bogus://'.*gs://",
            model_dir="bogus://bucket/model",
        )
        self.run_and_expect(
            r"--train_files=bogus://bucket/\*.tfrecord: TensorFlow has no filesystem for the scheme 'bogus://'",
            train_files="bogus://bucket/*.tfrecord",
        )

    def test_unwritable_model_dir(self):
        # Root may write anywhere on a local disk; a path under a regular file cannot be a directory.
        below_a_file = os.path.join(self.records, "model")
        self.run_and_expect(
            f"--model_dir={re.escape(below_a_file)} is under {re.escape(str(self.records))}, which is a file, not a "
            "folder; choose another path",
            model_dir=below_a_file,
        )

    def test_eval_every_steps_without_eval_data_on_a_corpus_too_small_to_hold_some_out(self):
        self.run_and_expect(
            r"too small to hold some out: its files hold 4 record\(s\) at most, and it needs a file of at "
            r"least 20 records.*pass --eval_files",
            eval_every_steps=5,
        )

    def test_lengths_above_the_position_embeddings_are_usage_errors(self):
        for changes, message in (
            (
                dict(max_seq_length=1024, max_predictions_per_seq=5),
                "--max_seq_length=1024 is above the config's max_position_embeddings=512; "
                "pass --max_seq_length=512 or less",
            ),
            (
                dict(phase2_seq_length=1024, phase2_fraction=0.1),
                "--phase2_seq_length=1024 is above the config's max_position_embeddings=512; "
                "pass --phase2_seq_length=512 or less",
            ),
        ):
            with self.subTest(changes=changes):
                error = self.run_and_expect(message, **changes)
                self.assertIsInstance(error, UsageError)  # exit status 2: the command line

    def test_init_checkpoint_gives_its_config_unless_another_is_named(self):
        from bert_tf.checkpoints import export_pretrained
        from bert_tf.models import BertPretrainer

        theirs = self.config.replace(hidden_size=64, intermediate_size=128)
        vocab = self.work / "their_vocab.txt"
        vocab.write_text(
            "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(195)])
        )
        export = export_pretrained(BertPretrainer(theirs), str(self.work / "export"), vocab_file=str(vocab))
        # Another --config: refused, naming the checkpoint's own.
        self.run_and_expect(
            r"--init_checkpoint=.*export was trained with another config \(hidden_size 64 there, 128 here, "
            r"intermediate_size 128 there, 512 here\); pass --config=.*export/bert_config.json \(and its vocab\), "
            "or leave --config out to use the checkpoint's own",
            init_checkpoint=export,
            vocab_file=str(vocab),
        )
        # No --config: the checkpoint's config and vocab, said in one line.
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            config, vocab_file, settings = model_config_and_vocab(PretrainingConfig(init_checkpoint=export))
        self.assertEqual((config, vocab_file), (theirs, os.path.join(export, "vocab.txt")))
        self.assertEqual(
            printed.getvalue().splitlines()[-1],
            f"using the config and vocab of --init_checkpoint={export} (no --config given)",
        )
        # Its casing (its vocab has no upper-case token) and its heads (both) decide the defaults.
        self.assertIn("--init_checkpoint is uncased", printed.getvalue())
        self.assertEqual(
            (settings.do_lower_case, settings.next_sentence_prediction, settings.packing), (True,) * 3
        )
        with contextlib.redirect_stdout(io.StringIO()):
            config, vocab_file, _ = model_config_and_vocab(
                PretrainingConfig(init_checkpoint=export, vocab_file=str(vocab))
            )
        self.assertEqual((config, vocab_file), (theirs, str(vocab)))
        # Without --init_checkpoint the default is the demo config.
        self.assertEqual(model_config_and_vocab(PretrainingConfig())[:2], (load_config("demo"), None))

    def test_errors_are_input_errors(self):
        self.assertTrue(issubclass(inputs.InputError, ValueError))
