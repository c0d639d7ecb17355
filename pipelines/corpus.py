"""The embedded default corpus: the text of Python's own documentation.

Every CPython ships `pydoc_data.topics`, about 0.5 MB of English prose about the
language. It is turned into the pretraining corpus format of the original BERT
release: one sentence per line, a blank line between documents. Each section of a
topic is a document; indented blocks (code and grammar) are dropped because they
are not sentences.

Example:

>>> from pipelines import corpus
>>> documents = list(corpus.documents())
>>> len(documents) > 200 and all(documents)
True
>>> path = corpus.write_corpus("/tmp/pydoc_corpus.txt")
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

# A heading is a line followed by a line of one repeated punctuation character.
_UNDERLINE = re.compile(r"^([*=\-~^\"'+#])\1{2,}\s*$")
# A sentence ends with . ! or ? followed by whitespace and an upper-case letter, a
# quote or a digit. Abbreviations such as "e.g." are followed by lower case and so
# are not split, which is the failure mode that matters for NSP pairs.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"(])")
_MIN_SENTENCE_CHARS = 3


def _topics() -> dict[str, str]:
    from pydoc_data import topics

    return topics.topics


def _sections(text: str) -> Iterator[list[str]]:
    """Splits a topic into sections at headings; yields lists of prose paragraphs."""
    lines = text.splitlines()
    paragraphs: list[str] = []
    current: list[str] = []

    def flush_paragraph() -> None:
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        next_line = lines[index + 1] if index + 1 < len(lines) else ""
        if line.strip() and _UNDERLINE.match(next_line):
            flush_paragraph()
            if paragraphs:
                yield paragraphs
                paragraphs = []
            index += 2
            continue
        if not line.strip() or line.startswith((" ", "\t")) or _UNDERLINE.match(line):
            # Blank lines end a paragraph; indented lines are code, grammar or
            # tables rather than prose.
            flush_paragraph()
        else:
            current.append(line.strip())
        index += 1
    flush_paragraph()
    if paragraphs:
        yield paragraphs


def split_sentences(paragraph: str) -> list[str]:
    """Splits a paragraph into sentences with a conservative rule."""
    paragraph = " ".join(paragraph.split())
    return [s for s in _SENTENCE_END.split(paragraph) if len(s) >= _MIN_SENTENCE_CHARS]


def documents() -> Iterator[list[str]]:
    """Yields documents of the embedded corpus, each a list of sentences, in a fixed order."""
    topics = _topics()
    for name in sorted(topics):
        for paragraphs in _sections(topics[name]):
            sentences = [s for p in paragraphs for s in split_sentences(p)]
            if sentences:
                yield sentences


def corpus_text() -> str:
    """The whole corpus in the original format (sentence per line, blank line between documents)."""
    return "\n\n".join("\n".join(doc) for doc in documents()) + "\n"


def write_corpus(path: str | os.PathLike, repeat: int = 1) -> str:
    """Writes the corpus (optionally repeated, for benchmarks) to `path`; returns the path.

    The file is written under a temporary name and renamed, so an interrupted call never
    leaves a truncated corpus behind.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    # lazy: importing this module loads no TensorFlow (fileio does, on first use)
    from bert_tf import fileio

    path = os.fspath(path)
    text = corpus_text()
    with fileio.writing(path) as handle:
        for copy in range(repeat):
            if copy:
                handle.write("\n")
            handle.write(text)
    return path
