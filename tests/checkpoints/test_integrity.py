"""Damaged weights files are named, at every point they can be cut; whole files pass."""

from __future__ import annotations

import os
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import export_pretrained, from_pretrained, integrity
from bert_tf.config import BertConfig
from bert_tf.errors import BertTfError, DamagedFileError
from bert_tf.models import BertPretrainer
from pipelines import records

CONFIG = BertConfig(
    vocab_size=12, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
    max_position_embeddings=16,
)  # fmt: skip
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e", "f", "g"]
CUTS = (0.0, 0.003, 0.1, 0.5, 0.9, 0.999)


class IntegrityTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp()
        cls.vocab_file = os.path.join(cls.root, "vocab.txt")
        with open(cls.vocab_file, "w", encoding="utf-8") as file:
            file.write("\n".join(VOCAB) + "\n")
        cls.model = BertPretrainer(CONFIG)
        cls.checkpoint = export_pretrained(
            cls.model, os.path.join(cls.root, "ckpt"), vocab_file=cls.vocab_file, lower_case=True
        )

    def damaged_copy(self, name: str, keep: float, drop: tuple[str, ...] = ()) -> str:
        target = os.path.join(tempfile.mkdtemp(), "ckpt")
        shutil.copytree(self.checkpoint, target)
        for other in drop:
            os.remove(os.path.join(target, other))
        path = os.path.join(target, name)
        with open(path, "r+b") as file:
            file.truncate(int(os.path.getsize(path) * keep))
        return target

    def test_whole_files_pass_and_load(self):
        integrity.check_safetensors(os.path.join(self.checkpoint, "model.safetensors"))
        integrity.check_tf_checkpoint(os.path.join(self.checkpoint, "bert_model.ckpt"))
        self.assertEqual(
            integrity.latest_checkpoint(self.checkpoint), os.path.join(self.checkpoint, "bert_model.ckpt")
        )

    def test_truncated_safetensors_is_named_with_sizes(self):
        google_files = (
            "bert_config.json",
            "bert_model.ckpt.index",
            "bert_model.ckpt.data-00000-of-00001",
            "checkpoint",
        )
        size = os.path.getsize(os.path.join(self.checkpoint, "model.safetensors"))
        for keep in CUTS:
            with self.subTest(keep=keep):
                directory = self.damaged_copy("model.safetensors", keep, drop=google_files)
                with self.assertRaisesRegex(
                    DamagedFileError, r"model\.safetensors is truncated or corrupt \(expected"
                ):
                    from_pretrained(directory, heads="encoder")
                if keep >= 0.5:
                    with self.assertRaisesRegex(
                        DamagedFileError, f"expected {size} bytes, found {int(size * keep)}"
                    ):
                        from_pretrained(directory, heads="encoder")

    def test_truncated_google_checkpoint_is_named(self):
        data = "bert_model.ckpt.data-00000-of-00001"
        size = os.path.getsize(os.path.join(self.checkpoint, data))
        for name in (data, "bert_model.ckpt.index"):
            for keep in CUTS:
                with self.subTest(name=name, keep=keep):
                    directory = self.damaged_copy(name, keep, drop=("model.safetensors", "config.json"))
                    expected = f"expected {size} bytes, found {int(size * keep)}" if name == data else "index"
                    with self.assertRaisesRegex(
                        DamagedFileError, f"{name} is truncated or corrupt.*{expected}"
                    ):
                        from_pretrained(directory, heads="encoder")

    def test_damaged_config_and_vocab_are_named(self):
        directory = self.damaged_copy("config.json", 0.5, drop=("bert_config.json",))
        with self.assertRaisesRegex(
            DamagedFileError, r"config\.json is truncated or corrupt \(not valid JSON"
        ):
            from_pretrained(directory)
        directory = self.damaged_copy("vocab.txt", 0.5)
        with self.assertRaisesRegex(
            BertTfError,
            r"vocab.txt has \d+ tokens but the config says vocab_size=12: the vocab file is truncated",
        ):
            from_pretrained(directory)

    def test_keras_archive_cut_anywhere_is_named(self):
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        path = os.path.join(tempfile.mkdtemp(), "model.keras")
        model.save(path)
        integrity.check_keras_archive(path)
        whole = open(path, "rb").read()
        for keep in CUTS:
            with self.subTest(keep=keep):
                with open(path, "wb") as file:
                    file.write(whole[: int(len(whole) * keep)])
                with self.assertRaisesRegex(DamagedFileError, "model.keras is truncated or corrupt"):
                    integrity.check_keras_archive(path)
                # Checked on a local copy, it names the user's file, not the copy.
                with self.assertRaises(DamagedFileError) as raised:
                    integrity.check_keras_archive(path, display_path="gs://bucket/run/model/model.keras")
                self.assertStartsWith(str(raised.exception), "gs://bucket/run/model/model.keras is truncated")
                self.assertNotIn(path, str(raised.exception))

    def test_unreadable_checkpoint_state_is_an_error_not_a_fresh_start(self):
        directory = tempfile.mkdtemp()
        self.assertIsNone(integrity.latest_checkpoint(directory))
        state = os.path.join(directory, "checkpoint")
        for content, message in (
            ('model_checkpoint_path: "ckpt-1\n\x00', "not a checkpoint state"),
            ("", "names no checkpoint"),
            ('model_checkpoint_path: "ckpt-7"\n', "whose files are missing"),
        ):
            with self.subTest(content=content):
                with open(state, "w") as file:
                    file.write(content)
                with self.assertRaisesRegex(
                    DamagedFileError, f"checkpoint is truncated or corrupt.*{message}"
                ):
                    integrity.latest_checkpoint(directory)

    def test_truncated_tfrecord_is_named(self):
        path = os.path.join(tempfile.mkdtemp(), "data.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for length in (5, 50, 500):
                writer.write(bytes(length))
        self.assertEqual(records.check_framing(path), 3)
        whole = open(path, "rb").read()
        for cut in (3, 20, 40, len(whole) - 1):
            with self.subTest(cut=cut):
                with open(path, "wb") as file:
                    file.write(whole[:cut])
                with self.assertRaisesRegex(DamagedFileError, "data.tfrecord is truncated or corrupt"):
                    records.check_framing(path)

    def test_pretraining_model_dir_loads_its_export(self):
        model_dir = tempfile.mkdtemp()
        with open(os.path.join(model_dir, "bert_config.json"), "w") as file:
            file.write(CONFIG.to_json_string())
        open(os.path.join(model_dir, "ckpt-10.index"), "w").close()
        with self.assertRaisesRegex(BertTfError, "pretraining run that has not finished"):
            from_pretrained(model_dir)
        shutil.copytree(self.checkpoint, os.path.join(model_dir, "export"))
        with self.assertLogs("bert_tf.checkpoints.pretrained", "INFO") as logs:
            loaded, settings = from_pretrained(model_dir)
        self.assertIn("is a pretraining model_dir: using the model in", logs.output[0])
        self.assertEqual(settings.vocab_file, os.path.join(model_dir, "export", "vocab.txt"))
        for expected, actual in zip(self.model.weights, loaded.weights, strict=True):
            np.testing.assert_array_equal(expected.numpy(), actual.numpy())

    def test_written_files_follow_the_umask(self):
        umask = os.umask(0o022)
        os.umask(umask)
        for name in os.listdir(self.checkpoint):
            with self.subTest(name=name):
                self.assertEqual(os.stat(os.path.join(self.checkpoint, name)).st_mode & 0o777, 0o666 & ~umask)


if __name__ == "__main__":
    tf.test.main()
