"""The original BERT BasicTokenizer as TensorFlow ops: clean, split, normalize, split punctuation.

The original (google-research/bert `tokenization.py`) works one Python character at a time:
it deletes control and format characters, turns whitespace into spaces, puts spaces around
CJK ideographs, splits on whitespace, lower-cases and strips accents (uncased models only)
and splits off punctuation. Here each rule is an RE2 regex over the whole batch whose
character class is generated from Python's own `unicodedata`, the tables the original
consults, so the two agree on every code point (the tests check all of them).

Lower-casing and NFD go through ICU (`tf.strings.lower`, `normalize_utf8`), which implements
the same full case mapping as `str.lower` ("İ" -> "i̇") but not Python's Unicode version:
TensorFlow's ICU misses the 60 case pairs new in Unicode 14 and tensorflow-text's ICU
decomposes, or gives a combining class to, characters Python 3.11 sees as unassigned (82
code points in all, found when the first tokenizer is built). Rows holding one of them are
split off and normalized from Python's own tables instead. A capital sigma, whose final form
depends on context, is lowered first by a regex with Python's cased / case-ignorable classes.

The tables are those of the Python that builds the tokenizer; a SavedModel keeps them.

Example:

>>> BasicTokenizer(lower_case=True).tokenize(["Héllo, WORLD!", "中文[MASK]"]).to_list()
[[b'hello', b',', b'world', b'!'], [b'\\xe4\\xb8\\xad', b'\\xe6\\x96\\x87', b'[', b'mask', b']']]
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import types
import typing
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import fileio
from bert_tf.cache import cache_dir
from bert_tf.cjk import CJK_RANGES

_ASCII_PUNCTUATION = [(33, 47), (58, 64), (91, 96), (123, 126)]
# Strings RE2 reads as UTF-8 without an invalid byte, surrogate or code point past U+10FFFF:
# exactly those that transcoding with errors="ignore" leaves unchanged (tested).
_VALID_UTF8 = r"(?s)[\x{0}-\x{D7FF}\x{E000}-\x{10FFFF}]*"


def _char_class(mask: np.ndarray) -> str:
    """An RE2 character class of the code points where the boolean `mask` [0x110000] is set."""
    mask = np.concatenate([[False], mask, [False]])
    edges = np.flatnonzero(mask[1:] != mask[:-1])  # starts and (exclusive) ends alternate
    parts = []
    for lo, end in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
        hi = end - 1
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "[" + "".join(parts) + "]"


@functools.cache
def _categories() -> list[str]:
    """Python's Unicode category of every code point (surrogates: "Cs")."""
    return [unicodedata.category(char) for char in map(chr, range(0x110000))]


def _character_masks() -> dict[str, np.ndarray]:
    """The original's character classes as boolean masks over all code points."""
    code_points = np.arange(0x110000)
    category = np.array(_categories())
    tab_newline_return = np.isin(code_points, [0x09, 0x0A, 0x0D])
    ascii_punctuation = np.zeros(0x110000, bool)
    for lo, hi in _ASCII_PUNCTUATION:
        ascii_punctuation[lo : hi + 1] = True
    cjk = np.zeros(0x110000, bool)
    for lo, hi in CJK_RANGES:
        cjk[lo : hi + 1] = True
    # Turned into a space: \t \n \r and Zs. U+2028/U+2029 (Zl/Zp) survive the
    # original's cleaning but Python's str.split() splits on them, so they are spaces too.
    space = tab_newline_return | np.isin(code_points, [0x2028, 0x2029]) | (category == "Zs")
    return {
        # Deleted without a split: NUL, U+FFFD and categories Cc/Cf (ZERO WIDTH SPACE,
        # SOFT HYPHEN, ESC, \v, \f, U+0085 ...) except \t \n \r.
        "remove": ~tab_newline_return
        & (np.isin(code_points, [0, 0xFFFD]) | (category == "Cc") | (category == "Cf")),
        "space": space,
        # The same without U+0020 itself: what has to be replaced by " " (replacing every
        # ordinary space by itself took a fifth of the tokenizer's time).
        "space_not_blank": space & (code_points != 0x20),
        "cjk": cjk,
        # All non-alphanumeric printable ASCII counts as punctuation ("$", "^", "`" are
        # symbols in Unicode); beyond ASCII only the P* categories do, so "€", "♡" stay in words.
        "punctuation": ascii_punctuation | np.char.startswith(category, "P"),
        "nonspacing_mark": category == "Mn",
    }


