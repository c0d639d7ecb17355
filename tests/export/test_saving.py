"""Export directories are written whole or not at all."""

import os

import tensorflow as tf

from bert_tf.config import load_config
from bert_tf.serving.saving import ExportError, atomic_export_dir, check_seq_length


def write(directory, name, text):
    with open(os.path.join(directory, name), "w") as file:
        file.write(text)


class AtomicExportDirTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.parent = self.get_temp_dir()
        self.target = os.path.join(self.parent, "export")

    def siblings(self):
        return sorted(os.listdir(self.parent))

    def test_new_directory_appears_complete(self):
        with atomic_export_dir(self.target) as staging:
            self.assertFalse(os.path.exists(self.target))
            write(staging, "saved_model.pb", "new")
        self.assertEqual(os.listdir(self.target), ["saved_model.pb"])
        self.assertEqual(self.siblings(), ["export"])

    def test_empty_existing_directory_is_used(self):
        os.makedirs(self.target)
        with atomic_export_dir(self.target) as staging:
            write(staging, "saved_model.pb", "new")
        self.assertEqual(os.listdir(self.target), ["saved_model.pb"])

    def test_non_empty_directory_is_refused_without_overwrite(self):
        os.makedirs(self.target)
        write(self.target, "saved_model.pb", "old")
        with self.assertRaisesRegex(ExportError, "not empty.*--overwrite"):
            with atomic_export_dir(self.target):
                self.fail("the block must not run")
        with open(os.path.join(self.target, "saved_model.pb")) as file:
            self.assertEqual(file.read(), "old")

    def test_overwrite_replaces_the_old_export(self):
        os.makedirs(self.target)
        write(self.target, "old_only.txt", "old")
        with atomic_export_dir(self.target, overwrite=True) as staging:
            write(staging, "saved_model.pb", "new")
        self.assertEqual(os.listdir(self.target), ["saved_model.pb"])
        self.assertEqual(self.siblings(), ["export"])

    def test_failure_leaves_no_half_written_export_and_keeps_the_old(self):
        with self.assertRaises(RuntimeError):
            with atomic_export_dir(self.target) as staging:
                write(staging, "saved_model.pb", "half")
                raise RuntimeError("disk full")
        self.assertEqual(self.siblings(), [])
        os.makedirs(self.target)
        write(self.target, "saved_model.pb", "old")
        with self.assertRaises(RuntimeError):
            with atomic_export_dir(self.target, overwrite=True) as staging:
                write(staging, "saved_model.pb", "half")
                raise RuntimeError("disk full")
        self.assertEqual(self.siblings(), ["export"])
        with open(os.path.join(self.target, "saved_model.pb")) as file:
            self.assertEqual(file.read(), "old")

    def test_a_file_is_not_a_directory(self):
        write(self.parent, "export", "")
        with self.assertRaisesRegex(ExportError, "is a file"):
            with atomic_export_dir(self.target, overwrite=True):
                pass


class SeqLengthTest(tf.test.TestCase):
    def test_limits(self):
        config = load_config("bert_tiny").replace(max_position_embeddings=64)
        check_seq_length(64, config)
        check_seq_length(3, config)
        with self.assertRaisesRegex(
            ExportError, "--max_seq_length=65 is above the model's max_position_embeddings=64"
        ):
            check_seq_length(65, config)
        with self.assertRaisesRegex(ExportError, ">= 3"):
            check_seq_length(2, config)


if __name__ == "__main__":
    tf.test.main()
