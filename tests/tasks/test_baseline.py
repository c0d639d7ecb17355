"""The bag-of-words baseline of classification, multi-label and regression runs: its scores
against scikit-learn's own pipelines on the same files, the closing warning, bad input."""

import csv
import json
import os
import random
import re
from pydoc_data.topics import topics

import numpy as np
import pytest
import tensorflow as tf
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MultiLabelBinarizer

from bert_tf import plot
from bert_tf.tasks.classification import baseline
from bert_tf.tasks.classification.tables import InputExample
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.metrics import regression_metrics
from bert_tf.tasks.runner import run
from bert_tf.training.progress import read_metrics
from tests.harness import data

# Paragraphs of Python's documentation, labelled by the topic they come from: real text.
TOPICS = ("string-methods", "formatstrings", "assignment")


def paragraphs():
    rows = []
    for topic in TOPICS:
        for paragraph in re.split(r"\n\s*\n", topics[topic]):
            words = paragraph.split()
            if len(words) >= 8:
                rows.append((" ".join(words[:60]), topic))
    random.Random(0).shuffle(rows)
    return rows


def write_rows(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


class BaselineRunTest(tf.test.TestCase):
    def settings(self, root, **changes):
        paths = data.write_one_word_task(root)
        changes = {"train_batch_size": 8, "num_train_epochs": 1.0, **changes}
        output_dir = changes.pop("output_dir", os.path.join(root, "out"))
        return data.one_word_task_settings(paths, output_dir, **changes)

    def test_classification_scores_as_scikit_learns_own_pipeline_beside_the_model(self):
        root = self.get_temp_dir()
        rows = paragraphs()
        split = int(len(rows) * 0.7)
        train = write_rows(os.path.join(root, "topics_train.csv"), ["text", "label"], rows[:split])
        dev = write_rows(os.path.join(root, "topics_dev.csv"), ["text", "label"], rows[split:])
        settings = self.settings(root, train_file=train, eval_file=dev)
        with self.assertLogs("bert_tf.tasks.runner", "INFO") as logs:
            results = run(settings)

        reference = make_pipeline(TfidfVectorizer(ngram_range=(1, 2)), LogisticRegression(max_iter=1000))
        reference.fit([t for t, _ in rows[:split]], [label for _, label in rows[:split]])
        expected = reference.score([t for t, _ in rows[split:]], [label for _, label in rows[split:]])
        self.assertGreater(expected, 0.6)  # a real task the bag of words learns (a third by chance)
        self.assertAllClose(results["bag_of_words_accuracy"], expected)
        with open(os.path.join(settings.output_dir, "eval_results.json")) as handle:
            self.assertEqual(json.load(handle)["bag_of_words_accuracy"], results["bag_of_words_accuracy"])
        said = "\n".join(logs.output)
        self.assertIn(f"fitted on the {split} training examples", said)
        self.assertIn(
            f"accuracy {results['accuracy']:.4f}, baseline {expected:.4f} "
            "(TF-IDF of word 1-2-grams + logistic regression)",
            said,
        )
        # The plot's eval panel draws it, from the run's metrics.jsonl.
        reported = [r for r in read_metrics(settings.output_dir) if r["split"] == "baseline"]
        self.assertLen(reported, 1)
        self.assertAllClose(reported[0]["accuracy"], expected)
        self.assertNotIn(
            ("baseline", "accuracy"),
            plot.panels({settings.output_dir: read_metrics(settings.output_dir)}, None),
        )
        self.assertTrue(os.path.getsize(plot.plot([settings.output_dir])) > 0)

    def test_the_closing_line_says_when_the_model_does_not_beat_the_baseline(self):
        root = self.get_temp_dir()
        # One word decides the label: the bag of words learns it; a model barely trained does not.
        settings = self.settings(root, learning_rate=1e-7)
        with self.assertLogs("bert_tf.tasks.runner", "INFO") as logs:
            results = run(settings)
        self.assertLess(results["accuracy"], results["bag_of_words_accuracy"])
        self.assertIn("does not beat the baseline", logs.output[-1])
        self.assertIn(f"(accuracy {results['accuracy']:.4f})", logs.output[-1])
        self.assertStartsWith(logs.output[-1], "WARNING")

    def test_nobaseline_fits_none(self):
        root = self.get_temp_dir()
        with self.assertLogs("bert_tf.tasks.runner", "INFO") as logs:
            results = run(self.settings(root, baseline=False))
        self.assertFalse([name for name in results if name.startswith("bag_of_words")])
        self.assertNotIn("baseline:", "\n".join(logs.output))

    def test_a_training_file_of_one_class_is_refused_before_anything_is_written(self):
        root = self.get_temp_dir()
        train = write_rows(os.path.join(root, "one.csv"), ["text", "label"], [("good film", "pos")] * 6)
        settings = self.settings(root, train_file=train, eval_file=train)
        with self.assertRaisesRegex(TaskDataError, r"one class \('pos'\).*--nobaseline"):
            run(settings)
        self.assertFalse(os.path.exists(settings.output_dir))

    @pytest.mark.slow  # ~35 s: two more runs; classification's baseline is checked by default
    def test_regression_and_multi_label_score_as_scikit_learns_own_pipelines(self):
        root = self.get_temp_dir()
        rng = random.Random(1)
        # Regression: a score of each paragraph (how many of three words it holds).
        rows = [
            (text, str(sum(w in text for w in ("string", "value", "format")))) for text, _ in paragraphs()
        ]
        split = int(len(rows) * 0.7)
        train = write_rows(os.path.join(root, "r_train.csv"), ["text", "label"], rows[:split])
        dev = write_rows(os.path.join(root, "r_dev.csv"), ["text", "label"], rows[split:])
        results = run(
            self.settings(
                root, task="regression", output_dir=os.path.join(root, "r"), train_file=train, eval_file=dev
            )
        )
        reference = make_pipeline(TfidfVectorizer(ngram_range=(1, 2)), Ridge())
        reference.fit([t for t, _ in rows[:split]], [float(s) for _, s in rows[:split]])
        expected = regression_metrics(
            [float(s) for _, s in rows[split:]], reference.predict([t for t, _ in rows[split:]])
        )
        self.assertAllClose(results["bag_of_words_pearson"], expected["pearson"])
        self.assertAllClose(results["bag_of_words_spearman"], expected["spearman"])

        # Multi-label: the paragraph's topic, and "long" for long ones.
        rows = [(text, topic + ("|long" if len(text.split()) > 40 else "")) for text, topic in paragraphs()]
        rng.shuffle(rows)
        train = write_rows(os.path.join(root, "m_train.csv"), ["text", "label"], rows[:split])
        dev = write_rows(os.path.join(root, "m_dev.csv"), ["text", "label"], rows[split:])
        results = run(
            self.settings(
                root, task="multi_label", output_dir=os.path.join(root, "m"), train_file=train, eval_file=dev
            )
        )
        binarizer = MultiLabelBinarizer()
        targets = binarizer.fit_transform([labels.split("|") for _, labels in rows[:split]])
        reference = make_pipeline(
            TfidfVectorizer(ngram_range=(1, 2)), OneVsRestClassifier(LogisticRegression(max_iter=1000))
        )
        reference.fit([t for t, _ in rows[:split]], targets)
        from sklearn.metrics import f1_score

        predicted = reference.predict([t for t, _ in rows[split:]])
        gold = binarizer.transform([labels.split("|") for _, labels in rows[split:]])
        self.assertAllClose(results["bag_of_words_micro_f1"], f1_score(gold, predicted, average="micro"))
        self.assertAllClose(results["bag_of_words_macro_f1"], f1_score(gold, predicted, average="macro"))
        self.assertFalse([name for name in results if name.startswith("bag_of_words_f1/")])


class BagOfWordsTest(tf.test.TestCase):
    def test_pairs_get_a_vectorizer_per_text(self):
        examples = [
            InputExample(str(i), f"{a} film", f"{b} film", "same" if a == b else "other")
            for i, (a, b) in enumerate(
                [("good", "good"), ("bad", "good"), ("bad", "bad"), ("good", "bad")] * 3
            )
        ]
        model = baseline.BagOfWords.fit(examples, "classification", ["other", "same"])
        self.assertTrue(model.pair)
        features = model.model[0].transform(np.array([["good film", "bad film"]], dtype=object))
        # "good" of text a and "good" of text b are different features.
        self.assertEqual(features.shape[1], 2 * len(model.model[0].transformers_[0][1].vocabulary_))

    def test_a_large_file_is_sampled_uniformly_and_counted(self):
        examples = [InputExample(str(i), f"word{i % 7} text", None, str(i % 2)) for i in range(50)]
        model = baseline.BagOfWords.fit(examples, "classification", ["0", "1"], max_rows=20)
        self.assertEqual((model.num_examples, model.num_fitted), (50, 20))
        counts = np.zeros(50)
        for seed in range(400):
            sample, total = baseline._sample(range(50), 10, seed)
            self.assertEqual(total, 50)
            self.assertEqual(sample, sorted(sample))  # in the file's order
            counts[sample] += 1
        # Each row is drawn with probability 10/50: 80 times in 400 draws, give or take.
        self.assertBetween(counts.min(), 50, 80)
        self.assertBetween(counts.max(), 80, 110)
