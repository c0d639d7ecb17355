"""A corpus that is mostly not text is refused with its counts (or used when accepted)."""

from __future__ import annotations

import os
import random
import tempfile

import tensorflow as tf

from bert_tf.tokenization import BertTokenizer
from pipelines.text_input import InputFileError, check_mostly_text

VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "bert_uncased_vocab.txt")


class MostlyTextTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = BertTokenizer(VOCAB)

    def write(self, content: bytes) -> str:
        path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
        with open(path, "wb") as file:
            file.write(content)
        return path

    def test_random_bytes_are_refused_with_counts(self):
        rng = random.Random(0)
        path = self.write(bytes(rng.randrange(256) for _ in range(100_000)))
        with self.assertRaisesRegex(
            InputFileError,
            r"--corpus: \d+ of the first \d+ lines of .* are not text \(\d+ have invalid UTF-8",
        ):
            check_mostly_text([path], self.tokenizer, "--corpus")
        with self.assertLogs("pipelines.text_input", "WARNING"):
            check_mostly_text([path], self.tokenizer, "--corpus", accept=True)

    def test_lines_without_word_pieces_count(self):
        # Valid UTF-8 that gives no word piece (control characters are deleted by the cleaner).
        path = self.write(b"the cat sat.\n" + b"\x01\x02\x03\n" * 3)
        with self.assertRaisesRegex(
            InputFileError, r"3 of the first 4 lines .* \(0 have invalid UTF-8, 3 give no word piece"
        ):
            check_mostly_text([path], self.tokenizer, "--input_file")

    def test_without_a_vocab_invalid_utf8_alone_decides(self):
        rng = random.Random(1)
        path = self.write(bytes(rng.randrange(256) for _ in range(100_000)))
        with self.assertRaisesRegex(
            InputFileError,
            r"--input_file: \d+ of the first \d+ lines .* are not text \(\d+ have invalid UTF-8\);",
        ):
            check_mostly_text([path], None, "--input_file")
        # Lines without word pieces are text as far as a vocab still to be learnt knows.
        check_mostly_text([self.write(b"\x01\x02\x03\n" * 3)], None, "--input_file")

    def test_text_with_a_few_bad_lines_passes(self):
        path = self.write(b"the cat sat on the mat.\n\nit was \xff good.\nthe dog ran.\n")
        check_mostly_text([path], self.tokenizer, "--input_file")


if __name__ == "__main__":
    tf.test.main()
