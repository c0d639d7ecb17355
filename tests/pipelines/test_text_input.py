"""A corpus that is mostly not text is refused with its counts (or used when accepted)."""

from __future__ import annotations

import os
import random
import tempfile

import tensorflow as tf

from bert_tf.tokenization import BertTokenizer
from pipelines import text_input
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

    def test_every_character_that_surely_gives_a_piece_gives_one(self):
        # check_mostly_text tokenizes only the lines gives_a_piece doubts: its promise, for every
        # code point and both casings (a cased vocab: the uncased one's, unlowered).
        characters = [chr(point) for point in range(0x110000) if text_input.gives_a_piece(chr(point))]
        self.assertGreater(len(characters), 100_000)
        self.assertFalse(text_input.gives_a_piece("\x01\u200b\ufffd\u0301 \t"))
        for lower_case in (True, False):
            tokenizer = BertTokenizer(VOCAB, lower_case=lower_case)
            pieces = tokenizer.tokenize(tf.constant(characters)).row_lengths().numpy()
            self.assertEqual([char for char, count in zip(characters, pieces, strict=True) if count == 0], [])

    def test_the_tokenizer_is_made_only_for_lines_that_may_give_no_piece(self):
        made = []

        def tokenizer():
            made.append(True)
            return self.tokenizer

        check_mostly_text([self.write("the cat sat.\nüber 42 €\n".encode())], tokenizer, "--input_file")
        self.assertEqual(made, [])
        with self.assertRaisesRegex(InputFileError, "2 give no word piece"):
            check_mostly_text([self.write(b"the cat sat.\n\x01\n\x02\n")], tokenizer, "--input_file")
        self.assertEqual(made, [True])

    def test_text_with_a_stray_bad_byte_passes_with_a_warning(self):
        # One line in 2,000 (0.05%) is damage, not another encoding: used, and said.
        path = self.write(b"the cat sat on the mat.\n" * 1999 + b"it was \xff good.\n")
        with self.assertLogs("pipelines.text_input", "WARNING") as logs:
            check_mostly_text([path], self.tokenizer, "--input_file")
        self.assertIn("1 of the 2,000 lines read (0.1%)", logs.output[0])


class DocumentsInRangeTest(tf.test.TestCase):
    def test_ranges_of_any_size_tile_a_file_into_its_documents_once(self):
        # Documents of 1-4 lines between runs of blank and whitespace-only lines, an invalid
        # byte and a last document without a final newline: every way a range bound can fall.
        rng = random.Random(3)
        parts = []
        for _ in range(120):
            parts += [
                rng.choice(["ab", "ünï cödé", "x" * rng.randint(1, 40), "bad <ff> byte"])
                for _ in range(rng.randint(1, 4))
            ]
            parts += [rng.choice(["", "  ", "\t", ""]) for _ in range(rng.randint(1, 3))]
        parts.append("last line")
        path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
        with open(path, "wb") as file:
            file.write("\n".join(parts).encode("utf-8").replace(b"<ff>", b"\xff"))
        whole = text_input.ReadStats()
        expected = list(text_input.iter_documents([path], stats=whole))
        size = os.path.getsize(path)
        for range_bytes in (1, 2, 3, 7, 64, 1000, size, size + 5):
            with self.subTest(range_bytes=range_bytes):
                stats = text_input.ReadStats()
                found = [
                    document
                    for start in range(0, size, range_bytes)
                    for document in text_input.documents_in_range(
                        path, start, min(start + range_bytes, size), stats=stats
                    )
                ]
                self.assertEqual(found, expected)
                for name in ("bytes", "lines", "documents", "invalid_utf8_lines"):
                    self.assertEqual(getattr(stats, name), getattr(whole, name), name)
        self.assertGreater(whole.invalid_utf8_lines, 0)


if __name__ == "__main__":
    tf.test.main()


class EncodingTest(tf.test.TestCase):
    """A Latin-1 corpus whose every fifth line has an accent, as a new user's first corpus."""

    LINES = [f"line {i} über die Größe" if i % 5 == 2 else f"line {i} plain text" for i in range(100)]

    def setUp(self):
        super().setUp()
        self.path = os.path.join(tempfile.mkdtemp(), "latin1.txt")
        with open(self.path, "wb") as file:
            file.write("\n".join(self.LINES).encode("latin-1") + b"\n")

    def test_a_fifth_of_lines_not_utf8_is_refused_with_the_line_the_share_and_the_fix(self):
        with self.assertRaises(InputFileError) as caught:
            check_mostly_text([self.path], None, "--corpus")
        message = str(caught.exception)
        self.assertIn(f"{self.path} is not UTF-8 text: 20 of the 100 lines read (20.0%)", message)
        self.assertIn("the first at line 3 (b'line 2 \\xfcber die Gr\\xf6\\xdfe')", message)
        self.assertIn(f"iconv -f latin1 -t utf-8 {self.path}", message)
        self.assertIn("--input_encoding=latin-1", message)
        with self.assertLogs("pipelines.text_input", "WARNING"):
            check_mostly_text([self.path], None, "--corpus", accept=True)

    def test_read_in_the_encoding_named_the_lines_are_the_text(self):
        check_mostly_text([self.path], None, "--corpus", encoding="iso8859-1")
        stats = text_input.ReadStats()
        (document,) = text_input.iter_documents([self.path], stats=stats, encoding="iso8859-1")
        self.assertEqual(document, self.LINES)
        self.assertEqual(stats.invalid_utf8_lines, 0)
        # Read as UTF-8 (accepted), the accented letters are what the tokenizer drops.
        (damaged,) = text_input.iter_documents([self.path], stats=stats)
        self.assertEqual(damaged[2], "line 2 \ufffdber die Gr\ufffd\ufffde")
        self.assertEqual(stats.invalid_utf8_lines, 20)