def _compute_character_classes() -> dict[str, str]:
    """Regexes for the character classes of the original, built from Python's `unicodedata`."""
    masks = _character_masks()
    return {
        **{name: _char_class(mask) for name, mask in masks.items()},
        "split_differs": _char_class(_split_differences(masks)),
        **_final_sigma_classes(_categories()),
    }


def _split_differences(masks: dict[str, np.ndarray]) -> np.ndarray:
    """Code points that tensorflow-text's own BERT split treats differently from the original.

    `FastWordpieceTokenizer` without `no_pretokenization` splits words on whitespace and
    punctuation itself, in one pass with WordPiece, using ICU's tables (a newer Unicode
    than Python 3.11's: 36 code points unassigned in Python are punctuation to it). Each
    code point that can remain after cleaning is probed between two letters, "a?a", with
    the vocab [UNK], a, ##a: a split gives a [UNK] a, a word char one [UNK] (or a ##a ##a).
    """
    split = masks["punctuation"] | masks["cjk"]
    probed = ~(masks["remove"] | masks["space"])
    probed[0xD800:0xE000] = False  # surrogates cannot be encoded
    code_points = np.flatnonzero(probed)
    tokenizer = tf_text.FastWordpieceTokenizer(
        vocab=["[UNK]", "a", "##a"], token_out_type=tf.int64, no_pretokenization=False
    )
    ids = tokenizer.tokenize(["a" + chr(cp) + "a" for cp in code_points.tolist()])
    lengths = ids.row_lengths().numpy()
    first = ids.to_tensor(default_value=-1, shape=[None, 3]).numpy()
    tf_text_splits = (lengths == 3) & np.all(first == [1, 0, 1], axis=1)
    in_a_word = ((lengths == 1) & (first[:, 0] == 0)) | ((lengths == 3) & np.all(first == [1, 2, 2], axis=1))
    # Anything else (a whitespace to tensorflow-text, ...) differs too.
    differs = np.zeros(0x110000, bool)
    differs[code_points] = ~((tf_text_splits & split[code_points]) | (in_a_word & ~split[code_points]))
    return differs


def _final_sigma_classes(categories: list[str]) -> dict[str, str]:
    """Character classes for Python's final-sigma rule, read off `str.lower` itself.

    Python lower-cases U+03A3 to "ς" when a cased letter precedes it (skipping
    case-ignorable characters) and none follows (same skipping). ICU does the same, but with
    its own, possibly older, tables of cased and case-ignorable characters; so the decision is
    made here by a regex with Python's classes, probed from `str.lower`:
    "xΣ" ends in "ς" exactly when x is cased and not case-ignorable, "AxΣ" when x is either.
    """
    cased = np.zeros(0x110000, bool)
    cased_or_ignorable = np.zeros(0x110000, bool)
    for code_point, category in enumerate(categories):
        if category not in ("Cn", "Co", "Cs"):  # unassigned and private-use: neither
            char = chr(code_point)
            cased[code_point] = (char + "\u03a3").lower()[-1] == "\u03c2"
            cased_or_ignorable[code_point] = ("A" + char + "\u03a3").lower()[-1] == "\u03c2"
    return {
        "cased_not_ignorable": _char_class(cased),
        "case_ignorable": _char_class(cased_or_ignorable & ~cased),
        "neither_cased_nor_ignorable": _char_class(~cased_or_ignorable),
    }


class _UncasedExceptions(typing.NamedTuple):
    # Code points whose uncased form ICU gets wrong (rows holding one take the exact path).
    icu_disagrees: tuple[int, ...]
    # Python's uncased form of every code point it changes, as a ragged table:
    # keys[i] -> values[row_starts[i]:row_starts[i + 1]] (empty for a dropped mark).
    keys: tuple[int, ...]
    row_starts: tuple[int, ...]
    values: tuple[int, ...]


