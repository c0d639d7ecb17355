"""Text files that are not UTF-8: refused with the file, the line and the fix, or read in
the encoding named (`bert_tf.text_encoding`, fine-tuning's readers)."""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

from bert_tf import fileio, text_encoding
from bert_tf.errors import UsageError
from bert_tf.tasks.classification import tables
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.tasks.token import conll

ROWS = [("Grüße aus Köln", "pos"), ("plain words", "neg"), ("für die Größe", "pos")]


def write(name: str, data: bytes) -> str:
    path = os.path.join(tempfile.mkdtemp(), name)
    with open(path, "wb") as file:
        file.write(data)
    return path


class EncodingTest(tf.test.TestCase):
    def csv_bytes(self, encoding: str) -> bytes:
        text = "text,label\r\n" + "".join(f'"{t}",{label}\r\n' for t, label in ROWS)
        return text.encode(encoding)

    def test_a_latin1_csv_is_refused_at_its_first_bad_line_with_the_fix(self):
        path = write("train.csv", self.csv_bytes("latin-1"))
        with self.assertRaises(text_encoding.EncodingError) as caught:
            tables.read_table(path, "text", label_column="label")
        message = str(caught.exception)
        self.assertIn(f"{path} line 2 is not valid UTF-8", message)  # the header is line 1
        self.assertIn(f"iconv -f latin1 -t utf-8 {path}", message)
        self.assertIn("--input_encoding=latin-1", message)
        self.assertNotIn("\n", message)

    def test_the_encoding_named_reads_the_same_rows_as_the_utf8_file(self):
        utf8 = tables.read_table(write("a.csv", self.csv_bytes("utf-8")), "text", label_column="label")
        with text_encoding.reading_as("latin-1"):
            latin1 = tables.read_table(
                write("b.csv", self.csv_bytes("latin-1")), "text", label_column="label"
            )
        self.assertEqual([(e.text_a, e.label) for e in latin1], ROWS)
        self.assertEqual([(e.text_a, e.label) for e in utf8], ROWS)
        self.assertEqual(text_encoding.default_encoding(), "utf-8")  # restored after the block

    def test_other_readers_and_whole_file_reads_name_the_line_too(self):
        data = "EU B-ORG\nrejects O\n\nKöln B-LOC\n".encode("cp1252")
        with self.assertRaisesRegex(text_encoding.EncodingError, r"\.conll line 4 is not valid UTF-8"):
            conll.read_conll(write("x.conll", data))
        with fileio.open_text(write("y.json", b'{"a": 1}\n{"b": "\xe9"}\n')) as handle:
            with self.assertRaisesRegex(text_encoding.EncodingError, r"y\.json line 2 is not valid UTF-8"):
                handle.read()
        # A UTF-8 byte-order mark is no text; UTF-16 with its mark reads as the same text.
        self.assertEqual(list(fileio.open_text(write("z.txt", b"\xef\xbb\xbfhi\n"))), ["hi\n"])
        with fileio.open_text(write("w.txt", "für\nbar\n".encode("utf-16")), encoding="utf-16") as handle:
            self.assertEqual(list(handle), ["für\n", "bar\n"])

    def test_an_unknown_encoding_is_a_usage_error(self):
        with self.assertRaisesRegex(UsageError, "--input_encoding=latin-9x is not an encoding Python knows"):
            FinetuneSettings(task="classification", output_dir="/tmp/x", input_encoding="latin-9x")
        self.assertEqual(text_encoding.check_encoding("Latin1"), "iso8859-1")
