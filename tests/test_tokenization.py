"""BertTokenizer against two independent references: the original rules, and Hugging Face.

`reference_words` / `reference_wordpiece` (tests/harness/reference.py) are a plain-Python restatement of the
original google-research/bert BasicTokenizer and WordpieceTokenizer, written from the rules
of its tokenization.py (whitespace, control and punctuation classes, CJK spacing, accent
stripping when uncased, greedy longest-match-first WordPiece with a 200-character [UNK] rule).
Hugging Face `tokenizers` (BertWordPieceTokenizer, a Rust implementation)
is the second reference; where it departs from the original, the original wins and the
departure is pinned down in `HuggingFaceDisagreementTest`.
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import tempfile
import unicodedata
from collections import Counter
from pathlib import Path
from unittest import mock

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from tokenizers import BertWordPieceTokenizer  # noqa: E402

from bert_tf import basic_tokenizer, tokenization  # noqa: E402
from bert_tf.tokenization import BertTokenizer, VocabError, load_vocab  # noqa: E402
from pipelines import corpus  # noqa: E402
from tests.harness.data import write_vocab  # noqa: E402
from tests.harness.reference import (  # noqa: E402
    ReferenceTokenizer,
    random_bytes,
    random_text,
    reference_wordpiece,
    reference_words,
)

UNCASED_VOCAB = str(Path(__file__).parent / "fixtures" / "bert_uncased_vocab.txt")


def build_cased_vocab(directory: str) -> str:
    """A cased vocab made from the corpus: specials, every character, frequent words and suffixes."""
    words = Counter()
    for document in corpus.documents():
        for sentence in document:
            words.update(reference_words(sentence, lower_case=False))
    chars = sorted({c for w in words for c in w})
    frequent = [w for w, _ in words.most_common(3000)]
    suffixes = Counter(w[i:] for w in words for i in range(1, min(len(w), 6)))
    tokens = list(tokenization.SPECIAL_TOKENS) + chars + ["##" + c for c in chars]
    tokens += [w for w in frequent if w not in tokens]
    tokens += ["##" + s for s, _ in suffixes.most_common(800) if "##" + s not in tokens]
    return write_vocab(os.path.join(directory, "cased_vocab.txt"), tokens)


def hugging_face(vocab_file: str, lower_case: bool) -> BertWordPieceTokenizer:
    tokenizer = BertWordPieceTokenizer(
        vocab_file, clean_text=True, handle_chinese_chars=True, strip_accents=lower_case, lowercase=lower_case
    )
    # Hugging Face's default is 100 characters; the original's limit is 200.
    tokenizer.model.max_input_chars_per_word = 200
    return tokenizer


def corpus_sentences() -> list[str]:
    return [s for document in corpus.documents() for s in document]


# --- Random text from the interesting parts of Unicode ------------------------------------


def decoded(words_tensor: tf.RaggedTensor) -> list[list[str]]:
    return [[w.decode("utf-8") for w in row] for row in words_tensor.to_list()]


@functools.cache
def shared_fixtures() -> dict:
    """Tokenizers and references built once per test session (building one takes seconds)."""
    uncased_vocab = load_vocab(UNCASED_VOCAB)
    cased_vocab_file = build_cased_vocab(tempfile.mkdtemp())
    cased_vocab = load_vocab(cased_vocab_file)
    return {
        "uncased": BertTokenizer(UNCASED_VOCAB, lower_case=True),
        "uncased_vocab": uncased_vocab,
        "cased": BertTokenizer(cased_vocab_file, lower_case=False),
        "cased_vocab": cased_vocab,
        "reference": {
            True: ReferenceTokenizer(uncased_vocab, True),
            False: ReferenceTokenizer(cased_vocab, False),
        },
    }


class BertTokenizerTestBase(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for name, value in shared_fixtures().items():
            setattr(cls, name, value)


class ReferenceAgreementTest(BertTokenizerTestBase):
    def test_embedded_corpus_matches_reference_uncased_and_cased(self):
        sentences = corpus_sentences()
        self.assertGreater(len(sentences), 2000)
        for tokenizer in (self.uncased, self.cased):
            reference = self.reference[tokenizer.lower_case]
            got = tokenizer.tokenize(sentences).to_list()
            for sentence, ids in zip(sentences, got, strict=True):
                self.assertEqual(ids, reference(sentence), sentence)

    def test_random_unicode_matches_reference(self):
        rng = random.Random(1234)
        texts = [random_text(rng) for _ in range(3000)]
        for tokenizer in (self.uncased, self.cased):
            lower = tokenizer.lower_case
            words = decoded(tokenizer.split_words(texts))
            ids = tokenizer.tokenize(texts).to_list()
            for text, got_words, got_ids in zip(texts, words, ids, strict=True):
                self.assertEqual(got_words, reference_words(text, lower), ascii(text))
                self.assertEqual(got_ids, self.reference[lower](text), ascii(text))

    def test_invalid_utf8_bytes_are_dropped_like_python(self):
        rng = random.Random(99)
        texts = [random_bytes(rng) for _ in range(1000)]
        got = self.uncased.tokenize(texts).to_list()
        for text, ids in zip(texts, got, strict=True):
            self.assertEqual(ids, self.reference[True](text), text)
        # Alone, each text decides for itself whether its batch needs transcoding.
        for text in texts[:300]:
            self.assertEqual(self.uncased.tokenize([text]).to_list(), [self.reference[True](text)], text)

    def test_sampled_code_points_match_reference(self):
        # Every 13th code point alone and inside a word (the slow test covers all of them).
        self._check_code_points(range(0, 0x110000, 13))

    @pytest.mark.slow
    def test_every_code_point_matches_reference(self):
        self._check_code_points(range(0x110000))

    def _check_code_points(self, code_points):
        chars = [chr(c) for c in code_points if not 0xD800 <= c <= 0xDFFF]
        for template in ("{}", "AΣ{}b"):
            texts = [template.format(c) for c in chars]
            for tokenizer in (self.uncased, self.cased):
                for start in range(0, len(texts), 50_000):
                    batch = texts[start : start + 50_000]
                    got = decoded(tokenizer.split_words(batch))
                    for text, words in zip(batch, got, strict=True):
                        if words != reference_words(text, tokenizer.lower_case):
                            self.fail(f"{ascii(text)} lower_case={tokenizer.lower_case}: {words}")


class EdgeCaseTest(BertTokenizerTestBase):
    # (text, lower_case, words of the original BasicTokenizer), each checked by hand against
    # the original's rules.
    WORDS = [
        ("", True, []),
        ("   \t\n ", True, []),
        ("Hello, World!", True, ["hello", ",", "world", "!"]),
        ("Hello, World!", False, ["Hello", ",", "World", "!"]),
        ("zero\u200bwidth", True, ["zerowidth"]),  # Cf deleted, no split
        ("soft\u00adhyphen", True, ["softhyphen"]),
        ("esc\x1bape", True, ["escape"]),  # Cc deleted
        ("nul\x00l", True, ["null"]),
        ("rep\ufffdlace", True, ["replace"]),
        ("vertical\x0btab", True, ["verticaltab"]),  # \v is Cc: deleted, although str.split splits on it
        ("form\x0cfeed", True, ["formfeed"]),
        ("file\x1csep", True, ["filesep"]),  # U+001C..001F: Cc, deleted before the split
        ("next\x85line", True, ["nextline"]),  # U+0085 NEL: Cc
        ("line\u2028sep", True, ["line", "sep"]),  # Zl: kept by cleaning, split by str.split
        ("para\u2029sep", True, ["para", "sep"]),
        ("no\u00a0break", True, ["no", "break"]),  # Zs
        ("ideo\u3000space", True, ["ideo", "space"]),
        ("tab\tnew\nret\r", True, ["tab", "new", "ret"]),
        ("中文abc", True, ["中", "文", "abc"]),
        ("한국어", True, ["\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165"]),  # NFD jamo, no split
        ("한국어", False, ["한국어"]),
        ("ひらがなカタカナ", True, ["ひらかなカタカナ"]),  # NFD: が -> か + U+3099 (Mn, dropped)
        ("ひらがな", False, ["ひらがな"]),
        ("Café Naïve", True, ["cafe", "naive"]),
        ("Café", False, ["Café"]),  # cased: no normalization at all
        ("Cafe\u0301", False, ["Cafe\u0301"]),
        ("ΑΣ ΣΑ", True, ["ας", "σα"]),  # Python's str.lower: final sigma
        ("İstanbul", True, ["istanbul"]),  # U+0130 -> i + U+0307 (Mn, dropped)
        ("ﬁne", True, ["ﬁne"]),  # no compatibility decomposition (NFD, not NFKD)
        ("wait…", True, ["wait", "…"]),  # U+2026 is Po
        ("a$b^c`d", True, ["a", "$", "b", "^", "c", "`", "d"]),  # ASCII symbols count as punctuation
        ("5€ ♡→x", True, ["5€", "♡→x"]),  # other symbols do not
        ("«quote»", True, ["«", "quote", "»"]),
        ("[MASK] it", True, ["[", "mask", "]", "it"]),
        ("[CLS]", False, ["[", "CLS", "]"]),
        ("\u1fefx", True, ["`", "x"]),  # GREEK VARIA (Sk) decomposes to "`": split only when uncased
        ("\u1fefx", False, ["\u1fefx"]),
        ("\ue000private", True, ["\ue000private"]),  # Co is kept (Hugging Face deletes it)
        ("a\u0903b", True, ["a\u0903b"]),  # Mc is kept (only Mn is dropped)
        ("\u2c2fX", True, ["\u2c5fx"]),  # Unicode 14 case pair that ICU may not know
        ("\U00016122", True, ["\U00016122"]),  # unassigned in Unicode 14; newer ICU decomposes it
        # U+1D165 is Mc with combining class 216; U+10D69 is a mark only after Unicode 14, so
        # Python does not reorder the two (ICU would).
        ("\U0001d165\U00010d69", True, ["\U0001d165\U00010d69"]),
        # NFD puts U+16FF0 (Mc, class 6) before U+1D166 (Mc, class 216); both survive uncasing.
        ("ΑΣ \U0001d166\U00016ff0", True, ["ας", "\U00016ff0\U0001d166"]),
        ("\U0001d166\U00016ff0", False, ["\U0001d166\U00016ff0"]),
    ]

    def test_words(self):
        for text, lower_case, expected in self.WORDS:
            self.assertEqual(reference_words(text, lower_case), expected, f"reference: {ascii(text)}")
            tokenizer = self.uncased if lower_case else self.cased
            self.assertEqual(decoded(tokenizer.split_words([text]))[0], expected, ascii(text))

    def test_rows_on_the_exact_path_keep_their_place_in_the_batch(self):
        # Characters ICU lower-cases or decomposes differently from Python send their row down
        # a separate path; mixed with ordinary rows and capital sigmas, the order must hold.
        from bert_tf.basic_tokenizer import _uncased_exceptions

        disagreeing = [chr(cp) for cp in _uncased_exceptions().icu_disagrees]
        self.assertIn("\u2c2f", disagreeing)  # a Unicode 14 case pair (Python 3.11)
        texts = []
        for index, char in enumerate(disagreeing):
            texts += [f"Row {index} ΟΔΟΣ", f"A{char}b {char}\u0301Σ", f"Plain {index}"]
        got = decoded(self.uncased.split_words(texts))
        self.assertEqual(got, [reference_words(text, True) for text in texts])

    def test_known_ids_of_bert_base_uncased(self):
        cases = {
            "Hello, World!": ["hello", ",", "world", "!"],
            "unaffable": ["una", "##ffa", "##ble"],
            "[MASK]": ["[", "mask", "]"],
            "Naïve café": ["naive", "cafe"],
            "☃": ["[UNK]"],
            "xx☃": ["[UNK]"],  # the whole word is [UNK], not "xx" + [UNK]
        }
        for text, pieces in cases.items():
            ids = [self.uncased_vocab.index(p) for p in pieces]
            self.assertEqual(self.uncased.tokenize([text]).to_list(), [ids], text)

    def test_two_hundred_character_limit(self):
        vocab = self.uncased_vocab
        unk = vocab.index("[UNK]")
        for word, limit_exceeded in (
            ("a" * 200, False),
            ("a" * 201, True),
            ("é" * 200, False),
            ("é" * 201, True),
        ):
            ids = self.uncased.tokenize([word, "x " + word + " y"]).to_list()
            self.assertEqual(ids[0] == [unk], limit_exceeded, len(word))
            self.assertEqual(ids[0], self.reference[True](word))
            self.assertEqual(ids[1], self.reference[True]("x " + word + " y"))
        # Cased, a decomposed accent counts as two characters.
        self.assertEqual(
            self.cased.tokenize(["e\u0301" * 100, "e\u0301" * 101]).to_list()[1], [self.cased.unk_id]
        )

    def test_rows_split_word_by_word_keep_their_place_in_the_batch(self):
        # Most rows go through tensorflow-text's end-to-end split; these may not (a run of
        # 201+ characters without a space, a character it splits differently) and are split
        # word by word, then put back in place.
        rows = [
            "plain text, here.",
            "x " + "a" * 201 + " y",
            "ж" * 150,  # 300 bytes but 150 characters: a word, not [UNK]
            "a\u1b4eb c",  # U+1B4E: unassigned in Python 3.11, punctuation to newer ICU
            "another plain one!",
            "a" * 150 + "." + "b" * 150,  # a long run of two short words
        ]
        for tokenizer in (self.uncased, self.cased):
            normalized = tokenizer._basic_tokenizer.normalize(tf.constant(rows))
            routed = tf.strings.regex_full_match(normalized, tokenizer._split_by_words_regex).numpy().tolist()
            self.assertEqual(routed, [False, True, False, True, False, True])
            got = tokenizer.tokenize(rows).to_list()
            for row, ids in zip(rows, got, strict=True):
                self.assertEqual(ids, self.reference[tokenizer.lower_case](row), row[:20])
            self.assertEqual(got, tokenizer.tokenize_with_words(rows).merge_dims(1, 2).to_list())
        # The embedded corpus never needs the word-by-word split.
        normalized = self.uncased._basic_tokenizer.normalize(tf.constant(corpus_sentences()))
        self.assertFalse(
            tf.reduce_any(tf.strings.regex_full_match(normalized, self.uncased._split_by_words_regex))
        )

    def test_special_ids_come_from_the_vocab(self):
        self.assertEqual(
            (
                self.uncased.pad_id,
                self.uncased.unk_id,
                self.uncased.cls_id,
                self.uncased.sep_id,
                self.uncased.mask_id,
            ),
            (0, 100, 101, 102, 103),
        )
        tokens = ["hello", "[MASK]", "[SEP]", "world", "[CLS]", "[UNK]", "[PAD]", "##s"]
        tokenizer = BertTokenizer(write_vocab(self.get_temp_dir(), tokens), lower_case=True)
        self.assertEqual(
            (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id),
            (6, 5, 4, 2, 1),
        )
        self.assertEqual(tokenizer.vocab, tokens)
        self.assertEqual(tokenizer.vocab_size, 8)
        self.assertEqual(tokenizer.tokenize(["Hellos world zz"]).to_list(), [[0, 7, 3, 5]])


class WordPieceTest(BertTokenizerTestBase):
    def test_over_long_vocab_token_is_never_produced_and_other_ids_stay(self):
        # tensorflow-text cannot hold a token of more than 256 bytes; the original could.
        tokens = list(tokenization.SPECIAL_TOKENS) + ["é" * 130, "é", "##é", "ab", "##c"]
        tokenizer = BertTokenizer(
            write_vocab(os.path.join(self.get_temp_dir(), "long.txt"), tokens), lower_case=False
        )
        self.assertEqual(tokenizer.vocab, tokens)
        self.assertEqual(tokenizer.tokenize(["ab abc é é" + "é"]).to_list(), [[8, 8, 9, 6, 6, 7]])
        self.assertEqual(tokenizer.tokenize(["é" * 130]).to_list(), [[6] + [7] * 129])  # original: [5]

    def test_random_vocabs_match_greedy_longest_match_first(self):
        rng = random.Random(7)
        for trial in range(5):
            alphabet = "abcdé"[: 3 + trial % 3]
            pieces = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(25)}
            tokens = (
                list(tokenization.SPECIAL_TOKENS)
                + sorted(pieces)
                + sorted("##" + p for p in pieces if rng.random() < 0.7)
            )
            vocab_file = write_vocab(os.path.join(self.get_temp_dir(), f"vocab{trial}.txt"), tokens)
            tokenizer = BertTokenizer(vocab_file, lower_case=False)
            words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(400)]
            got = tokenizer.tokenize_with_words([" ".join(words)]).to_list()[0]
            expected = [[tokens.index(p) for p in reference_wordpiece(w, set(tokens))] for w in words]
            self.assertEqual(got, expected)

    def test_tokenize_with_words_groups_pieces_by_word(self):
        ids = self.uncased.tokenize_with_words(["unaffable hello", ""])
        self.assertEqual(ids.shape.rank, 3)
        vocab = self.uncased_vocab
        self.assertEqual(
            ids.to_list(), [[[vocab.index(p) for p in ("una", "##ffa", "##ble")], [vocab.index("hello")]], []]
        )
        self.assertEqual(ids.dtype, tf.int64)


class HuggingFaceAgreementTest(BertTokenizerTestBase):
    def test_corpus_and_random_text_match_hugging_face(self):
        rng = random.Random(5)

        # Leave out what Hugging Face does differently from the original (see the next class):
        # private-use characters, capital sigma, CJK U+2B820..U+2B91F; and characters whose
        # category depends on the Unicode version (unassigned in Python 3.11's Unicode 14).
        def agrees(char: str) -> bool:
            category = unicodedata.category(char)
            return category not in ("Cn", "Co", "Cs") and char != "Σ" and not 0x2B820 <= ord(char) <= 0x2B91F

        texts = corpus_sentences() + ["".join(filter(agrees, random_text(rng))) for _ in range(2000)]
        for tokenizer, lower in ((self.uncased, True), (self.cased, False)):
            hf = hugging_face(tokenizer.vocab_file, lower)
            expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
            got = tokenizer.tokenize(texts).to_list()
            for text, ours, theirs in zip(texts, got, expected, strict=True):
                self.assertEqual(ours, theirs, ascii(text))


class HuggingFaceDisagreementTest(BertTokenizerTestBase):
    """Where Hugging Face departs from the original: ours follows the original."""

    CASES = [
        # HF deletes private-use characters (category Co) too; the original only Cc and Cf.
        ("private\ue000use", True),
        # HF lower-cases character by character, so no final sigma; Python's str.lower has it.
        ("ΟΔΟΣ", True),
        # HF's CJK range starts at U+2B920 where the original's starts at U+2B820.
        ("a\U0002b820b", False),
    ]

    def test_original_wins(self):
        for text, lower in self.CASES:
            tokenizer = self.uncased if lower else self.cased
            hf = hugging_face(tokenizer.vocab_file, lower)
            hf_words = [
                word for word, _ in hf.pre_tokenizer.pre_tokenize_str(hf.normalizer.normalize_str(text))
            ]
            ours = decoded(tokenizer.split_words([text]))[0]
            self.assertEqual(ours, reference_words(text, lower), ascii(text))
            self.assertNotEqual(ours, hf_words, f"Hugging Face now agrees on {ascii(text)}: drop the case")


class GraphTest(BertTokenizerTestBase):
    TEXTS = ["The quick brown fox.", "", "中文 [MASK] Ünïcödé"]

    def expected(self):
        return self.uncased.tokenize(self.TEXTS).to_list()

    def test_inputs_list_numpy_tensor_and_scalar(self):
        import numpy as np

        expected = self.expected()
        self.assertEqual(self.uncased.tokenize(np.array(self.TEXTS)).to_list(), expected)
        self.assertEqual(self.uncased.tokenize(tf.constant(self.TEXTS)).to_list(), expected)
        self.assertEqual(self.uncased.tokenize(self.TEXTS[2]).numpy().tolist(), expected[2])
        with self.assertRaisesRegex(ValueError, "shape"):
            self.uncased.tokenize([["a"]])

    def test_dataset_map(self):
        dataset = tf.data.Dataset.from_tensor_slices(self.TEXTS).map(self.uncased.tokenize)
        self.assertEqual([ids.tolist() for ids in dataset.as_numpy_iterator()], self.expected())
        batched = tf.data.Dataset.from_tensor_slices(self.TEXTS).batch(3).map(self.uncased.tokenize)
        self.assertEqual(next(iter(batched)).to_list(), self.expected())

    def test_saved_model(self):
        module = tf.Module()
        module.tokenizer = self.uncased
        module.serve = tf.function(
            lambda texts: self.uncased.tokenize(texts).to_tensor(),
            input_signature=[tf.TensorSpec([None], tf.string)],
        )
        path = os.path.join(self.get_temp_dir(), "saved")
        tf.saved_model.save(module, path)
        loaded = tf.saved_model.load(path)
        self.assertAllEqual(
            loaded.serve(tf.constant(self.TEXTS)), self.uncased.tokenize(self.TEXTS).to_tensor()
        )
        # The Unicode 14 case pairs take the lookup path inside the saved graph too.
        self.assertAllEqual(
            loaded.serve(tf.constant(["\u2c2f"])), self.uncased.tokenize(["\u2c2f"]).to_tensor()
        )

    def test_detokenize(self):
        ids = self.uncased.tokenize(["Unaffable [MASK], ok?", ""])
        self.assertEqual(self.uncased.detokenize(ids).numpy().tolist(), [b"unaffable [ mask ] , ok ?", b""])
        self.assertEqual(self.uncased.detokenize(self.uncased.tokenize_with_words(["Unaffable x"])).numpy().tolist(),
                         [b"unaffable x"])  # fmt: skip
        padded = ids.to_tensor(default_value=self.uncased.pad_id, shape=[2, 12])
        self.assertEqual(
            self.uncased.detokenize(padded).numpy().tolist(), [b"unaffable [ mask ] , ok ?", b""]
        )


class BadInputTest(BertTokenizerTestBase):
    def test_missing_file(self):
        with self.assertRaisesRegex(VocabError, "not found: /no/such/vocab.txt.*build_vocab"):
            BertTokenizer("/no/such/vocab.txt")

    def test_empty_file(self):
        path = write_vocab(os.path.join(self.get_temp_dir(), "empty.txt"), [""])
        with self.assertRaisesRegex(VocabError, "empty: .*empty.txt"):
            load_vocab(path)

    def test_missing_special_tokens(self):
        path = write_vocab(
            os.path.join(self.get_temp_dir(), "no_cls.txt"), ["[PAD]", "[UNK]", "hello", "[SEP]"]
        )
        with self.assertRaisesRegex(VocabError, r"no_cls.txt has no \[CLS\] \[MASK\] token; add a line"):
            load_vocab(path)

    def test_duplicate_lines_name_the_line_numbers(self):
        tokens = list(tokenization.SPECIAL_TOKENS) + ["hello", "world", "hello "]
        path = write_vocab(os.path.join(self.get_temp_dir(), "dup.txt"), tokens)
        with self.assertRaisesRegex(
            VocabError, r"dup.txt has repeated tokens: 'hello' on lines 6 and 8.*\[unusedN\]"
        ):
            load_vocab(path)

    def test_blank_lines_keep_their_ids_and_non_utf8_vocab_is_an_error(self):
        # As in the original: a blank or whitespace-only line keeps its id, which is never produced.
        tokens = list(tokenization.SPECIAL_TOKENS) + ["", "x", "\u3000", "##y"]
        path = write_vocab(os.path.join(self.get_temp_dir(), "blank.txt"), tokens)
        self.assertEqual(load_vocab(path), list(tokenization.SPECIAL_TOKENS) + ["", "x", "", "##y"])
        tokenizer = BertTokenizer(path, lower_case=False)
        self.assertEqual(tokenizer.tokenize(["x xy \u3000 z"]).to_list(), [[6, 6, 8, 1]])
        path = os.path.join(self.get_temp_dir(), "latin1.txt")
        Path(path).write_bytes("\n".join(tokenization.SPECIAL_TOKENS).encode() + b"\ncaf\xe9\n")
        with self.assertRaisesRegex(VocabError, "latin1.txt line 6 is not UTF-8"):
            load_vocab(path)

    def test_vocab_lines_are_stripped_and_crlf_is_accepted(self):
        path = os.path.join(self.get_temp_dir(), "crlf.txt")
        Path(path).write_bytes(
            b"\r\n".join(t.encode() for t in tokenization.SPECIAL_TOKENS) + b"\r\n  hello \r\n"
        )
        self.assertEqual(load_vocab(path), list(tokenization.SPECIAL_TOKENS) + ["hello"])

    def test_empty_strings(self):
        ids = self.uncased.tokenize(["", " ", "\u200b", "\x00\ufffd"])
        self.assertEqual(ids.to_list(), [[], [], [], []])
        self.assertEqual(self.uncased.tokenize([]).shape.as_list(), [0, None])

    def test_one_string_or_a_batch(self):
        # Every entry point takes [batch] strings or one string (its single row), and names
        # the fix for any other shape.
        for method in (self.uncased.tokenize, self.uncased.tokenize_with_words, self.uncased.split_words):
            with self.subTest(method=method.__name__):

                def as_list(value):
                    return value.to_list() if isinstance(value, tf.RaggedTensor) else value.numpy().tolist()

                self.assertEqual(as_list(method("hello world")), as_list(method(["hello world"])[0]))
                with self.assertRaisesRegex(ValueError, r"got shape \(1, 1\). Reshape it to \[-1\]"):
                    method([["hello world"]])

    def test_ten_megabyte_line(self):
        sentences = corpus_sentences()
        line, parts = "", []
        while len(line) < 10_000_000:
            parts.extend(sentences)
            line = " ".join(parts)
        ids = self.uncased.tokenize([line, "x" * 10_000_000]).to_list()
        # One long line tokenizes like its sentences one by one (each sentence is checked
        # against the reference above); one 10-million-character word is [UNK].
        per_sentence = self.uncased.tokenize(sentences).to_list()
        copies = len(parts) // len(sentences)
        self.assertEqual(ids[0], [i for row in per_sentence for i in row] * copies)
        self.assertEqual(ids[1], [self.uncased.unk_id])


class UnicodeTablesCacheTest(tf.test.TestCase):
    """The character tables are computed once per machine and read back from the cache."""

    def setUp(self):
        super().setUp()
        self.cache = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.cache, ignore_errors=True)
        self.enterContext(mock.patch.dict(os.environ, BERT_TF_CACHE=self.cache))
        basic_tokenizer._tables.cache_clear()
        self.addCleanup(basic_tokenizer._tables.cache_clear)

    def _cache_files(self):
        return sorted(Path(self.cache).glob("unicode_tables-*"))

    def test_cached_tables_equal_fresh_ones(self):
        classes, uncased = basic_tokenizer._tables()
        (path,) = self._cache_files()
        self.assertEndsWith(path.name, ".json")  # no temporary file left behind
        basic_tokenizer._tables.cache_clear()
        self.assertEqual(basic_tokenizer._tables(), (classes, uncased))  # read back
        fresh_classes = basic_tokenizer._compute_character_classes()
        self.assertEqual(classes, fresh_classes)
        self.assertEqual(
            uncased, basic_tokenizer._compute_uncased_exceptions(fresh_classes["nonspacing_mark"])
        )
        self.assertNotEmpty(uncased.icu_disagrees)

    def test_damaged_cache_is_recomputed_and_replaced(self):
        expected = basic_tokenizer._tables()
        (path,) = self._cache_files()
        path.write_text('{"classes": {"remove": "[', encoding="utf-8")
        basic_tokenizer._tables.cache_clear()
        self.assertEqual(basic_tokenizer._tables(), expected)
        basic_tokenizer._tables.cache_clear()
        self.assertEqual(basic_tokenizer._tables(), expected)  # the replaced file reads back

    def test_unwritable_cache_still_tokenizes(self):
        blocked = os.path.join(self.cache, "not_a_directory")
        Path(blocked).write_text("a file where the cache directory should be")
        with mock.patch.dict(os.environ, BERT_TF_CACHE=blocked):
            tokenizer = BertTokenizer(UNCASED_VOCAB, lower_case=True)
            self.assertEqual(tokenizer.tokenize(["Héllo WORLD"]).to_list(), [[7592, 2088]])