def _compute_uncased_exceptions(nonspacing_mark: str) -> _UncasedExceptions:
    """Where ICU's uncased normalization disagrees with Python's, and Python's own table.

    ICU in TensorFlow and tensorflow-text is not Python's Unicode version: with Python 3.11
    (Unicode 14) `tf.strings.lower` misses 60 case pairs (U+2C2F, the Vithkuqi capitals ...)
    and `normalize_utf8` decomposes characters that Python still sees as unassigned
    (U+16121 ...). Every code point is run through both, each on its own: they are joined by
    spaces, and a space is a starter (combining class 0) that is neither cased nor
    case-ignorable, so it stops both canonical reordering and the final-sigma context.
    `nonspacing_mark` is the "nonspacing_mark" regex of `_compute_character_classes`.
    """
    categories = _categories()
    # NUL (ICU stops at it) is deleted before this step; the space is the separator.
    code_points = [cp for cp in range(1, 0x110000) if cp != 0x20 and categories[cp] != "Cs"]
    joined = " ".join(map(chr, code_points))
    originals = joined.split(" ")
    marks = dict.fromkeys(cp for cp, category in enumerate(categories) if category == "Mn")
    python = unicodedata.normalize("NFD", joined.lower()).translate(marks).split(" ")
    icu = tf_text.normalize_utf8(tf.strings.lower(joined, encoding="utf-8"), "NFD")
    icu = tf.strings.regex_replace(icu, nonspacing_mark, "")
    icu = icu.numpy().decode("utf-8").split(" ")
    disagree = {cp for cp, ours, theirs in zip(code_points, python, icu, strict=True) if ours != theirs}
    # Canonical reordering: a mark ICU gives a combining class that Python does not (a mark
    # newer than Python's Unicode) moves between U+0345 (class 240) and U+0334 (class 1)
    # under ICU only, and would be reordered against spacing marks that survive uncasing.
    # Combining classes never change once assigned, so only characters unassigned in Python
    # (in the planes where characters are being assigned: 0-3 and 14) or combining in
    # Python can differ.
    candidates = [
        cp
        for cp in code_points
        if (categories[cp] == "Cn" and (cp < 0x40000 or 0xE0000 <= cp < 0xF0000))
        or unicodedata.combining(chr(cp))
    ]
    probe = " ".join("\u0345" + chr(cp) + "\u0334" for cp in candidates)
    python_probe = unicodedata.normalize("NFD", probe).split(" ")
    icu_probe = tf_text.normalize_utf8(probe, "NFD").numpy().decode("utf-8").split(" ")
    disagree.update(
        cp for cp, ours, theirs in zip(candidates, python_probe, icu_probe, strict=True) if ours != theirs
    )
    keys, values, starts = [], [], [0]
    for code_point, original, normalized in zip(code_points, originals, python, strict=True):
        if normalized != original:
            keys.append(code_point)
            values.extend(map(ord, normalized))
            starts.append(len(values))
    return _UncasedExceptions(tuple(sorted(disagree)), tuple(keys), tuple(starts), tuple(values))


def _code_fingerprint(code: types.CodeType) -> str:
    """The instructions, names and constants of compiled code (nested code included)."""
    constants = [
        _code_fingerprint(constant) if isinstance(constant, types.CodeType) else repr(constant)
        for constant in code.co_consts
    ]
    return repr((code.co_code, code.co_names, constants))


def _tables_key() -> str:
    """What the tables depend on: Python's and both ICUs' Unicode data, and the code above.

    The code is taken as compiled, so no source file is needed.
    """
    code = "".join(
        _code_fingerprint(getattr(function, "__wrapped__", function).__code__)
        for function in (
            _char_class,
            _categories,
            _character_masks,
            _compute_character_classes,
            _split_differences,
            _final_sigma_classes,
            _compute_uncased_exceptions,
        )
    )
    parts = [sys.version, unicodedata.unidata_version, tf.__version__, tf_text.__version__, code, CJK_RANGES]
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()[:16]


