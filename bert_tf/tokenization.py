"""WordPiece tokenization in the TensorFlow graph, id for id the original BERT `FullTokenizer`.

The original tokenizer (google-research/bert `tokenization.py`) is Python: it cleans the
text, spaces out CJK ideographs, splits on whitespace, lower-cases and strips accents
(uncased models only), splits off punctuation and then runs greedy longest-match-first
WordPiece. `BertTokenizer` runs the same rules as a handful of TensorFlow string ops, so it
works eagerly, inside `tf.data.Dataset.map`, inside a `tf.function` and in a SavedModel.

Why not tensorflow-text's own `BertTokenizer` or `FastBertTokenizer` end to end: both
normalize differently from the original (`case_fold_utf8` is NFKC case folding, so "…"
becomes "...", "ﬁ" becomes "fi"; control characters become split points instead of being
deleted). Measured on the embedded corpus, `FastBertTokenizer` disagrees with the original
on 24 of the first 3000 sentences. So the basic tokenization is written here with RE2 regexes
whose character classes are generated from Python's own `unicodedata` (the tables the
original consults), and only the WordPiece step is tensorflow-text's
`FastWordpieceTokenizer` (linear-time MaxMatch, the same result as the original's greedy
search).

Lower-casing and NFD go through ICU (`tf.strings.lower`, `normalize_utf8`). ICU implements
the same full case mapping as Python's `str.lower` (final sigma, "İ" -> "i̇") but may know an
older Unicode version than Python; the few characters where the two disagree are found when
the tokenizer is built and lower-cased by a small lookup instead.

Example:

>>> import tensorflow as tf
>>> tokenizer = BertTokenizer("tests/fixtures/bert_uncased_vocab.txt")
>>> tokenizer.tokenize(["Hello, World!"]).to_list()
[[7592, 1010, 2088, 999]]
>>> tokenizer.detokenize(tokenizer.tokenize(["unaffable [MASK]"])).numpy().tolist()
[b'unaffable [ mask ]']
"""

from __future__ import annotations

import functools
import os
import typing
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# The original WordpieceTokenizer maps a word longer than this many characters to [UNK].
MAX_CHARS_PER_WORD = 200

# Code point ranges the original treats as CJK ideographs (each gets spaces around it).
# Hangul and kana are not in them: they are written with spaces between words.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


class VocabError(ValueError):
    """A vocab file that cannot be used: missing, empty, ambiguous or lacking special tokens."""


def load_vocab(vocab_file: str | os.PathLike) -> list[str]:
    """Reads a WordPiece vocab file: one token per line, id = line number (0-based).

    Lines are stripped of surrounding whitespace, as the original `load_vocab` does. Unlike
    the original, problems that would silently give wrong ids are errors: a missing or empty
    file, a non-UTF-8 line, an empty line, a token on two lines (the original keeps the last
    id, so every earlier id of that token is never produced), or a missing special token.

    Example:

    >>> vocab = load_vocab("tests/fixtures/bert_uncased_vocab.txt")
    >>> len(vocab), vocab.index("[CLS]")
    (30522, 101)
    """
    path = os.fspath(vocab_file)
    if not tf.io.gfile.exists(path):
        raise VocabError(
            f"vocab file not found: {path}; pass the vocab.txt that came with the checkpoint, "
            "or learn one with `python -m pipelines.build_vocab`"
        )
    with tf.io.gfile.GFile(path, "rb") as handle:
        data = handle.read()
    if not data.strip():
        raise VocabError(f"vocab file is empty: {path}; it needs one token per line")
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":  # The file ends with a newline: no token after it.
        raw_lines.pop()
    vocab: list[str] = []
    first_line: dict[str, int] = {}
    duplicates: list[str] = []
    for index, raw in enumerate(raw_lines):
        line_number = index + 1
        try:
            token = raw.decode("utf-8").strip()
        except UnicodeDecodeError as error:
            raise VocabError(
                f"vocab file {path} line {line_number} is not UTF-8 ({error}); re-encode the file as UTF-8"
            ) from None
        if not token:
            raise VocabError(
                f"vocab file {path} line {line_number} is empty; ids are line numbers, so "
                "put a placeholder token such as [unused{line_number}] there instead of "
                "deleting the line"
            )
        if token in first_line:
            duplicates.append(f"{token!r} on lines {first_line[token]} and {line_number}")
        else:
            first_line[token] = line_number
        vocab.append(token)
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


