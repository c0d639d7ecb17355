"""Word segmenters for whole-word masking of Chinese (and other CJK) text.

BERT's tokenizer makes every CJK ideograph a token of its own, so the `##` rule of
whole-word masking never groups the characters of a Chinese word. With a word segmenter,
each line is split into words while it is read, and every CJK character that belongs to
the same word as the character just before it is marked as continuing that word. Masking
then treats it exactly like a `##` piece: all characters of a chosen word are masked
together, with one 80/10/10 decision per word. Token ids and records are unchanged.

A segmenter is any callable from a line of text to its words as `(start, end)` character
offsets (end exclusive, in increasing order, not overlapping; gaps are allowed). Only the
grouping of adjacent CJK characters is taken from it: other text keeps the `##` rule, and a
word mixing CJK and other characters ("T恤") groups only its CJK characters. For example, a
segmenter that makes every maximal run of CJK characters one word:

>>> import re
>>> def runs(text):
...     return [match.span() for match in re.finditer("[\\u4e00-\\u9fff]+", text)]
>>> marker = WordMarker(runs, vocab=["[UNK]", "中", "文", "好"], lower_case=True)
>>> marker.marks("中文 good 好")  # one mark per CJK character in the vocab: continues a word?
[False, True, False]

`jieba` (`--word_segmenter=jieba`) is jieba's default mode (its dictionary, with HMM for
unknown words), run by `rjieba`, a Rust port of jieba that gives the same words: install
it with `pip install "bert_tf[chinese]"`. Where only the `jieba` package is installed, that
is used.
"""

from __future__ import annotations

import collections
import concurrent.futures
import multiprocessing
import os
import pickle
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

import numpy as np
from absl import logging

from bert_tf.errors import UsageError

# A segmenter: text -> words as (start, end) character offsets.
Segmenter = Callable[[str], Iterable[tuple[int, int]]]

INSTALL_HINT = 'pip install "bert_tf[chinese]"'


def cjk_pattern() -> re.Pattern:
    """One character the tokenizer treats as a CJK ideograph (each is its own token)."""
    # Imported here: worker processes unpickle a WordMarker without loading TensorFlow.
    from bert_tf.basic_tokenizer import CJK_RANGES

    return re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in CJK_RANGES) + "]")


class SegmenterError(UsageError):
    """An unknown segmenter name, a segmenter that is not installed, or bad spans."""


class JiebaSegmenter:
    """jieba's default mode: its dictionary, and its HMM for words not in it.

    Uses `rjieba` (the Rust port: the same words, more than ten times faster) when it is
    installed, else the `jieba` package. An instance pickles, so worker processes can run it.
    """

    def __init__(self):
        self._cut = None
        self._load()

    def _load(self) -> None:
        try:
            import rjieba

            self._cut = rjieba.cut
            return
        except ImportError:
            pass
        try:
            import jieba
        except ImportError:
            raise SegmenterError(
                f"--word_segmenter=jieba needs the rjieba (or jieba) package; install it with {INSTALL_HINT}"
            ) from None
        jieba.setLogLevel(60)  # no "Building prefix dict" chatter on stderr
        self._cut = jieba.lcut

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        del state
        self._load()

    def __call__(self, text: str) -> list[tuple[int, int]]:
        spans = []
        start = 0
        for word in self._cut(text):
            end = start + len(word)
            spans.append((start, end))
            start = end
        return spans


SEGMENTERS: dict[str, Callable[[], Segmenter]] = {"jieba": JiebaSegmenter}


def get_segmenter(segmenter: str | Segmenter) -> Segmenter:
    """A segmenter by name (see SEGMENTERS), or the callable itself."""
    if callable(segmenter):
        return segmenter
    if segmenter not in SEGMENTERS:
        raise SegmenterError(
            f"unknown word segmenter {segmenter!r}; known segmenters: {', '.join(sorted(SEGMENTERS))} "
            "(or pass a callable from text to (start, end) word spans from Python)"
        )
    return SEGMENTERS[segmenter]()


def setting_problems(
    segmenter: str | Segmenter | None,
    *,
    whole_word_mask: bool,
    dynamic_masking: bool = False,
    whole_word_setting: str = "--do_whole_word_mask",
) -> list[str]:
    """What is wrong with a word_segmenter setting (an empty list when nothing is).

    `whole_word_setting` is how the caller's users turn whole-word masking on.
    """
    if segmenter is None:
        return []
    name = segmenter if isinstance(segmenter, str) else getattr(segmenter, "__name__", repr(segmenter))
    problems = []
    if isinstance(segmenter, str) and segmenter not in SEGMENTERS:
        problems.append(
            f"unknown word segmenter {segmenter!r}; known segmenters: {', '.join(sorted(SEGMENTERS))}"
        )
    elif not isinstance(segmenter, str) and not callable(segmenter):
        problems.append(f"word segmenter must be a name or a callable, got {segmenter!r}")
    if not whole_word_mask:
        problems.append(
            f"word segmenter {name} only decides which characters form a whole word, so it has no effect "
            f"without whole-word masking; add {whole_word_setting} or drop it"
        )
    if dynamic_masking:
        problems.append(
            f"word segmenter {name} cannot be used with --dynamic_masking: unmasked records keep only the "
            "token ids, not the word boundaries; mask while generating, or train from the raw text"
        )
    return problems


def known_cjk_characters(vocab: Sequence[str], lower_case: bool) -> frozenset[str]:
    """The CJK characters the tokenizer turns into a vocab entry (the others become [UNK]).

    A CJK character is always one token: itself, or for uncased vocabs its NFD form, which
    differs only for the compatibility ideographs and is a single CJK character too.
    """
    pattern = cjk_pattern()
    in_vocab = frozenset(token for token in vocab if len(token) == 1 and pattern.fullmatch(token))
    if not lower_case:
        return in_vocab
    compatibility = [chr(c) for lo, hi in ((0xF900, 0xFAFF), (0x2F800, 0x2FA1F)) for c in range(lo, hi + 1)]
    return in_vocab | {c for c in compatibility if unicodedata.normalize("NFD", c) in in_vocab}


