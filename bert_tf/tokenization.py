"""WordPiece tokenization in the TensorFlow graph, id for id the original BERT `FullTokenizer`.

The original tokenizer (google-research/bert `tokenization.py`) is Python: it cleans the
text, spaces out CJK ideographs, splits on whitespace, lower-cases and strips accents
(uncased models only), splits off punctuation and then runs greedy longest-match-first
WordPiece. `BertTokenizer` runs the same rules as a handful of TensorFlow string ops, so it
works eagerly, inside `tf.data.Dataset.map`, inside a `tf.function` and in a SavedModel.

The basic tokenization (cleaning, splitting, normalization) is `bert_tf.basic_tokenizer`;
the WordPiece step is tensorflow-text's `FastWordpieceTokenizer` (linear-time MaxMatch, the
same result as the original's greedy longest-match-first search). tensorflow-text's own
`BertTokenizer` and `FastBertTokenizer` are not used end to end because they normalize
differently from the original: `case_fold_utf8` is NFKC case folding ("…" becomes "...",
"ﬁ" becomes "fi") and control characters become split points instead of being deleted.
Measured on the embedded corpus, `FastBertTokenizer` disagrees with the original on 24 of
the first 3000 sentences.

`tokenize` normalizes with the original's rules and then lets `FastWordpieceTokenizer`
split on whitespace and punctuation itself, in its WordPiece pass (three times faster than
splitting with regexes first). Its split uses ICU's character tables, so the few code
points where they differ from Python's (found by probing every code point once, cached
with the other tables) and runs of over 200 characters without a space (the original's
[UNK] rule for long words) send their rows the word-by-word way of `tokenize_with_words`.

Example:

>>> import tensorflow as tf
>>> tokenizer = BertTokenizer("tests/fixtures/bert_uncased_vocab.txt")
>>> tokenizer.tokenize(["Hello, World!"]).to_list()
[[7592, 1010, 2088, 999]]
>>> tokenizer.detokenize(tokenizer.tokenize(["unaffable [MASK]"])).numpy().tolist()
[b'unaffable [ mask ]']
"""

from __future__ import annotations

import logging
import os

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.basic_tokenizer import BasicTokenizer, apply_to_batch, by_rows

# VocabError and load_vocab are also this module's names, as before they moved to bert_tf.vocab.
from bert_tf.vocab import SPECIAL_TOKENS, VocabError, load_vocab  # noqa: F401

logger = logging.getLogger(__name__)

# The original WordpieceTokenizer maps a word longer than this many characters to [UNK].
MAX_CHARS_PER_WORD = 200


# FastWordpieceTokenizer refuses vocab tokens longer than this many UTF-8 bytes (after "##").
_MAX_TOKEN_BYTES = 256