# --- Character classes of the original rules, as RE2 regexes ---------------------------


_ASCII_PUNCTUATION = [(33, 47), (58, 64), (91, 96), (123, 126)]


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
def _character_classes() -> dict[str, str]:
    """Regexes for the character classes of the original, built from Python's `unicodedata`."""
    code_points = np.arange(0x110000)
    category = np.array(
        ["Cs" if 0xD800 <= cp <= 0xDFFF else unicodedata.category(chr(cp)) for cp in range(0x110000)]
    )
    tab_newline_return = np.isin(code_points, [0x09, 0x0A, 0x0D])
    ascii_punctuation = np.zeros(0x110000, bool)
    for lo, hi in _ASCII_PUNCTUATION:
        ascii_punctuation[lo : hi + 1] = True
    cjk = np.zeros(0x110000, bool)
    for lo, hi in CJK_RANGES:
        cjk[lo : hi + 1] = True
    return {
        # Deleted without a split: NUL, U+FFFD and categories Cc/Cf (ZERO WIDTH SPACE,
        # SOFT HYPHEN, ESC, \v, \f, U+0085 ...) except \t \n \r.
        "remove": _char_class(
            ~tab_newline_return
            & (np.isin(code_points, [0, 0xFFFD]) | (category == "Cc") | (category == "Cf"))
        ),
        # Turned into a space: \t \n \r and Zs. U+2028/U+2029 (Zl/Zp) survive the
        # original's cleaning but Python's str.split() splits on them, so they are spaces too.
        "space": _char_class(
            tab_newline_return | np.isin(code_points, [0x2028, 0x2029]) | (category == "Zs")
        ),
        "cjk": _char_class(cjk),
        # All non-alphanumeric printable ASCII counts as punctuation ("$", "^", "`" are
        # symbols in Unicode); beyond ASCII only the P* categories do, so "€", "♡" stay in words.
        "punctuation": _char_class(ascii_punctuation | np.char.startswith(category, "P")),
        "nonspacing_mark": _char_class(category == "Mn"),
        **_final_sigma_classes(category.tolist()),
    }


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


def _uncased_one_by_one(code_points: list[int], lower, nfd, strip_marks) -> list[str]:
    """Uncased normalization of each code point on its own, done on one space-joined string.

    A space is a starter (combining class 0) and neither cased nor case-ignorable, so it stops
    both canonical reordering and the final-sigma context: each character is normalized alone.
    """
    joined = " ".join(chr(code_point) for code_point in code_points)
    return strip_marks(nfd(lower(joined))).split(" ")


@functools.cache
def _uncased_exceptions() -> _UncasedExceptions:
    """Where ICU's uncased normalization disagrees with Python's, and Python's own table.

    ICU in TensorFlow and tensorflow-text is not Python's
    Unicode version: with Python 3.11 (Unicode 14) `tf.strings.lower` misses 60 case pairs
    (U+2C2F, the Vithkuqi capitals ...) and `normalize_utf8` decomposes characters that
    Python still sees as unassigned (U+16121...). Each code point is run through both.
    """
    # NUL (ICU stops at it) is deleted before this step; the space is the separator.
    code_points = [cp for cp in range(1, 0x110000) if cp != 0x20 and not 0xD800 <= cp <= 0xDFFF]
    marks = _character_classes()["nonspacing_mark"]
    mark_table = dict.fromkeys(
        cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)) == "Mn"
    )
    python = _uncased_one_by_one(
        code_points, str.lower, lambda t: unicodedata.normalize("NFD", t), lambda t: t.translate(mark_table)
    )
    icu = _uncased_one_by_one(
        code_points,
        lambda t: tf.strings.lower(t, encoding="utf-8"),
        lambda t: tf_text.normalize_utf8(t, "NFD"),
        lambda t: tf.strings.regex_replace(t, marks, "").numpy().decode("utf-8"),
    )
    disagree = tuple(cp for cp, ours, theirs in zip(code_points, python, icu, strict=True) if ours != theirs)
    keys, values, starts = [], [], [0]
    for code_point, normalized in zip(code_points, python, strict=True):
        if normalized != chr(code_point):
            keys.append(code_point)
            values.extend(ord(char) for char in normalized)
            starts.append(len(values))
    return _UncasedExceptions(disagree, tuple(keys), tuple(starts), tuple(values))


