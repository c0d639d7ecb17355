"""SQuAD post-processing exists once: evaluation and the SavedModel against the original's rules.

The references are transcriptions of run_squad.py's get_final_text and write_predictions
(tests/preprocessing/original_rules.py) over the original BasicTokenizer
(tests/test_tokenization.py's `reference_words`).
"""

import functools
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.serving.task import TaskServing
from bert_tf.tasks.finetuned import FinetunedModelInfo
from bert_tf.tasks.span import answers as squad_answers
from bert_tf.tasks.span import signatures, squad
from bert_tf.tasks.span.family import SpanFamily
from bert_tf.tasks.span.postprocess import final_text, postprocess
from bert_tf.tokenization import BertTokenizer
from tests.harness import reference as original_rules
from tests.harness.reference import reference_words

VOCAB = "tests/fixtures/bert_uncased_vocab.txt"
# Words that make get_final_text's cases: pieces inside words, punctuation split off, the
# same letters inside another word ("и о" in "национальности"), characters the tokenizer
# deletes (control, format) or turns into spaces (no-break space), accents, CJK, [UNK].
WORDS = [
    "The",
    "Eiffel",
    "Tower",
    "(1889)",
    "stands",
    "in",
    "Paris.",
    "Smith's,",
    "unaffable",
    "национальности",
    "и",
    "отношения",
    "Café",
    "e\u0301te\u0301",
    "a\u00a0b",
    "x\u200by",
    "\x07bell",
    "İstanbul",
    "東京タワー",
    "☃",
    "N.Y.C.",
    "co-operate",
    "1,000",
    "s",
    "ss",
]
WHITESPACE = [" ", " ", " ", "  ", "\n", "\t", "\u202f"]


def random_context(rng: random.Random, length: int) -> str:
    words = [rng.choice(WORDS) for _ in range(length)]
    return "".join(word + rng.choice(WHITESPACE) for word in words).strip()


class FixedLogits(tf.Module):
    """A span model that returns the logits last assigned, whatever its inputs (any shape)."""

    def __init__(self):
        super().__init__()
        self.start = tf.Variable(np.zeros([1, 1], np.float32), shape=tf.TensorShape(None))
        self.end = tf.Variable(np.zeros([1, 1], np.float32), shape=tf.TensorShape(None))

    def __call__(self, inputs, training=False):
        return {"start_logits": self.start.read_value(), "end_logits": self.end.read_value()}


def features_of(tokenizer, windows):
    """SquadFeatures of the span preprocessor's windows, as evaluation gathers them."""
    vocab = tokenizer.vocab
    features = []
    for row, ids in enumerate(windows["input_ids"].numpy()):
        to_orig = windows["token_to_orig"].numpy()[row]
        max_context = windows["token_is_max_context"].numpy()[row]
        length = int((ids != tokenizer.pad_id).sum())
        context = np.flatnonzero(to_orig >= 0)
        features.append(
            squad.SquadFeature(
                unique_id=row,
                example_index=int(windows["example_index"].numpy()[row]),
                doc_span_index=0,
                tokens=[vocab[i] for i in ids[:length]],
                token_to_orig_map={int(p): int(to_orig[p]) for p in context},
                token_is_max_context={int(p): bool(max_context[p]) for p in context},
                input_ids=[],
                input_mask=[],
                segment_ids=[],
            )
        )
    return features


class FinalTextTest(tf.test.TestCase):
    def test_known_cases(self):
        cases = [
            # Two words are found with their space: never as the letters inside another word.
            ("и о", ["национальности", "и", "отношения"], "и о"),
            ("smith", ["Smith's,"], "Smith"),
            # The tokenizer deletes the control character: lengths differ, the words' whole text.
            ("bell", ["\x07bell"], "\x07bell"),
            # A no-break space becomes a space: the words' whole text too.
            ("a", ["a\u00a0b"], "a\u00a0b"),
            # The first occurrence wins, even inside an earlier word ("s" of "Smith").
            ("s", ["Smith's"], "S"),
        ]
        tokenizer = BertTokenizer(VOCAB, lower_case=True)
        got = squad_answers.final_texts(
            tf.constant([case[0] for case in cases]),
            tf.ragged.constant([case[1] for case in cases]),
            tokenizer.split_words,
        )
        self.assertEqual([text.decode() for text in got.text.numpy()], [case[2] for case in cases])
        # The one-span helper of squad_postprocess is the same rule.
        self.assertEqual(final_text("и о", "национальности и отношения", lower_case=True), "и о")

    def test_random_spans_follow_the_original(self):
        tokenizer = BertTokenizer(VOCAB, lower_case=True)
        rng = random.Random(7)
        predicted, doc_words, expected = [], [], []
        for _ in range(400):
            words = [rng.choice(WORDS) for _ in range(rng.randint(1, 5))]
            pieces = [[tokenizer.vocab[i] for i in row] for row in tokenizer.tokenize(words).to_list()]
            flat = [piece for row in pieces for piece in row]
            if not flat:
                continue
            first = rng.randrange(len(flat))
            last = min(len(flat) - 1, first + rng.randrange(6))
            text = " ".join(flat[first : last + 1]).replace(" ##", "").replace("##", "")
            text = " ".join(text.strip().split())
            words_of_piece = [index for index, row in enumerate(pieces) for _ in row]
            span = words[words_of_piece[first] : words_of_piece[last] + 1]
            predicted.append(text)
            doc_words.append(span)
            expected.append(
                original_rules.get_final_text(text, " ".join(span), lambda t: reference_words(t, True))
            )
        got = squad_answers.final_texts(
            tf.constant(predicted), tf.ragged.constant(doc_words), tokenizer.split_words
        )
        self.assertEqual([text.decode() for text in got.text.numpy()], expected)
        # The text's ends: its first and last characters in the doc tokens.
        for row, span in enumerate(doc_words):
            first_word, last_word = int(got.first_word[row]), int(got.last_word[row])
            first_char, last_char = int(got.first_char[row]), int(got.last_char[row])
            rebuilt = " ".join(span[first_word : last_word + 1])
            rebuilt = rebuilt[first_char : len(rebuilt) - len(span[last_word]) + last_char + 1]
            self.assertEqual(rebuilt, expected[row])


