"""pipelines.beam.files answers as bert_tf.fileio does (TensorFlow's filesystems, the reference),
on a local folder and on a URL Beam has no filesystem for (ram://, handed to fileio)."""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import InputFileError, UsageError
from bert_tf.outputs import check_output
from bert_tf.vocab import load_vocab
from pipelines.beam import files


class BeamFilesTest(tf.test.TestCase):
    def _tree(self, root: str) -> None:
        for name, data in [("a.txt", b"one\n"), (".hidden.txt", b""), ("sub/b.txt", b"two\nlines\n")]:
            fileio.write_bytes(fileio.join(root, name), data)

    def test_the_same_answers_as_fileio(self):
        for root in (tempfile.mkdtemp(), "ram://beam_files_test"):
            with self.subTest(root=root):
                self._tree(root)
                for pattern in ("*", "*.txt", "sub/*", "[a-z].txt", "none*", "sub"):
                    self.assertEqual(
                        files.glob(fileio.join(root, pattern)), fileio.glob(fileio.join(root, pattern))
                    )
                for name in ("a.txt", ".hidden.txt", "sub", "sub/b.txt", "missing"):
                    path = fileio.join(root, name)
                    self.assertEqual(files.exists(path), fileio.exists(path), path)
                    self.assertEqual(files.isdir(path), fileio.isdir(path), path)
                    self.assertEqual(files.isfile(path), fileio.isfile(path), path)
                path = fileio.join(root, "sub/b.txt")
                self.assertEqual(files.size(path), fileio.size(path))
                self.assertEqual(files.read_bytes(path), fileio.read_bytes(path))
                with files.open_binary(path) as handle:
                    handle.seek(4)
                    self.assertEqual(handle.readline(3), b"lin")
                made = files.makedirs(fileio.join(root, "new/deeper"))
                self.assertTrue(fileio.isdir(made))
                files.remove(fileio.join(root, "a.txt"))
                self.assertFalse(fileio.exists(fileio.join(root, "a.txt")))
                fileio.rmtree(root)

    def test_the_checks_that_take_a_filesystem(self):
        root = tempfile.mkdtemp()
        self._tree(root)
        self.assertEqual(
            fileio.expand_files(f"{root}/sub/*,{root}/a.txt", "input_file", filesystem=files),
            fileio.expand_files(f"{root}/sub/*,{root}/a.txt", "input_file"),
        )
        with self.assertRaisesRegex(InputFileError, "names the directory"):
            fileio.expand_files(f"{root}/sub", "input_file", filesystem=files)
        with self.assertRaisesRegex(InputFileError, "matches no file"):
            fileio.expand_files(f"{root}/none*", "input_file", filesystem=files)
        with self.assertRaisesRegex(InputFileError, "no filesystem for the scheme 'zz://'"):
            fileio.expand_files("zz://x/*", "input_file", filesystem=files)
        self.assertEqual(
            check_output(f"{root}/new.txt", "--output_file", overwrite=False, is_file=True, filesystem=files),
            "fresh",
        )
        with self.assertRaisesRegex(UsageError, "already exists"):
            check_output(f"{root}/a.txt", "--output_file", overwrite=False, is_file=True, filesystem=files)
        vocab_file = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "bert_uncased_vocab.txt")
        self.assertEqual(load_vocab(vocab_file, filesystem=files), load_vocab(vocab_file))


if __name__ == "__main__":
    tf.test.main()
