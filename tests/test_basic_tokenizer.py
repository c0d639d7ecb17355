"""BasicTokenizer.split_with_offsets: the words of the exact splitter, and where they are.

The references are the graph splitter `tokenize(lower_case=False)` (itself checked on every
code point in test_tokenization.py) and the plain-Python restatement of the original
BasicTokenizer there (`reference_words`); the offsets are checked as an invariant: each
word's byte span, read by the Python reference, is exactly that word.
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

from bert_tf.basic_tokenizer import BasicTokenizer
from tests.harness.reference import random_bytes, random_text, reference_words

# Emoji (with skin tones, ZERO WIDTH JOINER sequences and VARIATION SELECTOR-16), which the
# character mix of random_text rarely reaches.
_EMOJI = ["😀", "👍🏽", "👩\u200d💻", "❤\ufe0f", "🇫🇷", "🏳\ufe0f\u200d🌈"]


def random_input(rng: random.Random) -> bytes:
    """Mixed text: random_text fragments (ASCII, punctuation, CJK, accents, Cc/Cf, zero-width
    characters, \\t\\r\\n, U+FFFD, ...), emoji, and sometimes undecodable bytes."""
    if rng.random() < 0.2:
        return random_bytes(rng)
    parts = []
    for _ in range(rng.randint(0, 4)):
        parts.append(random_text(rng, 12))
        if rng.random() < 0.5:
            parts.append(rng.choice(_EMOJI))
    return "".join(parts).encode("utf-8")


class SplitWithOffsetsTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cased = BasicTokenizer(lower_case=False)
        rng = random.Random(2024)
        cls.texts = [random_input(rng) for _ in range(3000)]
        words, begin, end = cls.cased.split_with_offsets(cls.texts)
        cls.words, cls.begin, cls.end = words.to_list(), begin.to_list(), end.to_list()

    def test_words_are_the_exact_splitters_and_the_originals(self):
        exact = self.cased.tokenize(self.texts).to_list()
        total = 0
        for text, words, expected in zip(self.texts, self.words, exact, strict=True):
            self.assertEqual(words, expected, ascii(text))
            self.assertEqual([w.decode("utf-8") for w in words], reference_words(text, False), ascii(text))
            total += len(words)
        self.assertGreater(total, 10_000)

    def test_each_span_is_its_word_with_only_deleted_characters_inside(self):
        spans_with_deleted = 0
        for text, words, begins, ends in zip(self.texts, self.words, self.begin, self.end, strict=True):
            previous_end = 0
            for word, begin, end in zip(words, begins, ends, strict=True):
                span = text[begin:end]
                # The span read by the original rules is exactly this one word...
                self.assertEqual(reference_words(span, False), [word.decode("utf-8")], ascii(text))
                # ...and starts and ends with the word's own characters, not deleted ones.
                first, last = word.decode("utf-8")[0], word.decode("utf-8")[-1]
                self.assertTrue(span.startswith(first.encode("utf-8")), ascii(text))
                self.assertTrue(span.endswith(last.encode("utf-8")), ascii(text))
                self.assertLessEqual(previous_end, begin)  # in order, never overlapping
                previous_end = end
                spans_with_deleted += span != word
        self.assertGreater(spans_with_deleted, 50)  # the random text does put deleted characters inside words

    def test_hand_checked_offsets(self):
        cases = [
            ("", [], [], []),
            ("Hello, World!", ["Hello", ",", "World", "!"], [0, 5, 7, 12], [5, 6, 12, 13]),
            ("a\u200bb", ["ab"], [0], [5]),  # ZERO WIDTH SPACE deleted inside the span
            ("\x00 x\ufffd ", ["x"], [2], [3]),  # deleted characters outside the word are not in its span
            ("中文ab", ["中", "文", "ab"], [0, 3, 6], [3, 6, 8]),
            ("Café\tnaïve\r\n", ["Café", "naïve"], [0, 6], [5, 12]),  # not lower-cased or stripped
            ("x\u2028y", ["x", "y"], [0, 4], [1, 5]),
            ("😀!", ["😀", "!"], [0, 4], [4, 5]),
            (b"a\xffb c\xe4\xb8", ["ab", "c"], [0, 4], [3, 5]),  # undecodable bytes deleted
        ]
        uncased = BasicTokenizer(lower_case=True)
        for text, words, begins, ends in cases:
            for tokenizer in (self.cased, uncased):  # split only: the same whatever lower_case
                got_words, got_begin, got_end = tokenizer.split_with_offsets([text])
                self.assertEqual([w.decode() for w in got_words.to_list()[0]], words, ascii(text))
                self.assertEqual(got_begin.to_list()[0], begins, ascii(text))
                self.assertEqual(got_end.to_list()[0], ends, ascii(text))

    def test_one_string_gives_one_row_and_the_graph_traces(self):
        words, begin, end = self.cased.split_with_offsets("Hi there")
        self.assertEqual(words.numpy().tolist(), [b"Hi", b"there"])
        self.assertEqual((begin.numpy().tolist(), end.numpy().tolist()), ([0, 3], [2, 8]))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def split(texts):
            return self.cased.split_with_offsets(texts)

        traced = split(tf.constant([b"a b", b"", "中.".encode()]))
        self.assertEqual(traced[1].to_list(), [[0, 2], [], [0, 3]])
        self.assertEqual(traced[2].to_list(), [[1, 3], [], [3, 4]])


if __name__ == "__main__":
    tf.test.main()