@functools.cache
def _tables() -> tuple[dict[str, str], _UncasedExceptions]:
    """The character classes and uncased exceptions, from the cache when it has them.

    Computing them walks all 1.1M code points through Python and ICU (about a second and a
    half); they depend only on the versions in `_tables_key`, so the first tokenizer built
    on a machine stores them in the bert_tf cache (see `bert_tf.cache`) and later ones read
    them back. An unreadable or unwritable cache only costs the recomputation.
    """
    try:
        path = cache_dir() / f"unicode_tables-{_tables_key()}.json"
    except OSError:
        path = None
    if path is not None and path.exists():
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            return cached["classes"], _UncasedExceptions(*(tuple(v) for v in cached["uncased"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged file: recompute and replace it
    classes = _compute_character_classes()
    uncased = _compute_uncased_exceptions(classes["nonspacing_mark"])
    if path is not None:
        try:  # whole or absent, for a concurrent reader
            fileio.write_text(str(path), json.dumps({"classes": classes, "uncased": list(uncased)}))
        except OSError:
            pass
    return classes, uncased


def _character_classes() -> dict[str, str]:
    """Regexes for the character classes of the original (see `_compute_character_classes`)."""
    return _tables()[0]


def _uncased_exceptions() -> _UncasedExceptions:
    """ICU's disagreements and Python's uncased table (see `_compute_uncased_exceptions`)."""
    return _tables()[1]


def apply_to_batch(batch_fn, texts):
    """`batch_fn` ([batch] strings -> ragged [batch, ...]) on a batch, or on one string.

    A scalar string gives the single row (of each result, when `batch_fn` returns a tuple);
    any other rank than 0 or 1 is a user error.
    """
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    if texts.shape.rank == 0:
        result = batch_fn(texts[tf.newaxis])
        return tuple(part[0] for part in result) if isinstance(result, tuple) else result[0]
    if texts.shape.rank != 1:
        raise ValueError(
            f"tokenize takes a batch of strings of shape [batch] (or one string); got shape "
            f"{texts.shape}. Reshape it to [-1] first"
        )
    return batch_fn(texts)


def by_rows(texts: tf.Tensor, chosen: tf.Tensor, if_chosen, otherwise):
    """`if_chosen` on the rows where `chosen`, `otherwise` on the rest, rows kept in place.

    Both take tf.string [rows] and return [rows, ...], dense or ragged alike.
    """
    partitions = tf.cast(chosen, tf.int32)
    row_index = tf.dynamic_partition(tf.range(tf.size(texts)), partitions, 2)
    other_rows, chosen_rows = tf.dynamic_partition(texts, partitions, 2)
    results = [otherwise(other_rows), if_chosen(chosen_rows)]
    if isinstance(results[0], tf.RaggedTensor):  # dynamic_stitch takes dense tensors only
        return tf.gather(tf.concat(results, axis=0), tf.math.invert_permutation(tf.concat(row_index, axis=0)))
    return tf.dynamic_stitch(row_index, results)


class BasicTokenizer(tf.Module):
    """Splits text into the words of the original BasicTokenizer (before WordPiece).

    Args:
      lower_case: True for uncased models (lower-case, NFD, drop Mn), False for cased.

    `tokenize(texts)` takes strings of shape [batch] (or one string) and returns the words,
    tf.string ragged [batch, (words)] (or [words]). `split_with_offsets(texts)` splits
    without normalizing and also returns where each word is in the input.

    Example:

    >>> BasicTokenizer(lower_case=False).tokenize("Café\u200b au lait…").numpy().tolist()
    [b'Caf\\xc3\\xa9', b'au', b'lait', b'\\xe2\\x80\\xa6']
    >>> words, begin, end = BasicTokenizer(lower_case=False).split_with_offsets("Café\u200b au lait…")
    >>> words.numpy().tolist(), begin.numpy().tolist(), end.numpy().tolist()
    ([b'Caf\\xc3\\xa9', b'au', b'lait', b'\\xe2\\x80\\xa6'], [0, 9, 12, 16], [5, 11, 16, 19])
    """

    def __init__(self, lower_case: bool = True, name: str | None = None):
        super().__init__(name=name)
        self._lower_case = bool(lower_case)
        self._classes = _character_classes()
        if self._lower_case:
            exceptions = _uncased_exceptions()
            self._uncased_keys = tf.constant(exceptions.keys, tf.int32)
            self._uncased_values = tf.RaggedTensor.from_row_starts(
                tf.constant(exceptions.values, tf.int32), tf.constant(exceptions.row_starts, tf.int64)
            )
            # The characters ICU normalizes differently from Python.
            exact = "".join(f"\\x{{{cp:X}}}" for cp in exceptions.icu_disagrees)
            self._exact_path_regex = "(?s).*[" + exact + "].*"

    @property
    def lower_case(self) -> bool:
        return self._lower_case

    def character_class(self, name: str) -> str:
        """One of the RE2 character classes the rules use ("punctuation", "split_differs", ...)."""
        return self._classes[name]

    def tokenize(self, texts) -> tf.RaggedTensor | tf.Tensor:
        """Words: tf.string ragged [batch, (words)] for a batch, [words] for one string."""
        return apply_to_batch(self._split_words, texts)

    def split_with_offsets(self, texts) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
        """The words as split, not normalized, and where they are: (words, begin, end).

        `words` are those of `tokenize` with `lower_case=False` (cleaned and split, never
        lower-cased or stripped of accents, whatever this tokenizer's `lower_case`): tf.string
        ragged [batch, (words)]. `begin`, `end` are int64 byte offsets into the input string
        as given, [batch, (words)] ([words] each for one string): `begin` is where the word's
        first character starts and `end` where its last one ends, so `text[begin:end]`
        never starts or ends with a character the original deletes. It can hold such
        characters inside (control and format characters, U+0000, U+FFFD, undecodable bytes:
        "a\u200bb" is the one word "ab" spanning 5 bytes); the word is that span with
        them deleted.
        """
        return apply_to_batch(self._split_with_offsets, texts)

    def _split_with_offsets(self, texts: tf.Tensor):  # [batch] -> 3 x [batch, (words)]
        classes = self._classes
        # One string per character, with its byte offset in the input. Undecodable bytes are
        # skipped, as unicode_transcode does in _split_words, and the offsets stay the input's.
        chars, starts = tf.strings.unicode_split_with_offsets(texts, "UTF-8", errors="ignore")
        flat, flat_starts = chars.flat_values, starts.flat_values

        def matches(name: str) -> tf.Tensor:
            return tf.strings.regex_full_match(flat, classes[name])

        # The rules of _split_words, one character at a time: deleted characters vanish
        # (no split), whitespace splits, CJK ideographs and punctuation are words alone.
        deleted = matches("remove")
        space = ~deleted & matches("space")
        alone = ~deleted & ~space & (matches("cjk") | matches("punctuation"))
        # From here on only the characters that are not deleted, of all rows in one list.
        remaining = ~deleted
        row_of = tf.boolean_mask(chars.value_rowids(), remaining)
        flat, flat_starts = tf.boolean_mask(flat, remaining), tf.boolean_mask(flat_starts, remaining)
        space, alone = tf.boolean_mask(space, remaining), tf.boolean_mask(alone, remaining)
        # A word begins at a character that is not a space and is a word alone, follows a
        # space or a word alone, or is the first of its row.
        after_break = tf.concat([[True], (space | alone)[:-1]], axis=0)
        new_row = tf.concat([[True], tf.not_equal(row_of[1:], row_of[:-1])], axis=0)
        begins_word = ~space & (alone | after_break | new_row)
        word_id = tf.cumsum(tf.cast(begins_word, tf.int64)) - 1
        num_words = tf.reduce_sum(tf.cast(begins_word, tf.int64))
        in_word = ~space
        word_of_char = tf.boolean_mask(word_id, in_word)
        words = tf.strings.unsorted_segment_join(tf.boolean_mask(flat, in_word), word_of_char, num_words)
        char_end = flat_starts + tf.cast(tf.strings.length(flat), tf.int64)
        begin = tf.boolean_mask(flat_starts, begins_word)
        end = tf.math.unsorted_segment_max(tf.boolean_mask(char_end, in_word), word_of_char, num_words)
        rows = tf.boolean_mask(row_of, begins_word)
        batch = tf.shape(texts, out_type=tf.int64)[0]

        def per_text(values: tf.Tensor) -> tf.RaggedTensor:
            return tf.RaggedTensor.from_value_rowids(values, rows, nrows=batch)

        return per_text(words), per_text(begin), per_text(end)

    def _split_words(self, texts: tf.Tensor) -> tf.RaggedTensor:  # [batch] -> [batch, (words)]
        return self.split_normalized(self.normalize(texts))

    def split_normalized(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """The words of `normalize`d texts: split off punctuation, split on " "."""
        texts = tf.strings.regex_replace(texts, "(" + self._classes["punctuation"] + ")", r" \1 ")
        # Only " " is left as whitespace here, so an ASCII whitespace split is str.split().
        return tf.strings.split(texts)

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """[batch] -> [batch]: the text the original splits into words, with " " its only whitespace.

        Invalid bytes and control characters dropped, whitespace made " ", CJK ideographs
        spaced, and for uncased models lower-cased with accents stripped.
        """
        classes = self._classes
        # Undecodable bytes are dropped, like bytes.decode("utf-8", "ignore"); the check is
        # ten times cheaper than the transcoding, which valid text (nearly all) skips.
        valid = tf.reduce_all(tf.strings.regex_full_match(texts, _VALID_UTF8))
        texts = tf.cond(
            valid,
            lambda: texts,
            lambda: tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="ignore"),
        )
        texts = tf.strings.regex_replace(texts, classes["remove"], "")
        texts = tf.strings.regex_replace(texts, classes["space_not_blank"], " ")
        texts = tf.strings.regex_replace(texts, "(" + classes["cjk"] + ")", r" \1 ")
        if self._lower_case:
            texts = self._uncased(texts)
        return texts

    def _uncased(self, texts: tf.Tensor) -> tf.Tensor:
        """Lower-case, NFD, drop Mn. ASCII rows (most of an English corpus) need only the first."""
        ascii_only = tf.strings.regex_full_match(texts, "[\\x00-\\x7f]*")
        return by_rows(texts, ascii_only, tf.strings.lower, self._uncased_unicode)

    def _uncased_unicode(self, texts: tf.Tensor) -> tf.Tensor:
        """Uncasing any text: ICU for most rows, Python's own tables where ICU differs."""
        # Capital sigma: final or not is decided here with Python's classes, so ICU never has to.
        has_sigma = tf.reduce_any(tf.strings.regex_full_match(texts, "(?s).*\u03a3.*"))
        texts = tf.cond(has_sigma, lambda: self._lower_capital_sigma(texts), lambda: texts)

        def icu(rows: tf.Tensor) -> tf.Tensor:
            return tf_text.normalize_utf8(tf.strings.lower(rows, encoding="utf-8"), "NFD")

        # Rows with a character ICU normalizes differently from Python are rare; they are
        # normalized exactly, the rest go through ICU.
        exact = tf.strings.regex_full_match(texts, self._exact_path_regex)
        texts = by_rows(texts, exact, self._uncased_exactly, icu)
        return tf.strings.regex_replace(texts, self._classes["nonspacing_mark"], "")

    def _lower_capital_sigma(self, texts: tf.Tensor) -> tf.Tensor:
        """Σ -> ς where Python's `str.lower` gives the final form, σ elsewhere."""
        classes = self._classes
        cased, ignorable = classes["cased_not_ignorable"], classes["case_ignorable"]
        # cased (ignorable)* Σ (ignorable)* and then a character neither cased nor ignorable, or the end.
        final_sigma = (
            f"({cased}{ignorable}*)\\x{{3A3}}({ignorable}*(?:{classes['neither_cased_nor_ignorable']}|$))"
        )
        texts = tf.strings.regex_replace(texts, final_sigma, "\\1\u03c2\\2")
        return tf.strings.regex_replace(texts, "\u03a3", "\u03c3")

    def _uncased_exactly(self, texts: tf.Tensor) -> tf.Tensor:
        """Python's uncased normalization, character by character from a table.

        Canonical reordering is not done: it only matters among combining marks, and those of
        category Mn are dropped anyway. What is left as is: spacing marks with a nonzero
        combining class (25 in Unicode 14, such as U+1D165) out of canonical order in a row
        that also holds a character ICU and Python disagree on.
        """
        code_points = tf.strings.unicode_decode(texts, "UTF-8")  # [batch, (chars)]
        flat = code_points.flat_values
        keys = self._uncased_keys
        position = tf.minimum(tf.searchsorted(keys, flat), tf.size(keys) - 1)
        in_table = tf.equal(tf.gather(keys, position), flat)
        # Each character becomes 0..3 characters: its table row (row len(keys) is an empty
        # row for characters not in the table) followed by itself when not in the table.
        table_part = tf.gather(self._uncased_values, tf.where(in_table, position, tf.size(keys)))
        not_in_table = tf.logical_not(in_table)
        self_part = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(flat, not_in_table), tf.cast(not_in_table, tf.int64)
        )
        mapped = tf.concat([table_part, self_part], axis=1)  # [chars, (0..3)]
        return tf.strings.unicode_encode(code_points.with_flat_values(mapped).merge_dims(1, 2), "UTF-8")