class ServedEqualsScoredTest(tf.test.TestCase):
    """On random logits, the SavedModel's answers are evaluation's, which are the original's."""

    def check(self, settings, seed, draws=3):
        """`draws` batches of random contexts and logits (the last rounded: many ties)."""
        rng = random.Random(seed)
        tokenizer = BertTokenizer(VOCAB, lower_case=True)
        info = FinetunedModelInfo(
            "squad_v2" if settings.get("version_2_with_negative") else "squad",
            "span",
            None,
            True,
            32,
            {"max_query_length": 6, "doc_stride": 5, **settings},
        )
        model = FixedLogits()
        serving = TaskServing(model, tokenizer, info, 32)
        saved = SpanFamily.squad_settings(info)
        # Traced once, as the SavedModel runs them.
        features = tf.function(serving.preprocessor.features, autograph=False)
        answer = tf.function(lambda q, c: signatures.answer(serving, saved, q, c), autograph=False)
        postprocess_args = {
            name: saved[name]
            for name in (
                "n_best_size",
                "max_answer_length",
                "version_2_with_negative",
                "null_score_diff_threshold",
            )
        }
        all_answers = []
        for draw in range(draws):
            contexts = [random_context(rng, rng.randint(0, 14)) for _ in range(24)]
            questions = [random_context(rng, rng.randint(1, 4)) for _ in contexts]
            windows = features((tf.constant(questions), tf.constant(contexts)))
            shape = windows["input_ids"].shape
            start, end = (np.asarray([rng.gauss(0, 2) for _ in range(shape[0] * shape[1])]) for _ in "se")
            start, end = start.reshape(shape), end.reshape(shape)
            if draw == draws - 1:
                start, end = np.round(start), np.round(end)
            start, end = start.astype(np.float32), end.astype(np.float32)
            model.start.assign(start)
            model.end.assign(end)
            served = answer(tf.constant(questions), tf.constant(contexts))

            dataset = [
                {
                    "paragraphs": [
                        {"context": c, "qas": [{"id": str(i), "question": questions[i], "answers": []}]}
                    ]
                }
                for i, c in enumerate(contexts)
            ]
            examples, _ = squad.read_examples(dataset, False)
            features_list = features_of(tokenizer, windows)
            lengths = [len(feature.tokens) for feature in features_list]
            starts = [start[row, :length] for row, length in enumerate(lengths)]
            ends = [end[row, :length] for row, length in enumerate(lengths)]
            scored, _, null_odds = postprocess(examples, features_list, starts, ends, **postprocess_args)
            original, diffs = original_rules.squad_predictions(
                examples,
                features_list,
                [[float(x) for x in row] for row in starts],
                [[float(x) for x in row] for row in ends],
                basic_tokenize=functools.partial(reference_words, lower_case=True),
                **postprocess_args,
            )
            answers = [text.decode() for text in served["answer"].numpy()]
            self.assertEqual(answers, [scored[str(i)] for i in range(len(contexts))])
            self.assertEqual(scored, original)
            self.assertEqual(null_odds, diffs)
            # The offsets frame the answer in the context (whitespace runs written as one space).
            for row, context in enumerate(contexts):
                begin, finish = int(served["answer_start"][row]), int(served["answer_end"][row])
                if answers[row]:
                    self.assertEqual(re.sub("[ \t\r\n\u202f]+", " ", context[begin:finish]), answers[row])
                else:
                    self.assertEqual((begin, finish), (-1, -1))
            all_answers += answers
        return all_answers

    def test_squad_v1(self):
        # Few candidates per window (n_best_size 3) and short spans: both limits decide.
        answers = self.check({"max_answer_length": 4, "n_best_size": 3}, seed=11)
        self.assertGreater(sum(bool(a) for a in answers), 30)
        self.assertGreater(sum(a.count(" ") for a in answers), 5)  # spans over several words

    @pytest.mark.slow  # ~20 s more on 2 cores: its own traces of the serving graph
    def test_squad_v2(self):
        answers = self.check(
            {"version_2_with_negative": True, "null_score_diff_threshold": 0.5, "max_answer_length": 5},
            seed=12,
        )
        self.assertIn("", answers)
        self.assertGreater(sum(bool(a) for a in answers), 20)


if __name__ == "__main__":
    tf.test.main()