def _wordpiece_vocab(vocab: list[str], vocab_file: str) -> list[str]:
    """The vocab for FastWordpieceTokenizer: blank and over-long tokens become unmatchable placeholders.

    tensorflow-text cannot hold a token of more than 256 bytes; the original could, though
    no released vocab has one. Such a token is swapped for a placeholder that no word can
    equal (it contains "[", which is always split off), so every other id stays the same
    and only words that need that very token come out differently.
    """
    taken = set(vocab)
    result = list(vocab)
    for index, token in enumerate(vocab):
        if not token:  # a blank vocab line: its id is never produced
            placeholder = f"[blank line {index + 1}]"
            while placeholder in taken:
                placeholder += "_"
            taken.add(placeholder)
            result[index] = placeholder
        elif len(token.removeprefix("##").encode("utf-8")) > _MAX_TOKEN_BYTES:
            placeholder = f"[too long token on line {index + 1}]"
            while placeholder in taken:
                placeholder += "_"
            taken.add(placeholder)
            result[index] = placeholder
            logger.warning(
                "vocab file %s line %d: token of more than %d bytes can never be produced "
                "(tensorflow-text's WordPiece limit)",
                vocab_file,
                index + 1,
                _MAX_TOKEN_BYTES,
            )
    return result


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
        # A tuple: tf.Module would wrap a list and track its 30,000 entries one by one.
        self._vocab = tuple(load_vocab(self._vocab_file))
        ids = {token: index for index, token in enumerate(self._vocab)}
        self._special_ids = {token: ids[token] for token in SPECIAL_TOKENS}
        self._basic_tokenizer = BasicTokenizer(lower_case=self._lower_case)
        wordpiece_vocab = _wordpiece_vocab(self._vocab, self._vocab_file)

        def wordpiece(splits_words: bool) -> tf_text.FastWordpieceTokenizer:
            # A word of at most MAX_CHARS_PER_WORD characters has at most 4x as many bytes, so
            # the byte limit never decides anything: longer words are replaced by the literal
            # "[UNK]" before WordPiece (_wordpiece_words), or their rows never reach the
            # end-to-end split (_split_by_words_regex).
            return tf_text.FastWordpieceTokenizer(
                vocab=wordpiece_vocab,
                suffix_indicator="##",
                max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
                token_out_type=tf.int64,
                unknown_token="[UNK]",
                no_pretokenization=not splits_words,
            )

        self._wordpiece = wordpiece(splits_words=False)
        # The same WordPiece splitting words itself (whitespace and punctuation) in the same
        # pass: three times faster than splitting with regexes first. `tokenize` gives it
        # every row it splits exactly as the original does (see _tokenize_flat).
        self._end_to_end = wordpiece(splits_words=True)
        differs = self._basic_tokenizer.character_class("split_differs")
        # Rows the end-to-end split could get wrong: a run of more than MAX_CHARS_PER_WORD
        # characters without a space (the only way to hold a word the original maps to
        # [UNK] for its length), or a character tensorflow-text splits differently.
        self._split_by_words_regex = (
            f"(?s).*(?:[^ ]{{{MAX_CHARS_PER_WORD + 1}}}{'|' + differs if differs != '[]' else ''}).*"
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
        return apply_to_batch(self._tokenize_flat, texts)

    def tokenize_with_words(self, texts) -> tf.RaggedTensor:
        """Ids grouped by word (a BasicTokenizer token): ragged [batch, (words), (pieces)].

        Every word has at least one piece ([UNK] when it cannot be covered).
        """
        return apply_to_batch(self._tokenize_batch, texts)

    def split_words(self, texts) -> tf.RaggedTensor | tf.Tensor:
        """The words of the original BasicTokenizer: tf.string ragged [batch, (words)]."""
        return self._basic_tokenizer.tokenize(texts)

    def split_words_with_offsets(self, texts):
        """(words, begin, end): the words split but not normalized, with their byte offsets
        in the input (see `BasicTokenizer.split_with_offsets`); each ragged [batch, (words)]."""
        return self._basic_tokenizer.split_with_offsets(texts)

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

    # Plain graph code (explicit tf.cond): no AutoGraph conversion, which costs a second per trace.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def _tokenize_batch(self, texts: tf.Tensor) -> tf.RaggedTensor:
        return self._wordpiece_words(self._basic_tokenizer.tokenize(texts))  # [batch, (words), (pieces)]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def _tokenize_flat(self, texts: tf.Tensor) -> tf.RaggedTensor:
        normalized = self._basic_tokenizer.normalize(texts)
        by_words = tf.strings.regex_full_match(normalized, self._split_by_words_regex)

        def split_first(rows: tf.Tensor) -> tf.RaggedTensor:
            return self._wordpiece_words(self._basic_tokenizer.split_normalized(rows)).merge_dims(1, 2)

        # Such rows are rare: the common case is one end-to-end call, without the partition.
        return tf.cond(
            tf.reduce_any(by_words),
            lambda: by_rows(normalized, by_words, split_first, self._end_to_end.tokenize),
            lambda: self._end_to_end.tokenize(normalized),
        )

    def _wordpiece_words(self, words: tf.RaggedTensor) -> tf.RaggedTensor:
        """[batch, (words)] strings -> [batch, (words), (pieces)] ids."""
        # The original maps a word of more than MAX_CHARS_PER_WORD characters to [UNK]; the
        # literal "[UNK]" is a vocab entry and can never be a real word (brackets are split off).
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
        words = words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))
        return self._wordpiece.tokenize(words)