class BertTokenizer(tf.Module):
    """The original BERT `FullTokenizer` (BasicTokenizer + WordPiece) as TensorFlow ops.

    Args:
      vocab_file: a WordPiece vocab, one token per line (see `load_vocab`).
      lower_case: True for uncased models (lower-case, NFD, strip accents), False for cased.

    `tokenize` takes a batch of strings (a Python list, numpy array or `tf.Tensor`, shape
    [batch]; a scalar string gives one row) and returns int64 ids, ragged [batch, (pieces)].
    `tokenize_with_words` keeps the words: ragged [batch, (words), (pieces)].
    `detokenize` turns ids back into text (pieces joined, "##" continuations glued on).

    Example:

    >>> tokenizer = BertTokenizer("tests/fixtures/bert_uncased_vocab.txt", lower_case=True)
    >>> tokenizer.tokenize(["Héllo wörld", ""]).to_list()
    [[7592, 2088], []]
    >>> tokenizer.tokenize_with_words(["unaffable"]).to_list()
    [[[14477, 20961, 3468]]]
    >>> tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id
    (101, 102, 103)
    """

    def __init__(self, vocab_file: str | os.PathLike, lower_case: bool = True, name: str | None = None):
        super().__init__(name=name)
        self._vocab_file = os.fspath(vocab_file)
        self._lower_case = bool(lower_case)
        self._vocab = load_vocab(self._vocab_file)
        ids = {token: index for index, token in enumerate(self._vocab)}
        self._special_ids = {token: ids[token] for token in SPECIAL_TOKENS}
        self._classes = _character_classes()
        if self._lower_case:
            exceptions = _uncased_exceptions()
            self._uncased_keys = tf.constant(exceptions.keys, tf.int32)
            self._uncased_values = tf.RaggedTensor.from_row_starts(
                tf.constant(exceptions.values, tf.int32), tf.constant(exceptions.row_starts, tf.int64)
            )
            # Capital sigma (final or not depends on context) and what ICU gets wrong.
            exact = (0x3A3, *exceptions.icu_disagrees)
            self._exact_path_regex = "(?s).*[" + "".join(f"\\x{{{cp:X}}}" for cp in exact) + "].*"
        # Words longer than MAX_CHARS_PER_WORD are replaced by the literal "[UNK]" before
        # WordPiece (see _split_words), so the byte limit here never decides anything.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self._vocab,
            suffix_indicator="##",
            max_bytes_per_word=4 * MAX_CHARS_PER_WORD + 1,
            token_out_type=tf.int64,
            unknown_token="[UNK]",
            no_pretokenization=True,
        )
        self._vocab_tensor = tf.constant(self._vocab)

    # --- properties ------------------------------------------------------------------

    @property
    def vocab(self) -> list[str]:
        return list(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def vocab_file(self) -> str:
        return self._vocab_file

    @property
    def lower_case(self) -> bool:
        return self._lower_case

    @property
    def pad_id(self) -> int:
        return self._special_ids["[PAD]"]

    @property
    def unk_id(self) -> int:
        return self._special_ids["[UNK]"]

    @property
    def cls_id(self) -> int:
        return self._special_ids["[CLS]"]

    @property
    def sep_id(self) -> int:
        return self._special_ids["[SEP]"]

    @property
    def mask_id(self) -> int:
        return self._special_ids["[MASK]"]

    # --- public API --------------------------------------------------------------------

    def tokenize(self, texts) -> tf.RaggedTensor | tf.Tensor:
        """Ids of the WordPiece tokens: int64, ragged [batch, (pieces)] ([pieces] for a scalar)."""
        return self.tokenize_with_words(texts).merge_dims(-2, -1)

    def tokenize_with_words(self, texts) -> tf.RaggedTensor:
        """Ids grouped by word (a BasicTokenizer token): ragged [batch, (words), (pieces)].

        Every word has at least one piece ([UNK] when it cannot be covered).
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank == 0:
            return self._tokenize_batch(texts[tf.newaxis])[0]
        if texts.shape.rank != 1:
            raise ValueError(
                f"tokenize takes a batch of strings of shape [batch] (or one string); got shape "
                f"{texts.shape}. Reshape it to [-1] first"
            )
        return self._tokenize_batch(texts)

    def split_words(self, texts) -> tf.RaggedTensor:
        """The original BasicTokenizer's words (cleaned, split, normalized): ragged string [batch, (words)]."""
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank == 0:
            return self._split_words(texts[tf.newaxis])[0]
        return self._split_words(texts)

    def detokenize(self, ids) -> tf.Tensor:
        """Text from ids: pieces joined by spaces, "##" continuations glued to the previous piece.

        Accepts ids of shape [batch, (pieces)] or [batch, (words), (pieces)], ragged or dense;
        [PAD] ids are dropped, so a padded dense batch gives the same text as the ragged one.
        Returns tf.string [batch]. Text is normalized as tokenized (lower case for uncased
        vocabs, punctuation spaced), so it is not always the input text.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
            if ids.shape.rank == 1:
                ids = ids[tf.newaxis]
            ids = tf.RaggedTensor.from_tensor(ids)
        if ids.ragged_rank > 1:
            ids = ids.merge_dims(1, -1)
        ids = tf.ragged.boolean_mask(ids, tf.not_equal(ids, tf.cast(self.pad_id, ids.dtype)))
        pieces = tf.gather(self._vocab_tensor, ids)
        text = tf.strings.reduce_join(pieces, axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " ##", "")

    # --- the graph ---------------------------------------------------------------------

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def _tokenize_batch(self, texts: tf.Tensor) -> tf.RaggedTensor:
        words = self._split_words(texts)  # [batch, (words)]
        # The original maps a word of more than MAX_CHARS_PER_WORD characters to [UNK]; the
        # literal "[UNK]" is a vocab entry and can never be a real word (brackets are split off).
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
        words = words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))
        return self._wordpiece.tokenize(words)  # [batch, (words), (pieces)]

    def _split_words(self, texts: tf.Tensor) -> tf.RaggedTensor:
        classes = self._classes
        # Undecodable bytes are dropped, like bytes.decode("utf-8", "ignore").
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="ignore")
        texts = tf.strings.regex_replace(texts, classes["remove"], "")
        texts = tf.strings.regex_replace(texts, classes["space"], " ")
        texts = tf.strings.regex_replace(texts, "(" + classes["cjk"] + ")", r" \1 ")
        if self._lower_case:
            texts = self._uncased(texts)
        texts = tf.strings.regex_replace(texts, "(" + classes["punctuation"] + ")", r" \1 ")
        # Only " " is left as whitespace here, so an ASCII whitespace split is str.split().
        return tf.strings.split(texts)

    def _uncased(self, texts: tf.Tensor) -> tf.Tensor:
        """Lower-case, NFD, drop Mn: ICU for most rows, Python's own tables where ICU differs."""
        # [batch] rows with a capital sigma or a character ICU normalizes differently from
        # Python are rare; they are split off and normalized exactly, the rest go through ICU.
        exact = tf.cast(tf.strings.regex_full_match(texts, self._exact_path_regex), tf.int32)
        row_index = tf.dynamic_partition(tf.range(tf.size(texts)), exact, 2)
        icu_rows, exact_rows = tf.dynamic_partition(texts, exact, 2)
        icu_rows = tf_text.normalize_utf8(tf.strings.lower(icu_rows, encoding="utf-8"), "NFD")
        exact_rows = self._uncased_exactly(exact_rows)
        texts = tf.dynamic_stitch(row_index, [icu_rows, exact_rows])
        return tf.strings.regex_replace(texts, self._classes["nonspacing_mark"], "")

    def _uncased_exactly(self, texts: tf.Tensor) -> tf.Tensor:
        """Python's uncased normalization, character by character from a table.

        Final sigma is decided first with Python's cased / case-ignorable classes. Canonical
        reordering is not done: it only matters among combining marks, and those of category
        Mn are dropped anyway (spacing marks with a nonzero combining class, such as U+1D165,
        appearing out of order in such a row are the one thing left as is).
        """
        classes = self._classes
        cased, ignorable = classes["cased_not_ignorable"], classes["case_ignorable"]
        # cased (ignorable)* Σ (ignorable)* and then a character neither cased nor ignorable, or the end.
        final_sigma = (
            f"({cased}{ignorable}*)\\x{{3A3}}({ignorable}*(?:{classes['neither_cased_nor_ignorable']}|$))"
        )
        texts = tf.strings.regex_replace(texts, final_sigma, "\\1\u03c2\\2")
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
