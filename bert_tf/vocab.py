"""A WordPiece vocab file, read and checked: one token per line, the id is the line number.

Apart from `bert_tf.tokenization` (which imports TensorFlow), so that a process that only
checks a vocab before handing it to workers (`pipelines.beam`) loads none.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from bert_tf import fileio
from bert_tf.errors import BertTfError

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class VocabError(BertTfError, ValueError):
    """A vocab file that cannot be used: missing, empty, ambiguous or lacking special tokens."""


def load_vocab(vocab_file: str | os.PathLike, *, filesystem: Any = None) -> list[str]:
    """Reads a WordPiece vocab file: one token per line, id = line number (0-based).

    Lines are stripped of surrounding whitespace, as the original `load_vocab` does, and a
    blank line keeps its id (never produced, as in the original). Unlike the original,
    problems that would silently give wrong ids are errors: a missing or empty file, a
    non-UTF-8 line, a token on two lines (the original keeps the last id, so every earlier id
    of that token is never produced), or a missing special token.

    Example:

    >>> vocab = load_vocab("tests/fixtures/bert_uncased_vocab.txt")
    >>> len(vocab), vocab.index("[CLS]")
    (30522, 101)

    `filesystem`: where to read it, `bert_tf.fileio` by default, or a module with its
    `exists` and `read_bytes` (`pipelines.beam.files`).
    """
    files = filesystem or fileio
    path = os.fspath(vocab_file)
    if not files.exists(path):
        raise VocabError(
            f"vocab file not found: {path}; pass the vocab.txt that came with the checkpoint, "
            "or learn one with `python -m pipelines.build_vocab`"
        )
    data = files.read_bytes(path)
    if not data.strip():
        raise VocabError(f"vocab file is empty: {path}; it needs one token per line")
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":  # The file ends with a newline: no token after it.
        raw_lines.pop()
    vocab: list[str] = []
    first_line: dict[str, int] = {}
    duplicates: list[str] = []
    empty_lines: list[int] = []
    for index, raw in enumerate(raw_lines):
        line_number = index + 1
        try:
            token = raw.decode("utf-8").strip()
        except UnicodeDecodeError as error:
            raise VocabError(
                f"vocab file {path} line {line_number} is not UTF-8 ({error}); re-encode the file as UTF-8"
            ) from None
        if not token:
            # The original keeps the id of a blank (or whitespace-only) line; no word is empty,
            # so that id is never produced. Kept the same here, and not a repeat.
            empty_lines.append(line_number)
        elif token in first_line:
            duplicates.append(f"{token!r} on lines {first_line[token]} and {line_number}")
        else:
            first_line[token] = line_number
        vocab.append(token)
    if empty_lines:
        logger.warning(
            "vocab file %s: line(s) %s are empty after stripping; their ids are kept and never produced",
            path,
            ", ".join(map(str, empty_lines[:10])) + (" ..." if len(empty_lines) > 10 else ""),
        )
    if duplicates:
        shown = "; ".join(duplicates[:5]) + (
            f" (and {len(duplicates) - 5} more)" if len(duplicates) > 5 else ""
        )
        raise VocabError(
            f"vocab file {path} has repeated tokens: {shown}. Ids are line numbers, so a "
            "repeated token has two ids; replace the later copy with a placeholder such as "
            "[unusedN] to keep the other ids unchanged"
        )
    missing = [token for token in SPECIAL_TOKENS if token not in first_line]
    if missing:
        raise VocabError(
            f"vocab file {path} has no {' '.join(missing)} token; add a line for each "
            "(the original vocabs have [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, "
            "[MASK]=103), or learn a vocab with `python -m pipelines.build_vocab`, which "
            "puts them first"
        )
    return vocab
