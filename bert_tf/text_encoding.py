"""Text files in a known encoding: UTF-8 unless the user names another (`--input_encoding`).

BERT's tokenizer takes UTF-8 and drops the bytes it cannot decode (the original does the
same), so a file in Latin-1 would silently train on "fr" for "für". Every reader of raw
text (pretraining's corpus, `build_vocab`, `create_pretraining_data`) and of fine-tuning's
files decodes through this module: a file that is not valid UTF-8 is refused with the
file, the line and the fix (convert it with `iconv`, or name its encoding), and a named
encoding is decoded by Python's codecs, any of them (`latin-1`, `cp1252`, `utf-16`, ...).

Files are opened with `bert_tf.fileio.open_text`, which decodes through `TextFile`;
fine-tuning's readers use it with no encoding, which means this module's `default_encoding()`: UTF-8, or what `reading_as` sets while a run reads
(`python -m bert_tf.finetune --input_encoding=latin-1`).

Example:

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "old.csv")
>>> _ = open(path, "wb").write("text,label\\nGrüße,pos\\n".encode("latin-1"))
>>> with TextFile(open(path, "rb"), path) as handle:
...     handle.read()
Traceback (most recent call last):
...
bert_tf.text_encoding.EncodingError: .../old.csv line 2 is not valid UTF-8 (b'Gr\\xfc\\xdfe,pos'); convert the file to UTF-8 (iconv -f latin1 -t utf-8 .../old.csv > .../old.utf8.csv, naming the encoding it was written in) or pass --input_encoding=latin-1
>>> with TextFile(open(path, "rb"), path, "latin-1") as handle:
...     handle.read()
'text,label\\nGrüße,pos\\n'
"""

from __future__ import annotations

import codecs
import contextlib
import os
from collections.abc import Iterator
from typing import BinaryIO

from bert_tf.errors import InputFileError, UsageError

UTF8 = "utf-8"
FLAG = "--input_encoding"

_default = UTF8  # see reading_as


class EncodingError(InputFileError):
    """A text file that is not in the encoding it is read in; the message names the file,
    the line and the fix."""


def check_encoding(name: str | None, flag: str = FLAG) -> str:
    """Python's name for the encoding `name` (None: UTF-8); a `UsageError` for an unknown one."""
    if name is None:
        return UTF8
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise UsageError(
            f"{flag}={name} is not an encoding Python knows; use a name such as latin-1, cp1252, utf-16 "
            '(python -c "import encodings; help(encodings)" lists them)'
        ) from None


def default_encoding() -> str:
    """The encoding `bert_tf.fileio.open_text` reads in: UTF-8 unless `reading_as` says otherwise."""
    return _default


@contextlib.contextmanager
def reading_as(encoding: str | None) -> Iterator[str]:
    """Within the block, `bert_tf.fileio.open_text` (fine-tuning's readers) decodes files as `encoding`.

    Process-wide (readers run in tf.data's threads too); the previous encoding comes back at
    the end of the block.
    """
    global _default
    previous, _default = _default, check_encoding(encoding)
    try:
        yield _default
    finally:
        _default = previous


def conversion_hint(path: str, flag: str = FLAG) -> str:
    """The fix for a file that is not UTF-8: convert it, or name its encoding."""
    stem, extension = os.path.splitext(path)
    return (
        f"convert the file to UTF-8 (iconv -f latin1 -t utf-8 {path} > {stem}.utf8{extension or '.txt'}, naming "
        f"the encoding it was written in) or pass {flag}=latin-1"
    )


def decoding_error(path: str, line_number: int, raw: bytes, encoding: str, flag: str = FLAG) -> EncodingError:
    """The error for line `line_number` of `path`, whose bytes `raw` do not decode as `encoding`."""
    shown = raw.rstrip(b"\r\n")[:60]
    if encoding == UTF8:
        return EncodingError(
            f"{path} line {line_number} is not valid UTF-8 ({shown!r}); {conversion_hint(path, flag)}"
        )
    return EncodingError(
        f"{path} line {line_number} is not valid {encoding} ({shown!r}); pass the encoding the file was "
        f"written in as {flag}, or convert it to UTF-8 with iconv and leave {flag} out"
    )


class TextFile:
    """A text file decoded line by line, so that a decoding error names its line.

    Iterating gives the lines with their ends (`newline=None` turns `\\r\\n` into `\\n`, as
    `open` does; `newline=""` keeps them, for `csv`); `read()` gives the whole text.
    """

    def __init__(self, handle: BinaryIO, path: str, encoding: str | None = None, newline: str | None = None):
        self._handle = handle
        self.path = path
        self.encoding = check_encoding(encoding or default_encoding())
        self.newline = newline
        self.line_number = 0

    def __iter__(self) -> Iterator[str]:
        # UTF-16/32 lines are not split at b"\n" bytes: such files are decoded whole.
        if self.encoding.startswith(("utf-16", "utf-32")):
            yield from self.read().splitlines(keepends=True)
            return
        for raw in self._handle:
            self.line_number += 1
            if self.line_number == 1 and self.encoding == UTF8 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]  # a byte-order mark is not text
            try:
                line = raw.decode(self.encoding)
            except UnicodeDecodeError:
                raise decoding_error(self.path, self.line_number, raw, self.encoding) from None
            yield line.replace("\r\n", "\n") if self.newline is None else line

    def read(self) -> str:
        data = self._handle.read()
        try:
            text = data.decode("utf-8-sig" if self.encoding == UTF8 else self.encoding)
        except UnicodeDecodeError as error:
            line_number = data.count(b"\n", 0, error.start) + 1
            start = data.rfind(b"\n", 0, error.start) + 1
            end = data.find(b"\n", error.start)
            raise decoding_error(
                self.path, line_number, data[start : end if end >= 0 else None], self.encoding
            ) from None
        return text.replace("\r\n", "\n") if self.newline is None else text

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> TextFile:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
