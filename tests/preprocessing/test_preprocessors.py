"""The in-graph preprocessors against the original feature rules, on many random cases.

The reference (original_rules.py) is a plain-Python transcription of the original
run_classifier / run_squad rules and of first-piece NER labels; each test runs one batch
of random cases through a preprocessor and compares every row with it.
"""

import os
import random

import numpy as np
import tensorflow as tf

from bert_tf.preprocessing import (
    MultipleChoicePreprocessor,
    SpanPreprocessor,
    TextClassifierPreprocessor,
    TokenTaggerPreprocessor,
)
from bert_tf.tokenization import BertTokenizer
from tests.harness import reference as original_rules

VOCAB = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bert_uncased_vocab.txt")


def random_word(rng, words):
    kind = rng.random()
    if kind < 0.6:
        return rng.choice(words)
    if kind < 0.8:  # several pieces, sometimes [UNK]
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzé") for _ in range(rng.randint(4, 14)))
    if kind < 0.9:
        return rng.choice(["U.S.", "(1895-1943).", "don't", "Zürich", "東京", "x=3"])
    return rng.choice(words).capitalize()


def random_text(rng, words, low, high):
    return " ".join(random_word(rng, words) for _ in range(rng.randint(low, high)))


def rows(features, name, row):
    """Row `row` of a feature without its padding."""
    length = int(features["input_mask"][row].numpy().sum())
    return features[name][row, :length].numpy().tolist()


class PreprocessorTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = BertTokenizer(VOCAB, lower_case=True)
        cls.words = [w for w in cls.tokenizer.vocab[1000:8000] if w.isalpha()]

    def assert_dynamic_padding(self, features, sequence_length, multiple=8):
        lengths = features["input_mask"].numpy().sum(axis=-1)
        width = features["input_ids"].shape[-1]
        self.assertEqual(width, min(sequence_length, -(-int(lengths.max()) // multiple) * multiple))
        padding = features["input_mask"].numpy() == 0
        self.assertTrue((features["input_ids"].numpy()[padding] == self.tokenizer.pad_id).all())

    def test_classification_pairs_and_singles(self):
        rng = random.Random(1)
        for pair in (False, True):
            sequence_length = 24
            texts_a = [random_text(rng, self.words, 0 if pair else 1, 20) for _ in range(60)]
            texts_b = [random_text(rng, self.words, 0, 20) for _ in range(60)]
            preprocessor = TextClassifierPreprocessor(self.tokenizer, sequence_length)
            x = (tf.constant(texts_a), tf.constant(texts_b)) if pair else tf.constant(texts_a)
            features = preprocessor.features(x)
            self.assert_dynamic_padding(features, sequence_length)
            for row, (a, b) in enumerate(zip(texts_a, texts_b, strict=True)):
                ids, segments, truncated = original_rules.classifier_features(
                    self.tokenizer, a, b if pair else None, sequence_length
                )
                self.assertEqual(rows(features, "input_ids", row), ids, (a, b))
                self.assertEqual(rows(features, "segment_ids", row), segments)
                self.assertEqual(bool(features["trimmed"][row]), truncated)

    def test_classification_labels_and_static_shapes(self):
        preprocessor = TextClassifierPreprocessor(self.tokenizer, 16, ["neg", "pos"], pad_to_multiple_of=None)
        x, y = preprocessor(tf.constant(["good", "bad"]), tf.constant(["pos", "neg"]))
        self.assertEqual(x["input_ids"].shape.as_list(), [2, 16])
        self.assertAllEqual(y, [1, 0])
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "not one of the task's labels"):
            preprocessor(tf.constant(["good"]), tf.constant(["meh"]))
        regression = TextClassifierPreprocessor(self.tokenizer, 16)
        _, y = regression(tf.constant(["good"]), tf.constant([3.5]))
        self.assertAllClose(y, [3.5])

    def test_tagging_labels_on_first_pieces(self):
        rng = random.Random(2)
        labels = ["O", "B-LOC", "I-LOC", "B-PER"]
        sentences = [[random_word(rng, self.words) for _ in range(rng.randint(1, 14))] for _ in range(60)]
        sentences[0] = ["a", "\u200b", "b"]  # a word of removed characters: [UNK]
        tags = [[rng.choice(labels) for _ in words] for words in sentences]
        sequence_length = 20
        preprocessor = TokenTaggerPreprocessor(self.tokenizer, sequence_length, labels)
        features = preprocessor.features(tf.ragged.constant(sentences))
        label_ids = preprocessor.labels(tf.ragged.constant(tags), features).numpy()
        self.assert_dynamic_padding(features, sequence_length)
        for row, (words, word_tags) in enumerate(zip(sentences, tags, strict=True)):
            ids, expected_labels, positions, truncated = original_rules.tagger_features(
                self.tokenizer, words, word_tags, labels, sequence_length
            )
            self.assertEqual(rows(features, "input_ids", row), ids, words)
            length = len(ids)
            self.assertEqual(label_ids[row, :length].tolist(), expected_labels)
            self.assertTrue((label_ids[row, length:] == -1).all())
            self.assertEqual(features["word_positions"][row].numpy().tolist(), positions)
            self.assertEqual(bool(features["trimmed"][row]), truncated)

    def test_multiple_choice_rows_are_classification_pairs(self):
        rng = random.Random(3)
        contexts = [random_text(rng, self.words, 1, 15) for _ in range(20)]
        endings = [[random_text(rng, self.words, 1, 12) for _ in range(4)] for _ in range(20)]
        preprocessor = MultipleChoicePreprocessor(self.tokenizer, 20)
        x, y = preprocessor((tf.constant(contexts), tf.constant(endings)), tf.constant([1] * 20))
        features = preprocessor.features((tf.constant(contexts), tf.constant(endings)))
        self.assertEqual(x["input_ids"].shape[:2], [20, 4])
        for row in range(20):
            any_truncated = False
            for choice in range(4):
                ids, segments, truncated = original_rules.classifier_features(
                    self.tokenizer, contexts[row], endings[row][choice], 20
                )
                length = len(ids)
                self.assertEqual(x["input_ids"][row, choice, :length].numpy().tolist(), ids)
                self.assertEqual(x["segment_ids"][row, choice, :length].numpy().tolist(), segments)
                self.assertEqual(int(x["input_mask"][row, choice].numpy().sum()), length)
                any_truncated |= truncated
            self.assertEqual(bool(features["trimmed"][row]), any_truncated)

    def test_squad_windows_max_context_and_answers(self):
        rng = random.Random(4)
        questions, contexts, answers, starts = [], [], [], []
        for case in range(40):
            words = [random_word(rng, self.words) for _ in range(rng.randint(1, 40))]
            spaces = [rng.choice([" ", " ", " ", "  ", "\n", "\u202f", "\t"]) for _ in words]
            context = "".join(w + s for w, s in zip(words, spaces, strict=True)).strip()
            doc_tokens, _ = original_rules.doc_tokens_of(context)
            questions.append(random_text(rng, self.words, 1, 12))
            contexts.append(context)
            if case % 5 == 0:  # unanswerable
                answers.append("")
                starts.append(-1)
                continue
            # An answer of whole words, or part of one word (narrowed to its own pieces).
            first = rng.randrange(len(doc_tokens))
            last = min(len(doc_tokens) - 1, first + rng.randint(0, 3))
            char = _char_of_word(context, first)
            end_char = _char_of_word(context, last) + len(doc_tokens[last])
            text = context[char:end_char]
            if rng.random() < 0.3 and len(doc_tokens[first]) > 3:
                text = doc_tokens[first][1:3]
                char += 1
            answers.append(text)
            starts.append(char)
        for sequence_length, doc_stride, max_query_length in ((32, 5, 8), (48, 16, 10)):
            preprocessor = SpanPreprocessor(self.tokenizer, sequence_length, doc_stride, max_query_length)
            features = preprocessor.features((tf.constant(questions), tf.constant(contexts)))
            labels = preprocessor.labels((tf.constant(answers), tf.constant(starts)), features)
            self.assert_dynamic_padding(features, sequence_length)
            example_index = features["example_index"].numpy()
            # The cases exercise several windows per question and answers inside windows.
            self.assertGreater(len(example_index), 2 * len(questions))
            self.assertGreater(int(tf.reduce_sum(tf.cast(labels["start_logits"] > 0, tf.int32))), 20)
            for case in range(len(questions)):
                windows = original_rules.squad_features(
                    self.tokenizer,
                    questions[case],
                    contexts[case],
                    answers[case],
                    starts[case],
                    sequence_length,
                    doc_stride,
                    max_query_length,
                )
                got = np.flatnonzero(example_index == case)
                self.assertLen(got, max(1, len(windows)))
                for window, row in zip(windows, got, strict=False):
                    self.assertEqual(rows(features, "input_ids", row), window["input_ids"])
                    self.assertEqual(rows(features, "segment_ids", row), window["segment_ids"])
                    to_orig = features["token_to_orig"][row].numpy()
                    max_context = features["token_is_max_context"][row].numpy()
                    self.assertEqual(
                        {int(p): int(to_orig[p]) for p in np.flatnonzero(to_orig >= 0)},
                        window["token_to_orig"],
                    )
                    self.assertEqual(
                        {p: bool(max_context[p]) for p in window["token_is_max_context"]},
                        window["token_is_max_context"],
                    )
                    self.assertEqual(
                        (int(labels["start_logits"][row]), int(labels["end_logits"][row])),
                        (window["start"], window["end"]),
                        (contexts[case], answers[case], starts[case]),
                    )


def _char_of_word(context, word_index):
    _, char_to_word = original_rules.doc_tokens_of(context)
    return next(
        i
        for i, w in enumerate(char_to_word)
        if w == word_index and not original_rules._is_whitespace(context[i])
    )