class WordMarker:
    """Turns lines into word-continuation marks for their CJK characters.

    `marks(line)` has one entry per CJK character of the line whose token is in the vocab
    (in order): True when it is in the same word as the character just before it, which
    is also a CJK character. These are exactly the tokens `token_is_cjk` (bool
    [vocab_size]) picks out of the ids, so the marks line up with the tokens. A CJK
    character missing from the vocab becomes [UNK] and gets no mark: it starts a word of
    its own (the characters after it in its word stay with it).

    An instance pickles when its segmenter does (the built-in ones do).
    """

    def __init__(self, segmenter: str | Segmenter, vocab: Sequence[str], lower_case: bool):
        self.segmenter = get_segmenter(segmenter)
        self._cjk = cjk_pattern()
        self._known = known_cjk_characters(vocab, lower_case)
        self.token_is_cjk = np.asarray(
            [len(token) == 1 and bool(self._cjk.fullmatch(token)) for token in vocab]
        )
        # A segmenter that returns something else than spans fails here, not deep in tf.data.
        self.marks("中文分词测试，自然语言处理")

    def _spans(self, line: str) -> tuple[list[int], list[int]]:
        starts, ends = [], []
        previous_end = 0
        spans = self.segmenter(line)
        if not isinstance(spans, Iterable):
            raise SegmenterError(
                f"word segmenter {self.segmenter!r} returned {spans!r} for {line[:80]!r}; "
                "it must return a list of (start, end) character offsets"
            )
        for span in spans:
            try:
                start, end = (int(x) for x in span)
            except (TypeError, ValueError):
                raise SegmenterError(
                    f"word segmenter {self.segmenter!r} returned {span!r} for {line[:80]!r}; "
                    "it must return (start, end) character offsets"
                ) from None
            if not previous_end <= start < end <= len(line):
                raise SegmenterError(
                    f"word segmenter {self.segmenter!r} returned the span {(start, end)} for a line of "
                    f"{len(line)} characters ({line[:80]!r}); spans must be increasing, not overlapping "
                    "and inside the text"
                )
            starts.append(start)
            ends.append(end)
            previous_end = end
        return starts, ends

    def marks(self, line: str) -> list[bool]:
        positions = [match.start() for match in self._cjk.finditer(line)]
        if not positions:
            return []  # no CJK: the segmenter is not even called
        starts, ends = self._spans(line)
        marks = []
        span = 0
        previous_position, previous_word = -2, None
        for position in positions:  # increasing, as the spans are: one merge pass
            while span < len(ends) and ends[span] <= position:
                span += 1
            # A position outside every span is a word of its own (a key no other has).
            word = span if span < len(starts) and starts[span] <= position else -1 - position
            if line[position] in self._known:
                marks.append(position == previous_position + 1 and word == previous_word)
            previous_position, previous_word = position, word
        return marks

    def __call__(self, lines: Sequence[str]) -> list[bool]:
        """The marks of all lines, concatenated (the order of the block's tokens)."""
        return [mark for line in lines for mark in self.marks(line)]


Item = TypeVar("Item")
_worker_marker: WordMarker | None = None


def default_processes() -> int:
    """Segmentation processes: half the cores (the tokenizer and masking use the rest), at most 8."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cores // 2))


def _start_worker(marker: WordMarker) -> None:
    global _worker_marker
    _worker_marker = marker


def _mark_in_worker(lines: list[str]) -> np.ndarray:
    return np.asarray(_worker_marker(lines), bool)


def marked(
    items: Iterable[Item],
    marker: WordMarker,
    lines_of: Callable[[Item], Sequence[str]],
    processes: int | None = None,
) -> Iterator[tuple[Item, np.ndarray]]:
    """Yields `(item, marks of lines_of(item))` in order, bool [marks] each.

    The segmentation runs in `processes` worker processes (default_processes()), a few
    blocks ahead of the consumer, so it overlaps the tokenizer's work; with one process, or
    a segmenter that does not pickle (a lambda), it runs here. Workers are spawned, not
    forked: forking a process that runs TensorFlow's threads is unsafe. If the workers
    cannot start (a script without an `if __name__ == "__main__":` guard re-runs itself in
    each of them), a warning says so and the segmentation continues here.
    """

    def here(item: Item) -> np.ndarray:
        return np.asarray(marker(lines_of(item)), bool)

    processes = default_processes() if processes is None else processes
    try:
        pickle.dumps(marker)
    except Exception:  # a local function or lambda: segment in this process
        processes = 1
    if processes <= 1:
        for item in items:
            yield item, here(item)
        return
    pool = concurrent.futures.ProcessPoolExecutor(
        processes,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(marker,),
    )
    pending: collections.deque = collections.deque()
    broken = False

    def finish(item: Item, future) -> tuple[Item, np.ndarray]:
        nonlocal broken
        if future is not None and not broken:
            try:
                return item, future.result()
            except BrokenProcessPool:
                broken = True
                logging.warning("word segmentation workers could not run; segmenting in this process instead")
        return item, here(item)

    try:
        for item in items:
            future = None
            if not broken:
                try:
                    future = pool.submit(_mark_in_worker, list(lines_of(item)))
                except BrokenProcessPool:
                    broken = True
            pending.append((item, future))
            if len(pending) > 2 * processes:  # bounded lookahead: memory stays a few blocks
                yield finish(*pending.popleft())
        while pending:
            yield finish(*pending.popleft())
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
