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
>>> marker = WordMarker(runs)
>>> marker.marks("中文 good 好")  # one mark per CJK character: continues a word?
[False, True, False]

`jieba` (`--word_segmenter=jieba`) is jieba's default mode (its dictionary, with HMM for
unknown words), run by `rjieba`, a Rust port of jieba that gives the same words: install
it with `pip install "bert_tf[chinese]"`. Where only the `jieba` package is installed, that
is used.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import logging
import multiprocessing
import os
import pickle
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

import numpy as np

from bert_tf.cjk import CJK_RANGES
from bert_tf.errors import UsageError

logger = logging.getLogger(__name__)

# A segmenter: text -> words as (start, end) character offsets.
Segmenter = Callable[[str], Iterable[tuple[int, int]]]

INSTALL_HINT = 'pip install "bert_tf[chinese]"'


def cjk_pattern() -> re.Pattern:
    """One character the tokenizer treats as a CJK ideograph."""
    return re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in CJK_RANGES) + "]")


def cjk_regex() -> str:
    """`cjk_pattern` in RE2's syntax, for TensorFlow's string ops."""
    return "[" + "".join(f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in CJK_RANGES) + "]"


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
        ends = list(itertools.accumulate(map(len, self._cut(text))))
        return list(zip([0, *ends[:-1]], ends, strict=True))


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


class WordMarker:
    """Turns lines into word-continuation marks for their CJK characters.

    `marks(line)` has one entry per CJK character of the line (in order): True when it is
    in the same word as the character just before it, which is also a CJK character. The
    tokenizer makes each CJK character a word of one piece, itself or [UNK] when the vocab
    lacks it, so the marks line up with those one-character words
    (`pipelines.text_dataset.word_continues`): an [UNK] stays in its word.

    An instance pickles when its segmenter does (the built-in ones do).
    """

    def __init__(self, segmenter: str | Segmenter):
        self.segmenter = get_segmenter(segmenter)
        self._cjk = cjk_pattern()
        # A segmenter that returns something else than spans fails here, not deep in tf.data.
        self.marks("中文分词测试，自然语言处理")

    def _spans(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The segmenter's spans of the lines with CJK, checked: (int64 [words, 2], line of each)."""
        per_line, line_index = [], []
        for index, line in enumerate(lines):
            if self._cjk.search(line):  # no CJK: the segmenter is not even called
                spans = self.segmenter(line)
                try:
                    per_line.append(list(spans))
                except TypeError:
                    per_line.append([spans])  # reported below
                line_index.append(index)
        count = sum(map(len, per_line))
        try:
            flat = itertools.chain.from_iterable(itertools.chain.from_iterable(per_line))
            spans = np.fromiter(flat, np.int64).reshape(count, 2)
        except (TypeError, ValueError):
            bad = next(i for i, s in zip(line_index, per_line, strict=True) if not _all_pairs(s))
            raise SegmenterError(
                f"word segmenter {self.segmenter!r} returned {per_line[line_index.index(bad)]!r} for "
                f"{lines[bad][:80]!r}; it must return a list of (start, end) character offsets"
            ) from None
        line_of = np.repeat(np.asarray(line_index, np.int64), [len(s) for s in per_line])
        first = np.concatenate([[True], line_of[1:] != line_of[:-1]])
        previous_end = np.where(first, 0, np.concatenate([[0], spans[:-1, 1]]))
        lengths = np.asarray([len(line) for line in lines], np.int64)
        bad = (spans[:, 0] < previous_end) | (spans[:, 0] >= spans[:, 1]) | (spans[:, 1] > lengths[line_of])
        if bad.any():
            where = int(np.argmax(bad))
            line = lines[line_of[where]]
            raise SegmenterError(
                f"word segmenter {self.segmenter!r} returned the span {tuple(spans[where].tolist())} for a line "
                f"of {len(line)} characters ({line[:80]!r}); spans must be increasing, not overlapping and "
                "inside the text"
            )
        return spans, line_of

    def marks(self, line: str) -> list[bool]:
        return self([line]).tolist()

    def __call__(self, lines: Sequence[str]) -> np.ndarray:
        """The marks of all lines, concatenated (the order of the block's tokens): bool [marks]."""
        # The whole block at once: "\n" between lines is not CJK, so no word crosses lines.
        code_points = np.frombuffer("\n".join(lines).encode("utf-32-le", "surrogatepass"), np.uint32)
        is_cjk = np.zeros(len(code_points), bool)
        for lo, hi in CJK_RANGES:
            is_cjk |= (code_points >= lo) & (code_points <= hi)
        if not is_cjk.any():
            return np.zeros([0], bool)
        spans, line_of = self._spans(lines)
        line_start = np.cumsum([0] + [len(line) + 1 for line in lines[:-1]])
        spans = spans + line_start[line_of][:, np.newaxis]
        spans = spans[spans[:, 1] - spans[:, 0] > 1]
        # +1 at each word's second character, -1 after its last (never the same place, as
        # spans do not overlap): the running sum is 1 on the characters that continue a word.
        inside = np.zeros(len(code_points) + 1, np.int64)
        inside[spans[:, 0] + 1] += 1
        inside[spans[:, 1]] -= 1
        continues = (np.cumsum(inside[:-1]) > 0) & np.concatenate([[False], is_cjk[:-1]])
        return continues[is_cjk]


def _all_pairs(spans) -> bool:
    try:
        return all(len(span) == 2 and all(isinstance(x, int | np.integer) for x in span) for span in spans)
    except TypeError:
        return False


Item = TypeVar("Item")
_worker_marker: WordMarker | None = None


def default_processes() -> int:
    """Segmentation processes: half the cores (the tokenizer and masking use the rest), at most 8."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cores // 2))


def _start_worker(marker: WordMarker) -> None:
    global _worker_marker
    _worker_marker = marker
    # A program ends at once after a stop or an error (bert_tf.cli.fail), without the pool's
    # shutdown: a worker ends when its parent process has gone.
    threading.Thread(target=_exit_with_parent, name="exit-with-parent", daemon=True).start()


def _exit_with_parent() -> None:
    multiprocessing.parent_process().join()
    os._exit(0)


def _mark_in_worker(lines: list[str]) -> np.ndarray:
    return _worker_marker(lines)


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
        return marker(lines_of(item))

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
                logger.warning("word segmentation workers could not run; segmenting in this process instead")
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
