"""Reading the pretraining corpus format as a stream of document blocks.

The format is the original BERT release's: one sentence per line, a blank (or
whitespace-only) line between documents. Files are read line by line, so memory is
bounded by one block of documents whatever the corpus size. Documents are grouped into
blocks of at least `min_documents` documents: a block is the unit that is tokenized in
one call, and the pool from which a "random next" segment is drawn.

Example:

>>> from pipelines import corpus, text_input
>>> path = corpus.write_corpus("/tmp/pydoc_corpus.txt")
>>> files = [path]
>>> stats = text_input.ReadStats()
>>> lines, documents = next(text_input.document_blocks(files, stats=stats))
>>> len(documents) >= 64 and sum(documents) == len(lines)
True
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO

from bert_tf import fileio, text_encoding
from bert_tf.errors import InputFileError, UsageError

# A line longer than this is cut (at a character boundary) and counted: one sentence of
# a training pair never uses more than a few hundred word pieces, so nothing a pair
# could use is lost, and a file without newlines cannot exhaust memory.
DEFAULT_MAX_LINE_BYTES = 1 << 20
DEFAULT_MIN_DOCUMENTS = 256
# Lines whose encoding is checked before a run: a file in another encoding shows itself
# in a few accented words, which may be rare.
ENCODING_SAMPLE_LINES = 50_000
# At most this share of a file's lines may fail to decode and be used (with a warning): a
# stray byte is damage; more is a file in another encoding, refused with the fix.
MAX_STRAY_LINES_SHARE = 0.001


def line_encoding(encoding: str | None, flag: str = text_encoding.FLAG) -> str:
    """The Python name of a raw-text encoding (None: UTF-8). Lines are split at b"\\n",
    which UTF-16 and UTF-32 do not end lines with: those are refused with the fix."""
    name = text_encoding.check_encoding(encoding, flag)
    if name.startswith(("utf-16", "utf-32")):
        raise UsageError(
            f"{flag}={encoding}: raw text is read line by line, which {name} files cannot be; convert "
            f"them to UTF-8 (iconv -f {name} -t utf-8 IN > OUT) and leave {flag} out"
        )
    return name


@dataclasses.dataclass
class ReadStats:
    """What the reader saw; filled in while the stream is consumed."""

    files: int = 0
    bytes: int = 0
    lines: int = 0
    documents: int = 0
    invalid_utf8_lines: int = 0  # lines not valid in the encoding read (UTF-8 unless named)
    long_lines_cut: int = 0
    empty_files: list[str] = dataclasses.field(default_factory=list)


def check_mostly_text(
    files: Sequence[str],
    tokenizer,
    flag: str,
    accept: bool = False,
    sample_lines: int = 2000,
    *,
    filesystem: Any = None,
    encoding: str = text_encoding.UTF8,
) -> None:
    """Refuses input that is mostly not text, or not in `encoding`, from a sample of its lines.

    A line is not text if it does not decode or gives no word piece. When over half of the
    first `sample_lines` non-blank lines (across `files`, in order) are not text (a binary
    file, a vocab of another script), an `InputFileError` gives the counts. Then any line of
    the first `ENCODING_SAMPLE_LINES` of each file that do not decode as `encoding` (a
    Latin-1 file read as UTF-8, whose "für" the tokenizer would read as "fr") are refused
    with the file, the first such line, the share of such lines and the fix (`iconv`, or
    `--input_encoding`), unless they are at most `MAX_STRAY_LINES_SHARE` of the lines (a
    stray byte: a warning says so). `accept` lets the run go on (saying what it found). Without a
    `tokenizer` (a vocab is still to be learnt) decoding alone decides.

    `tokenizer` is a `BertTokenizer` or a function that makes one: only a line without a
    letter, digit, punctuation or symbol can give no word piece, so it is made (and
    TensorFlow loaded) only if the sample has such lines. `filesystem`: where the files
    are read, a module with `bert_tf.fileio`'s `open_binary` (`pipelines.beam.files`).
    """
    open_binary = fileio.open_binary if filesystem is None else filesystem.open_binary
    sample = _sample_lines(files, sample_lines, open_binary, encoding)
    if not sample.lines:
        return
    empty = _pieceless_lines(sample.lines, tokenizer)
    # An invalid line may also give no piece: count each line once.
    not_text = min(len(sample.lines), sample.invalid + empty)
    named = "UTF-8" if encoding == text_encoding.UTF8 else encoding
    if 2 * not_text > len(sample.lines):
        _refuse_not_text(sample, files, flag, accept, named, not_text, None if tokenizer is None else empty)
    elif sample.first_bad is not None:
        _refuse_other_encoding(sample, flag, accept, named, encoding)


@dataclasses.dataclass
class _TextSample:
    """The lines `check_mostly_text` judges, and what decoding them found."""

    lines: list[str] = dataclasses.field(default_factory=list)
    invalid: int = 0  # among `lines`
    # (path, line number, raw bytes) of the first line that does not decode
    first_bad: tuple[str, int, bytes] | None = None
    bad_lines: int = 0  # in the encoding sample
    read_lines: int = 0  # in the encoding sample


def _sample_lines(
    files: Sequence[str], sample_lines: int, open_binary: Callable, encoding: str
) -> _TextSample:
    """The first `sample_lines` non-blank lines across `files`, and the undecodable lines among
    the first `ENCODING_SAMPLE_LINES` of each file."""
    sample = _TextSample()
    for path in files:
        stats = ReadStats()
        for number, (line, raw) in enumerate(
            _read_lines(
                path, DEFAULT_MAX_LINE_BYTES, stats, open_binary=open_binary, encoding=encoding, raw=True
            ),
            start=1,
        ):
            bad = raw is not None
            if bad and sample.first_bad is None:
                sample.first_bad = (path, number, raw)
            if line and len(sample.lines) < sample_lines:
                sample.lines.append(line)
                sample.invalid += bad
            sample.bad_lines += bad
            sample.read_lines += bool(line)
            if number >= ENCODING_SAMPLE_LINES:
                break
    return sample


def _pieceless_lines(lines: list[str], tokenizer) -> int:
    """How many of `lines` give no word piece (0 without a tokenizer); the tokenizer is made
    only when some line might."""
    doubtful = [line for line in lines if not gives_a_piece(line)]
    if tokenizer is None or not doubtful:
        return 0
    import tensorflow as tf

    if not hasattr(tokenizer, "tokenize"):
        tokenizer = tokenizer()
    pieces = tokenizer.tokenize(tf.constant(doubtful)).row_lengths().numpy()
    return int((pieces == 0).sum())


def _refuse_not_text(
    sample: _TextSample,
    files: Sequence[str],
    flag: str,
    accept: bool,
    named: str,
    not_text: int,
    empty: int | None,
) -> None:
    """Over half the sampled lines are not text: refused (or, with `accept`, a warning). `empty`:
    the lines that give no word piece (None without a tokenizer)."""
    message = (
        f"{flag}: {not_text} of the first {len(sample.lines)} lines of {files[0]}"
        f"{' and the next files' if len(files) > 1 and not_text > sample.invalid else ''} are not text "
        f"({sample.invalid} have invalid {named}"
        f"{'' if empty is None else f', {empty} give no word piece with this vocab'})"
    )
    _refuse_or_warn(
        message,
        accept,
        "pass a UTF-8 text corpus (one sentence per line), or --accept_non_text to use it anyway",
    )


def _refuse_other_encoding(sample: _TextSample, flag: str, accept: bool, named: str, encoding: str) -> None:
    """Some lines do not decode as `encoding`: refused with the fix, unless they are rare."""
    path, number, raw = sample.first_bad
    bad_lines, read_lines = sample.bad_lines, sample.read_lines
    message = (
        f"{flag}: {path} is not {named} text: {bad_lines} of the {read_lines:,} lines read ({bad_lines / read_lines:.1%}) "
        f"hold bytes that are not {named}, the first at line {number} ({raw.rstrip()[:60]!r}); the tokenizer "
        'would drop those bytes ("für" would train as "fr")'
    )
    fix = (
        text_encoding.conversion_hint(path)
        if encoding == text_encoding.UTF8
        else (f"pass the encoding the files were written in as {text_encoding.FLAG}")
    )
    # A stray byte or two in a large file is damage, not an encoding: said, and dropped.
    rare = bad_lines <= MAX_STRAY_LINES_SHARE * read_lines
    _refuse_or_warn(message, accept or rare, f"{fix}; or --accept_non_text to train without those bytes")


def _refuse_or_warn(message: str, accept: bool, fix: str) -> None:
    if not accept:
        raise InputFileError(f"{message}; {fix}")
    import logging

    logging.getLogger(__name__).warning("%s; used anyway", message)


# The Unicode categories (first letters) of letters, digits, punctuation and symbols.
_WORD_CATEGORIES = frozenset("LNPS")


def gives_a_piece(line: str) -> bool:
    """Whether `line` surely gives a word piece with any vocab: it has a letter, digit,
    punctuation or symbol, which the tokenizer's cleaning keeps ([UNK] if the vocab lacks
    it). U+FFFD, a symbol, is deleted. Lines without one may still give pieces."""
    return any(unicodedata.category(char)[0] in _WORD_CATEGORIES and char != "\ufffd" for char in line)


def _read_lines(
    path: str,
    max_line_bytes: int,
    stats: ReadStats,
    start: int = 0,
    open_binary: Callable[[str], BinaryIO] = fileio.open_binary,
    encoding: str = text_encoding.UTF8,
    raw: bool = False,
) -> Iterator[tuple[str, Any]]:
    """Yields the decoded, stripped lines of one file ("" for blank lines) from byte `start`,
    each with the byte offset just after it (`raw=True`: instead, the line's bytes if they
    did not decode, else None). A line that does not decode as `encoding` is counted in
    `stats.invalid_utf8_lines` and decoded with U+FFFD for its bad bytes, which the
    tokenizer deletes, as the original drops undecodable bytes."""
    size = 0
    with open_binary(path) as handle:
        if start:
            handle.seek(start)
        while True:
            data = handle.readline(max_line_bytes + 1)
            if not data:
                break
            size += len(data)
            stats.bytes += len(data)
            if len(data) > max_line_bytes and not data.endswith(b"\n"):
                # Skip the rest of the over-long line without holding it in memory.
                stats.long_lines_cut += 1
                while True:
                    rest = handle.readline(max_line_bytes)
                    size += len(rest)
                    stats.bytes += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
                # A cut may fall inside a UTF-8 character: drop that partial character.
                data = data[:max_line_bytes].decode(encoding, "ignore").encode(encoding)
            stats.lines += 1
            undecoded = None
            try:
                line = data.decode(encoding)
            except UnicodeDecodeError:
                stats.invalid_utf8_lines += 1
                undecoded = data
                line = data.decode(encoding, "replace")
            yield line.strip(), (undecoded if raw else start + size)
    stats.files += 1
    if size == 0 and start == 0:
        stats.empty_files.append(path)


# Where a reader stands in a list of files: (file index, byte offset in that file).
# (len(files), 0) is the end of the stream.
Position = tuple[int, int]


def documents_from(
    files: Sequence[str],
    position: Position = (0, 0),
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stats: ReadStats | None = None,
    encoding: str = text_encoding.UTF8,
) -> Iterator[tuple[list[str], Position]]:
    """Yields (document, the position just after it) from `position` on.

    A document is a run of non-blank stripped lines; it never spans two files: the end of
    a file ends its last document. Reading from a yielded position continues the stream
    exactly where it stopped, without reading what came before.
    """
    stats = stats if stats is not None else ReadStats()
    file_index, offset = position
    for index in range(file_index, len(files)):
        document: list[str] = []
        for line, end in _read_lines(
            files[index], max_line_bytes, stats, offset if index == file_index else 0, encoding=encoding
        ):
            if line:
                document.append(line)
            elif document:
                stats.documents += 1
                yield document, (index, end)
                document = []
        if document:
            stats.documents += 1
            yield document, (index + 1, 0)


def documents_in_range(
    path: str,
    start: int,
    end: int,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stats: ReadStats | None = None,
    encoding: str = text_encoding.UTF8,
) -> Iterator[list[str]]:
    """Yields the documents of one file that belong to its byte range [start, end).

    A document belongs to the range holding the blank line just before it (the first
    document of a file, to the range at 0), so ranges that tile a file yield each of its
    documents exactly once whatever their size, and a range can be read knowing only its
    bounds: it reads on past `end` to finish its last document. This is how parallel
    readers (`pipelines.beam`) split a large file. `stats` counts the lines that start in
    the range, so the ranges of a file add up to it.
    """
    stats = stats if stats is not None else ReadStats()
    seen = ReadStats()  # everything read, the neighbours' lines included
    # From start - 1: the line holding that byte began in the range before, and is skipped.
    line_start = max(start - 1, 0)
    owning = start == 0
    document: list[str] = []
    for line, line_end in _read_lines(path, max_line_bytes, seen, line_start, encoding=encoding):
        ours = start <= line_start < end
        if ours:
            stats.lines += 1
            stats.bytes += line_end - line_start
            stats.invalid_utf8_lines += seen.invalid_utf8_lines
            stats.long_lines_cut += seen.long_lines_cut
        seen.invalid_utf8_lines = seen.long_lines_cut = 0
        if line_start >= start:
            if line:
                if owning:
                    document.append(line)
            else:
                if document:
                    stats.documents += 1
                    yield document
                    document = []
                if line_start >= end:
                    return
                owning = True
        line_start = line_end
    if document:
        stats.documents += 1
        yield document


def iter_documents(
    files: Sequence[str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stats: ReadStats | None = None,
    encoding: str = text_encoding.UTF8,
) -> Iterator[list[str]]:
    """Yields documents (lists of non-blank stripped lines) from files, in order."""
    for document, _ in documents_from(files, max_line_bytes=max_line_bytes, stats=stats, encoding=encoding):
        yield document


def read_block(
    files: Sequence[str],
    position: Position,
    *,
    min_documents: int = DEFAULT_MIN_DOCUMENTS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stats: ReadStats | None = None,
    encoding: str = text_encoding.UTF8,
) -> tuple[list[str], list[int], Position]:
    """The block `(lines, sentences_per_document, next position)` starting at `position`.

    A block holds `min_documents` documents, except the last of the stream: when fewer
    than `min_documents` documents follow a block, they join it, so no block has too few
    documents to draw a random next segment from another document (unless the whole
    corpus is that small). Only what follows `position` is read (up to two blocks' worth),
    so a stream can be resumed at any block in constant time.
    """
    if min_documents < 1:
        raise ValueError(f"min_documents must be >= 1, got {min_documents}")
    stats = stats if stats is not None else ReadStats()
    end = (len(files), 0)
    lines: list[str] = []
    lengths: list[int] = []
    after = end
    for document, position_after in documents_from(
        files, position, max_line_bytes=max_line_bytes, stats=stats, encoding=encoding
    ):
        lines.extend(document)
        lengths.append(len(document))
        if len(lengths) == min_documents:
            after = position_after
            break
    if after == end:
        return lines, lengths, end
    # Look ahead: a short remainder of the stream belongs to this block.
    ahead_stats = ReadStats()
    ahead = []
    for document, _ in documents_from(
        files, after, max_line_bytes=max_line_bytes, stats=ahead_stats, encoding=encoding
    ):
        ahead.append(document)
        if len(ahead) == min_documents:
            return lines, lengths, after
    for document in ahead:
        lines.extend(document)
        lengths.append(len(document))
    for field in dataclasses.fields(ReadStats):
        value = getattr(ahead_stats, field.name)
        setattr(stats, field.name, getattr(stats, field.name) + value)
    return lines, lengths, end


def block_size_for_shards(
    files: Sequence[str], num_shards: int, *, min_documents: int = DEFAULT_MIN_DOCUMENTS
) -> int:
    """A block size at which `files` make at least `num_shards` blocks.

    Blocks go round-robin to the shards of a sharded stream, so a corpus of fewer blocks
    than shards would leave a shard with nothing to read (and its worker waiting for data
    forever). That is `min_documents` when the corpus holds `num_shards * min_documents`
    documents (only that many are read), else its documents divided by `num_shards`.
    """
    needed = num_shards * min_documents
    count = 0
    for _ in iter_documents(files):
        count += 1
        if count >= needed:
            return min_documents
    if count < num_shards:
        raise InputFileError(
            f"the corpus {list(files)} holds {count} document(s), fewer than the {num_shards} input "
            "pipelines that share it (one per worker): each needs at least one; use a larger corpus "
            "or fewer workers"
        )
    return count // num_shards


def document_blocks(
    files: Sequence[str],
    *,
    min_documents: int = DEFAULT_MIN_DOCUMENTS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stats: ReadStats | None = None,
    encoding: str = text_encoding.UTF8,
) -> Iterator[tuple[list[str], list[int]]]:
    """Yields blocks `(lines, sentences_per_document)` of the whole stream (see `read_block`)."""
    stats = stats if stats is not None else ReadStats()
    position: Position = (0, 0)
    while position[0] < len(files):
        lines, lengths, position = read_block(
            files,
            position,
            min_documents=min_documents,
            max_line_bytes=max_line_bytes,
            stats=stats,
            encoding=encoding,
        )
        if lengths:
            yield lines, lengths
