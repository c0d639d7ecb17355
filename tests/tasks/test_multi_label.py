"""Multi-label classification and class weights: a synthetic multi-label task learns from the
Python API and serves the same labels from its SavedModel; the command line reads JSONL lists
and joined CSV cells; the metrics, the balanced weights and the weighted loss equal
scikit-learn's and a hand computation; each mistake gets one clear error before anything is
written."""

import json
import os
import random
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import accuracy_score, f1_score
from sklearn.utils.class_weight import compute_class_weight

import bert_tf
from bert_tf.errors import UsageError
from bert_tf.tasks import registry as families
from bert_tf.tasks.family import Predictions
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.runner import FinetuneSettings, run
from bert_tf.tokenization import BertTokenizer
from tests.harness.data import CITIES, FILLER, PEOPLE, tiny_checkpoint, write_vocab

# Each label is signalled by its own words somewhere among filler words.
TOPICS = {"people": PEOPLE[:2], "cities": CITIES[:2], "animals": ["dog", "cat"]}


def topic_rows(rng, n):
    """(text, labels): each topic present with probability 0.4 (so some texts have none)."""
    rows = []
    for _ in range(n):
        labels = [topic for topic in TOPICS if rng.random() < 0.4]
        words = [rng.choice(TOPICS[topic]) for topic in labels] + rng.sample(FILLER, rng.randint(2, 6))
        rng.shuffle(words)
        rows.append((" ".join(words), labels))
    return rows


def write_jsonl(path, rows, label_key="labels"):
    with open(path, "w") as handle:
        for text, labels in rows:
            handle.write(json.dumps({"text": text, label_key: labels}) + "\n")
    return path


def write_joined_csv(path, rows, separator="|"):
    with open(path, "w") as handle:
        handle.write("text,labels\n")
        for text, labels in rows:
            handle.write(f"{text},{separator.join(labels)}\n")
    return path


class MultiLabelTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="multi_label_")
        cls.vocab = write_vocab(cls.dir)
        keras.utils.set_random_seed(1)
        cls.checkpoint = tiny_checkpoint(cls.dir, cls.vocab)
        cls.tokenizer = BertTokenizer(cls.vocab)

    def family(self, **settings):
        values = dict(task="multi_label", output_dir="-", max_seq_length=32)
        values.update(settings)
        return families.make_family(FinetuneSettings.of(**values), self.tokenizer)

    def settings(self, output_dir, **changes):
        values = dict(
            task="multi_label",
            init_checkpoint=self.checkpoint,
            output_dir=output_dir,
            label_column="labels",
            max_seq_length=32,
            train_batch_size=16,
            num_train_epochs=1,
            verbose=0,
        )
        values.update(changes)
        return FinetuneSettings.of(**values)

    @pytest.mark.slow  # ~45 s of training; the served multi-label outputs: test_long_documents
    def test_learns_from_lists_and_joined_cells_and_serves_what_evaluation_predicts(self):
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        rows = topic_rows(random.Random(0), 200)
        texts, labels = [text for text, _ in rows], [names for _, names in rows]
        train = write_jsonl(os.path.join(root, "train.jsonl"), rows)
        dev = write_joined_csv(os.path.join(root, "train.csv"), rows, separator=";")  # the same rows
        out = os.path.join(root, "out")
        results = run(
            self.settings(
                out,
                train_file=train,
                eval_file=dev,
                label_separator=";",
                num_train_epochs=20,
                learning_rate=3e-3,
                class_weights="1,1,1",  # weighted batches, the same loss as none
                eval_every_steps=0,  # scored once, after training
                seed=1,
            )
        )
        self.assertGreaterEqual(results["micro_f1"], 0.95, results)
        self.assertContainsSubset(
            ["micro_f1", "macro_f1", "subset_accuracy", "f1/people", "f1/cities", "f1/animals", "eval_loss"],
            list(results),
        )
        with open(os.path.join(out, "eval_results.json")) as handle:
            self.assertEqual(json.load(handle), results)
        with open(os.path.join(out, "model", "task.json")) as handle:
            task = json.load(handle)
        self.assertEqual((task["kind"], task["threshold"]), ("multi_label", 0.5))
        self.assertEqual((task["label_list"], task["class_weights"]), (sorted(TOPICS), [1.0, 1.0, 1.0]))

        model = bert_tf.BertClassifier.from_pretrained(os.path.join(out, "model"))
        self.assertEqual(model.task_info.kind, "multi_label")  # how a multi-label model is told
        probabilities = model.predict(texts)
        self.assertEqual(probabilities.shape, (200, 3))
        self.assertTrue(((probabilities > 0) & (probabilities < 1)).all())  # sigmoids
        names = model.label_names(probabilities)
        predicted = np.array([[topic in row for topic in sorted(TOPICS)] for row in names])
        gold = np.array([[topic in row for topic in sorted(TOPICS)] for row in labels])
        self.assertAllClose(f1_score(gold, predicted, average="micro"), results["micro_f1"])
        # The prediction file lists the labels above the threshold, joined like the input.
        with open(os.path.join(out, "eval_predictions.tsv")) as handle:
            lines = handle.read().splitlines()[1:]
        self.assertEqual([line.split("\t")[1] for line in lines], [";".join(row) for row in names])

        serve = tf.saved_model.load(model.export(os.path.join(root, "export")))
        served = serve.signatures["serving_default"](text=tf.constant(texts))
        self.assertAllClose(served["probabilities"], probabilities, atol=1e-5)
        served_names = [
            [name.decode() for name in row[:count]]
            for row, count in zip(served["labels"].numpy(), served["num_labels"].numpy(), strict=True)
        ]
        self.assertEqual(served_names, names)

    @pytest.mark.slow  # the Python side of the command line's learning test above; ~40 s
    def test_learns_from_python_with_multi_hot_rows_and_balanced_weights(self):
        rows = topic_rows(random.Random(0), 200)
        texts = [text for text, _ in rows]
        multi_hot = np.array([[float(topic in names) for topic in TOPICS] for _, names in rows])
        keras.utils.set_random_seed(1)
        model = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, task="multi_label", label_list=list(TOPICS), max_seq_length=32
        )
        model.compile(learning_rate=3e-3)
        model.fit(texts, multi_hot, class_weight="balanced", batch_size=16, epochs=20, seed=1, verbose=0)
        scores = model.evaluate(texts, multi_hot)
        self.assertGreaterEqual(scores["micro_f1"], 0.95, scores)
        positives = multi_hot.sum(axis=0)
        self.assertAllClose(model.task_info.class_weights, (200 - positives) / positives)
        predicted = np.array(
            [[topic in names for topic in TOPICS] for names in model.label_names(model.predict(texts))]
        )
        self.assertAllClose(f1_score(multi_hot, predicted, average="micro"), scores["micro_f1"])

    def test_metrics_are_scikit_learns_on_random_predictions(self):
        rng = np.random.default_rng(3)
        family = self.family(threshold=0.3)
        family.label_list = ["a", "b", "c", "d"]
        labels = (rng.random((50, 4)) < 0.4).astype(np.float32)
        logits = rng.normal(size=(50, 4)).astype(np.float32)
        scores = family.score(None, Predictions(logits, labels))
        predicted = 1 / (1 + np.exp(-logits.astype(np.float64))) > 0.3
        expected = {
            "micro_f1": f1_score(labels, predicted, average="micro"),
            "macro_f1": f1_score(labels, predicted, average="macro"),
            "subset_accuracy": accuracy_score(labels, predicted),
            **{f"f1/{name}": f1_score(labels[:, i], predicted[:, i]) for i, name in enumerate("abcd")},
        }
        self.assertEqual(sorted(scores), sorted(expected))
        for name, value in expected.items():
            self.assertAllClose(scores[name], value, msg=name)
        self.assertEqual(family.main_metric, "micro_f1")

    def test_balanced_weights_are_scikit_learns(self):
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        rng = random.Random(2)
        single = [(text, rng.choice(["x", "y", "y", "z", "z", "z"])) for text, _ in topic_rows(rng, 60)]
        path = os.path.join(root, "single.csv")
        with open(path, "w") as handle:
            handle.write("text,label\n" + "".join(f"{text},{label}\n" for text, label in single))
        family = self.family(task="classification", train_file=path, class_weights="balanced")
        family.load("train")
        expected = compute_class_weight(
            "balanced", classes=np.array(family.label_list), y=[label for _, label in single]
        )
        self.assertAllClose(family.class_weights, expected)

        rows = topic_rows(rng, 60)
        path = write_jsonl(os.path.join(root, "multi.jsonl"), rows)
        family = self.family(train_file=path, label_column="labels", class_weights="balanced")
        family.load("train")
        # Each label is a binary problem: its positives weighed by sklearn's balanced weight of
        # class 1 relative to class 0 (PyTorch's pos_weight).
        for name, weight in zip(family.label_list, family.class_weights, strict=True):
            binary = compute_class_weight(
                "balanced", classes=np.array([0, 1]), y=[name in r for _, r in rows]
            )
            self.assertAllClose(weight, binary[1] / binary[0], msg=name)

    def test_weighted_loss_is_the_hand_computed_one_packed_or_not(self):
        rows = topic_rows(random.Random(4), 12)
        single_rows = [(text, labels[0] if labels else "none") for text, labels in rows]
        cases = (
            ("classification", [label for _, label in single_rows], None, {"none": 4.0, "cities": 0.25}),
            ("multi_label", [names for _, names in rows], [2.0, 0.5, 3.0], None),
        )
        for task, y, weight_list, weight_dict in cases:
            labels = sorted({name for value in y for name in ([value] if isinstance(value, str) else value)})
            weights = np.array(weight_list or [weight_dict.get(name, 1.0) for name in labels], np.float32)
            keras.utils.set_random_seed(1)
            model = bert_tf.BertClassifier.from_pretrained(
                self.checkpoint, task=task, label_list=labels, max_seq_length=32
            )
            model.compile()
            losses, outputs = [], []
            for packing in (True, False):
                family = model.preprocessor.family(
                    packing=packing, options={"class_weights": weight_list or weight_dict}
                )
                data = family.python_data([text for text, _ in rows], y, "train")
                self.assertAllClose(family.class_weights, weights)
                x, target, sample_weight = next(iter(family.dataset(data, batch_size=12, training=True)))
                self.assertEqual("cls_positions" in x, packing)
                logits = model(x).numpy().astype(np.float64)
                target = target.numpy()
                if task == "multi_label":  # sigmoid cross-entropy, positives by their label's weight
                    log_p, log_not_p = -np.logaddexp(0, -logits), -np.logaddexp(0, logits)
                    terms = -(target * log_p + (1 - target) * log_not_p) * np.where(target > 0, weights, 1.0)
                    expected = terms.sum() / terms.size
                else:  # softmax cross-entropy, each example by its class's weight
                    log_softmax = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
                    terms = -log_softmax[np.arange(12), target] * weights[target]
                    expected = terms.sum() / 12
                loss = model.compute_loss(x, target, model(x), sample_weight=sample_weight)
                self.assertAllClose(float(loss), expected, rtol=1e-5, msg=f"{task} packing={packing}")
                losses.append(float(loss))
                if task == "multi_label":  # evaluation's outputs: packed rows, or rows batched by length
                    outputs.append(family.predict(model, data, batch_size=5))
            self.assertAllClose(losses[0], losses[1], rtol=1e-5, msg=task)
        self.assertAllClose(outputs[0].outputs, outputs[1].outputs, atol=1e-5)
        self.assertAllEqual(outputs[0].labels, outputs[1].labels)

    def test_bad_input_gets_one_clear_error_and_nothing_is_written(self):
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        rows = topic_rows(random.Random(5), 8)
        lists = write_jsonl(os.path.join(root, "lists.jsonl"), rows)
        scalars = os.path.join(root, "scalar.jsonl")
        with open(scalars, "w") as handle:
            handle.write('{"text": "alice", "labels": ["people"]}\n{"text": "paris", "labels": "cities"}\n')
        empty = write_jsonl(os.path.join(root, "empty.jsonl"), [(text, []) for text, _ in rows])
        unseen = write_jsonl(os.path.join(root, "unseen.jsonl"), [("bob in oslo", ["people", "places"])])
        cases = [
            (
                dict(task="classification", train_file=lists),
                TaskDataError,
                r"lists.jsonl line 1: .* is a list",
            ),
            (dict(train_file=scalars), TaskDataError, r"scalar.jsonl line 2: .* 'cities', not a list"),
            (dict(train_file=empty), TaskDataError, "has no labels"),
            (dict(train_file=lists, eval_file=unseen), TaskDataError, r"unseen.jsonl line 1: label 'places'"),
            (dict(train_file=lists, class_weights="1,2"), TaskDataError, "2 given for 3 labels"),
            (dict(train_file=lists, class_weights="1,0,2"), TaskDataError, "weight 0.0; .* positive"),
            (dict(train_file=lists, class_weights="heavy"), TaskDataError, "give 'balanced' or numbers"),
        ]
        for index, (changes, error, message) in enumerate(cases):
            out = os.path.join(root, f"out{index}")
            with self.assertRaisesRegex(error, message):
                run(self.settings(out, **changes))
            self.assertFalse(os.path.exists(out), changes)
        for task, changes, message in (
            (
                "ner",
                dict(class_weights="balanced"),
                "--class_weights is not an option of the token family's tasks",
            ),
            ("stsb", dict(class_weights="1,2"), "is a regression task"),
            ("classification", dict(threshold=0.3), "--threshold decides a multi_label task's labels"),
        ):
            with self.assertRaisesRegex(UsageError, message):
                self.family(task=task, **changes)
        for threshold in (0.0, 1.0, 1.5):
            with self.assertRaisesRegex(UsageError, "--threshold must be .* between 0 and 1"):
                self.family(task="multi_label", threshold=threshold)

        model = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, task="multi_label", label_list=list(TOPICS), max_seq_length=32
        )
        model.compile()
        single = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, label_list=["a", "b"], max_seq_length=32
        )
        single.compile()
        python_cases = [
            (model, dict(y=["people", "cities"]), r"y\[0\] is 'people'; a multi_label example takes a list"),
            (model, dict(y=[["people"], ["towns"]]), r"y\[1\] is 'towns', not one of the model's labels"),
            (model, dict(y=[[1, 0], [0, 1]]), r"y\[0\] is \[1, 0\]: .* 3 numbers"),
            (model, dict(y=[["people"], []], class_weight=[1.0]), "1 given for 3 labels"),
            (
                model,
                dict(y=[["people"], []], class_weight={"towns": 2.0}),
                "'towns' is not one of the labels",
            ),
            (single, dict(y=[["a", "b"], ["a"]]), r"y\[0\] is a list .* task='multi_label'"),
        ]
        for target, kwargs, message in python_cases:
            with self.assertRaisesRegex(UsageError, message):
                target.fit(["alice in paris", "a dog"], epochs=1, verbose=0, **kwargs)
        with self.assertRaisesRegex(UsageError, "label_list is empty"):
            bert_tf.BertClassifier.from_pretrained(self.checkpoint, task="multi_label", label_list=[])
        with self.assertRaisesRegex(UsageError, "threshold"):
            bert_tf.BertClassifier.from_pretrained(
                self.checkpoint, task="multi_label", label_list=["a"], threshold=1.0
            )
