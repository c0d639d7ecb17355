"""Proof that fine-tuning learns: each task family, end to end through the Python task models.

A tiny encoder (2 layers, hidden 64) from random initialisation - the honest test for a
model this small - is fine-tuned on synthetic but non-trivial tasks built here with a
small vocab, from raw text with `from_pretrained` -> `compile()` -> `fit` (the objects the
command line drives too: tests/tasks/test_keras_task.py shows both give the same weights).
Each must fit its training set and beat the majority baseline on held-out examples it never
saw.
"""

import collections
import os
import random

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.tasks.span.metrics import squad_exact_match
from tests.harness.data import (
    majority_share,
    ner_sentences,
    regression_rows,
    sentiment_rows,
    squad_data,
    squad_pairs,
    swag_rows,
    tiny_checkpoint,
    write_vocab,
)


class LearningTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.vocab = write_vocab(self.dir)
        self.rng = random.Random(0)
        tf.keras.utils.set_random_seed(1)
        self.checkpoint = tiny_checkpoint(self.dir, self.vocab)

    def model(self, cls, **kwargs):
        # Seeded as `python -m bert_tf.finetune --seed=1` seeds a run: the head's initial
        # weights and dropout are those of the command line's run.
        tf.keras.utils.set_random_seed(1)
        return cls.from_pretrained(self.checkpoint, **kwargs)

    def fit(self, model, x, y, epochs, learning_rate=2e-3, batch_size=16):
        model.compile(learning_rate=learning_rate)
        model.fit(x, y, batch_size=batch_size, epochs=epochs, seed=1, verbose=0)
        return model

    # ~26 s; by default: the runner's classifier learns its task (test_quantize: >= 0.9 dev
    # accuracy) and fit here reaches the runner's weights (test_keras_task).
    @pytest.mark.slow
    def test_classification_learns_sentiment(self):
        train_rows, test_rows = sentiment_rows(self.rng, 200), sentiment_rows(self.rng, 100)
        model = self.model(bert_tf.BertClassifier, label_list=["neg", "pos"], max_seq_length=32)
        self.fit(model, [r["text"] for r in train_rows], [r["label"] for r in train_rows], epochs=8)
        train = model.evaluate([r["text"] for r in train_rows], [r["label"] for r in train_rows])
        results = model.evaluate([r["text"] for r in test_rows], [r["label"] for r in test_rows])
        baseline = majority_share([r["label"] for r in test_rows])
        print("classification:", train, results, "majority baseline", baseline)
        self.assertGreater(train["accuracy"], 0.95)
        self.assertGreater(results["accuracy"], baseline + 0.2)
        # predict -> label names agrees with the scored accuracy
        names = model.label_names(model.predict([r["text"] for r in test_rows]))
        self.assertAllClose(
            np.mean([n == r["label"] for n, r in zip(names, test_rows, strict=True)]), results["accuracy"]
        )

    @pytest.mark.slow  # the classification path with an MSE head; ~40 s
    def test_regression_learns_to_count(self):
        train_rows, test_rows = regression_rows(self.rng, 200), regression_rows(self.rng, 100)
        model = self.model(bert_tf.BertClassifier, num_classes=1, max_seq_length=32)
        self.fit(model, [r["text"] for r in train_rows], [float(r["score"]) for r in train_rows], epochs=10)
        train = model.evaluate([r["text"] for r in train_rows], [float(r["score"]) for r in train_rows])
        results = model.evaluate([r["text"] for r in test_rows], [float(r["score"]) for r in test_rows])
        scores = np.array([float(r["score"]) for r in test_rows])
        baseline_mse = float(np.mean((scores - np.mean([float(r["score"]) for r in train_rows])) ** 2))
        print("regression:", train, results, "predict-the-mean MSE", baseline_mse)
        self.assertGreater(train["pearson"], 0.95)
        self.assertGreater(results["pearson"], 0.8)
        self.assertLess(results["eval_loss"], 0.5 * baseline_mse)  # eval_loss is the MSE

    @pytest.mark.slow  # ~40-65 s; the token path runs by default in tests/tasks/test_runner*.py
    def test_token_tagging_learns_a_gazetteer(self):
        train_sentences, test_sentences = ner_sentences(self.rng, 200), ner_sentences(self.rng, 100)
        tags = sorted({tag for sentence in train_sentences for _, tag in sentence})
        model = self.model(bert_tf.BertTokenClassifier, label_list=tags, max_seq_length=32)

        def split(sentences):
            return [[w for w, _ in s] for s in sentences], [[t for _, t in s] for s in sentences]

        self.fit(model, *split(train_sentences), epochs=6)
        train, results = model.evaluate(*split(train_sentences)), model.evaluate(*split(test_sentences))
        # The majority baseline tags everything O: entity F1 0.
        print("ner:", train, results)
        self.assertGreater(train["f1"], 0.95)
        self.assertGreater(results["f1"], 0.8)
        words, _ = split(test_sentences)
        predicted = model.label_names(model.predict(words))
        self.assertEqual([len(p) for p in predicted], [len(w) for w in words])  # one tag per word

    @pytest.mark.slow  # ~40 s; the SQuAD path runs by default in tests/tasks/test_runner.py
    def test_span_labeling_answers_templated_questions(self):
        train_data, test_data = squad_data(self.rng, 300, "t"), squad_data(self.rng, 100, "e")
        model = self.model(bert_tf.BertSpanLabeler, max_seq_length=48)
        # A model this small either learns to tie the question's name to its sentence or
        # plateaus at ~70% EM for a while; 16 epochs get past that for every seed tried.
        self.fit(model, *squad_pairs(train_data), epochs=16)
        train, results = model.evaluate(*squad_pairs(train_data)), model.evaluate(*squad_pairs(test_data))
        answers = [p["qas"][0]["answers"][0]["text"] for p in train_data["data"][0]["paragraphs"]]
        test_x, test_y = squad_pairs(test_data)
        most_common = collections.Counter(answers).most_common(1)[0][0]
        baseline = 100 * [a["text"] for a in test_y].count(most_common) / len(test_y)
        print("squad:", train, results, "most-frequent-answer baseline EM", baseline)
        self.assertGreater(train["exact_match"], 90.0)
        self.assertGreater(results["exact_match"], baseline + 30.0)
        # predict gives the answers that were scored; the saved folder rebuilds the same model.
        predicted = model.predict(test_x)
        exact = 100 * np.mean(
            [squad_exact_match(p, a["text"]) for p, a in zip(predicted, test_y, strict=True)]
        )
        self.assertAllClose(exact, results["exact_match"])
        again = bert_tf.BertSpanLabeler.from_pretrained(model.save(os.path.join(self.dir, "squad_model")))
        self.assertEqual((again.task_info.task, again.task_info.max_seq_length), ("squad", 48))
        self.assertEqual(again.predict(test_x), predicted)

    @pytest.mark.slow  # four sequences per example, 40 epochs (20 left it at 0.885 on train); ~70 s
    def test_multiple_choice_learns_which_ending_matches(self):
        def split(rows):
            x = [(r["sent1"], [f"{r['sent2']} {r[f'ending{i}']}" for i in range(4)]) for r in rows]
            return x, [int(r["label"]) for r in rows]

        train_rows, test_rows = swag_rows(self.rng, 200), swag_rows(self.rng, 100)
        model = self.model(bert_tf.BertMultipleChoice, max_seq_length=16)
        self.fit(model, *split(train_rows), epochs=40, learning_rate=1e-3)
        train, results = model.evaluate(*split(train_rows)), model.evaluate(*split(test_rows))
        baseline = majority_share([r["label"] for r in test_rows])
        print("swag:", train, results, "majority baseline", baseline)
        self.assertGreater(train["accuracy"], 0.95)
        self.assertGreater(results["accuracy"], baseline + 0.3)


if __name__ == "__main__":
    tf.test.main()
