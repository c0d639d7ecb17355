"""Reading the pretraining corpus format as a stream of document blocks.

The format is the original BERT release's: one sentence per line, a blank (or
whitespace-only) line between documents. Files are read line by line, so memory is
bounded by one block of documents whatever the corpus size. Documents are grouped into
blocks of at least `min_documents` documents: a block is the unit that is tokenized in
one call, and the pool from which a "random next" segment is drawn.

Example:

>>> from pipelines import corpus, text_input
>>> path = corpus.write_corpus("/tmp/pydoc_corpus.txt")
>>> files = text_input.expand_input_patterns(path)
>>> stats = text_input.ReadStats()
>>> lines, documents = next(text_input.document_blocks(files, stats=stats))
>>> len(documents) >= 64 and sum(documents) == len(lines)
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import tensorflow as tf

from bert_tf.errors import BertTfError

# A line longer than this is cut (at a character boundary) and counted: one sentence of
# a training pair never uses more than a few hundred word pieces, so nothing a pair
# could use is lost, and a file without newlines cannot exhaust memory.
DEFAULT_MAX_LINE_BYTES = 1 << 20
DEFAULT_MIN_DOCUMENTS = 256


@dataclasses.dataclass
class ReadStats:
    """What the reader saw; filled in while the stream is consumed."""

    files: int = 0
    bytes: int = 0
    lines: int = 0
    documents: int = 0
    invalid_utf8_lines: int = 0
    long_lines_cut: int = 0
    empty_files: list[str] = dataclasses.field(default_factory=list)


class InputFileError(BertTfError, ValueError):
    """An input pattern matched no file or named something that cannot be read."""


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Expands comma-separated globs (or a list of them) into a list of files, in order.

    Each pattern's matches are sorted, so the same patterns always give the same order
    (and so the same output). A pattern that matches nothing is an error naming it.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files: list[str] = []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        matches = sorted(tf.io.gfile.glob(pattern))
        if not matches:
            raise InputFileError(
                f"no input file matches {pattern!r}; check the path (globs like data/*.txt are allowed)"
            )
        for match in matches:
            if tf.io.gfile.isdir(match):
                raise InputFileError(
                    f"input {match!r} is a directory; pass the files inside it (e.g. {match}/*.txt)"
                )
            if match not in files:
                files.append(match)
    if not files:
        raise InputFileError(f"no input files given (got {patterns!r})")
    return files


def check_mostly_text(
    files: Sequence[str], tokenizer, flag: str, accept: bool = False, sample_lines: int = 2000
) -> None:
    """Refuses input that is mostly not text, from a sample of its first lines.

    A line is not text if it has invalid UTF-8 or gives no word piece. When over half of
    the first `sample_lines` non-blank lines (across `files`, in order) are not text (a
    binary file, a wrong encoding, a vocab of another script), an `InputFileError` gives the
    counts; `accept` lets the run go on (and says what it found).
    """
    stats = ReadStats()
    lines: list[str] = []
    invalid = 0
    for path in files:
        for line in _read_lines(path, DEFAULT_MAX_LINE_BYTES, stats):
            if line:
                lines.append(line)
                invalid = stats.invalid_utf8_lines
            if len(lines) >= sample_lines:
                break
        if len(lines) >= sample_lines:
            break
    if not lines:
        return
    pieces = tokenizer.tokenize(tf.constant(lines)).row_lengths().numpy()
    empty = int((pieces == 0).sum())
    # An invalid line may also give no piece: count each line once.
    not_text = min(len(lines), invalid + empty)
    if 2 * not_text <= len(lines):
        return
    message = (
        f"{flag}: {not_text} of the first {len(lines)} lines of {files[0]}"
        f"{' and the next files' if len(files) > 1 and stats.files > 1 else ''} are not text "
        f"({invalid} have invalid UTF-8, {empty} give no word piece with this vocab)"
    )
    if not accept:
        raise InputFileError(
            f"{message}; pass a UTF-8 text corpus (one sentence per line), or --accept_non_text to use it anyway"
        )
    import logging

    logging.getLogger(__name__).warning("%s; used anyway (--accept_non_text)", message)


def _open(path: str):
    if "://" in path:
        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb", buffering=1 << 20)


def _read_lines(path: str, max_line_bytes: int, stats: ReadStats) -> Iterator[str]:
    """Yields the decoded, stripped lines of one file ("" for blank lines)."""
    size = 0
    with _open(path) as handle:
        while True:
            raw = handle.readline(max_line_bytes + 1)
            if not raw:
                break
            size += len(raw)
            stats.bytes += len(raw)
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                # Skip the rest of the over-long line without holding it in memory.
                stats.long_lines_cut += 1
                while True:
                    rest = handle.readline(max_line_bytes)
                    size += len(rest)
                    stats.bytes += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
                # A cut may fall inside a UTF-8 character: drop that partial character.
                raw = raw[:max_line_bytes].decode("utf-8", "ignore").encode("utf-8")
            stats.lines += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                stats.invalid_utf8_lines += 1
                # U+FFFD is deleted by the tokenizer, as the original drops undecodable bytes.
                line = raw.decode("utf-8", "replace")
            yield line.strip()
    stats.files += 1
    if size == 0:
        stats.empty_files.append(path)


def iter_documents(
    files: Sequence[str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, stats: ReadStats | None = None
) -> Iterator[list[str]]:
    """Yields documents (lists of non-blank stripped lines) from files, in order.

    A document never spans two files: the end of a file ends its last document.
    """
    stats = stats if stats is not None else ReadStats()
    for path in files:
        document: list[str] = []
        for line in _read_lines(path, max_line_bytes, stats):
            if line:
                document.append(line)
            elif document:
                stats.documents += 1
                yield document
                document = []
        if document:
            stats.documents += 1
            yield document


def document_blocks(
    files: Sequence[str],
    *,
    min_documents: int = DEFAULT_MIN_DOCUMENTS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stats: ReadStats | None = None,
) -> Iterator[tuple[list[str], list[int]]]:
    """Yields blocks `(lines, sentences_per_document)` of at least `min_documents` documents.

    The last block of the stream is merged into the one before when it is smaller than
    `min_documents`, so no block is left with too few documents to draw a random next
    segment from another document (unless the whole corpus is that small).
    """
    if min_documents < 1:
        raise ValueError(f"min_documents must be >= 1, got {min_documents}")
    held: tuple[list[str], list[int]] | None = None
    lines: list[str] = []
    lengths: list[int] = []
    for document in iter_documents(files, max_line_bytes=max_line_bytes, stats=stats):
        lines.extend(document)
        lengths.append(len(document))
        if len(lengths) >= min_documents:
            if held is not None:
                yield held
            held = (lines, lengths)
            lines, lengths = [], []
    if held is not None and lengths:
        held = (held[0] + lines, held[1] + lengths)
    elif lengths:
        held = (lines, lengths)
    if held is not None:
        yield held
