"""Long documents: texts past max_seq_length read in windows every doc_stride pieces.

Checked against run_squad's own window and max-context rules, transcribed in plain Python
(tests/preprocessing/original_rules.py), with the model run on each window alone: a
classifier's answer is the mean (or max) of its windows' logits, a tagger reads each word
from the window where it has the most context. Then: the answers do not depend on the
batch or its padding; the task SavedModel answers what evaluation scores; a synthetic task
whose label sits past the first window is learnt with windows and not without; and every
bad setting gets one clear error before anything is written.
"""

import json
import logging
import os
import random

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.errors import UsageError
from bert_tf.preprocessing.base import MODEL_INPUTS
from bert_tf.serving.task import export_task
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.registry import make_family
from bert_tf.tasks.runner import FinetuneSettings, run
from bert_tf.tasks.token import entities as ner_entities
from tests.harness.data import FILLER, NEGATIVE, POSITIVE, tiny_checkpoint, write_csv, write_vocab
from tests.harness.reference import doc_spans, max_context_span, pieces_of

HF_TINY = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf_tiny")
WORDS = "the film was long and its story went on past every scene of unaffable music".split()


def long_texts(rng, n, longest=60):
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, longest))) for _ in range(n)]


def run_rows(model, rows):
    """The model on hand-made rows (ids, segment ids), padded into one batch: [rows, ...]."""
    length = max(len(ids) for ids, _ in rows)

    def pad(values):
        return tf.constant([v + [0] * (length - len(v)) for v in values], tf.int32)

    features = {
        "input_ids": pad([ids for ids, _ in rows]),
        "input_mask": pad([[1] * len(ids) for ids, _ in rows]),
        "segment_ids": pad([segments for _, segments in rows]),
    }
    return list(np.asarray(model({name: features[name] for name in MODEL_INPUTS}, training=False)))


class WindowedPredictionTest(tf.test.TestCase):
    """Predictions against run_squad's windows, batch and padding invariance, the SavedModel."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        tf.keras.utils.set_random_seed(3)
        cls.classifier = bert_tf.BertClassifier.from_pretrained(
            HF_TINY, label_list=["a", "b", "c"], max_seq_length=16, doc_stride=5
        )
        cls.tagger = bert_tf.BertTokenClassifier.from_pretrained(
            HF_TINY, label_list=["O", "B-X", "I-X", "B-Y"], max_seq_length=12, doc_stride=4
        )
        rng = random.Random(0)
        cls.texts = long_texts(rng, 10) + ["music"]

    def reference_classifier(self, model, texts, firsts=None, pooling="mean"):
        """Windows of run_squad's rule over the (second) text, the first text whole."""
        tokenizer, answers = model.tokenizer, []
        cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
        for index, text in enumerate(texts):
            pieces = pieces_of(tokenizer, [text])[0]
            first = pieces_of(tokenizer, [firsts[index]])[0] if firsts else None
            head = [cls_id, *first, sep_id] if first is not None else [cls_id]
            room = 16 - len(head) - 1
            rows = [
                (
                    [*head, *pieces[start : start + length], sep_id],
                    [0] * len(head) + [1 if first is not None else 0] * (length + 1),
                )
                for start, length in doc_spans(len(pieces), room, 5) or [(0, 0)]
            ]
            logits = np.stack(run_rows(model, rows))
            answers.append(logits.mean(axis=0) if pooling == "mean" else logits.max(axis=0))
        return np.stack(answers)

    def test_a_classifier_pools_the_logits_of_run_squads_windows(self):
        expected = self.reference_classifier(self.classifier, self.texts)
        for batch_size in (1, 64):  # each window alone (a text's windows in several batches), all together
            self.assertAllClose(
                self.classifier.predict(self.texts, batch_size=batch_size), expected, atol=1e-5
            )
        self.assertGreater(max(len(t.split()) for t in self.texts), 30)  # several windows, really
        # Regression: the score is the mean of the windows' scores.
        regressor = bert_tf.BertClassifier.from_pretrained(
            HF_TINY, num_classes=1, max_seq_length=16, doc_stride=5
        )
        self.assertAllClose(
            regressor.predict(self.texts, batch_size=3),
            self.reference_classifier(regressor, self.texts),
            atol=1e-5,
        )

    def test_max_pooling_and_pairs_keep_the_first_text_whole(self):
        model = bert_tf.BertClassifier.from_pretrained(  # MRPC: pairs
            HF_TINY, task="mrpc", max_seq_length=16, doc_stride=5, window_pooling="max"
        )
        firsts = ["a question", "the long film", "music"] * 4
        pairs = list(zip(firsts, self.texts, strict=False))
        expected = self.reference_classifier(
            model, [b for _, b in pairs], [a for a, _ in pairs], pooling="max"
        )
        self.assertAllClose(model.predict(pairs, batch_size=2), expected, atol=1e-5)

    def test_a_tagger_reads_each_word_from_its_max_context_window(self):
        tokenizer = self.tagger.tokenizer
        sentences = [text.split() for text in self.texts if text] + [["one"]]
        outputs = self.tagger.predict(sentences, batch_size=2)  # a sentence's windows in several batches
        for words, word_logits in zip(sentences, outputs, strict=True):
            word_pieces = [p or [tokenizer.unk_id] for p in pieces_of(tokenizer, words)]
            pieces = [piece for p in word_pieces for piece in p]
            spans = doc_spans(len(pieces), 12 - 2, 4)
            logits = run_rows(
                self.tagger,
                [([tokenizer.cls_id, *pieces[s : s + n], tokenizer.sep_id], [0] * (n + 2)) for s, n in spans],
            )
            expected, first = [], 0
            for p in word_pieces:
                window = max_context_span(spans, first)
                expected.append(logits[window][1 + first - spans[window][0]])
                first += len(p)
            # Every word exactly once: one logits row each, none missing (NaN), the reference's.
            self.assertEqual(word_logits.shape, (len(words), 4))
            self.assertAllClose(word_logits, np.stack(expected), atol=1e-5)
        tags = self.tagger.label_names(outputs)
        self.assertEqual([len(t) for t in tags], [len(s) for s in sentences])

    def test_multi_label_pools_the_logits_then_thresholds_and_its_saved_model_agrees(self):
        model = bert_tf.BertClassifier.from_pretrained(
            HF_TINY, task="multi_label", label_list=["x", "y", "z"], max_seq_length=16, doc_stride=5
        )
        # The probabilities are the sigmoid of the windows' mean logits (not a mean of sigmoids).
        expected = tf.sigmoid(self.reference_classifier(model, self.texts)).numpy()
        probabilities = model.predict(self.texts, batch_size=3)
        self.assertAllClose(probabilities, expected, atol=1e-5)
        # Saved and read back with a threshold among the probabilities: some labels on, some off.
        directory = self.get_temp_dir()
        threshold = float(np.median(probabilities))
        model = bert_tf.BertClassifier.from_pretrained(
            model.save(os.path.join(directory, "saved")), threshold=threshold
        )
        model.export(os.path.join(directory, "multi_label"))
        served = tf.saved_model.load(os.path.join(directory, "multi_label")).signatures["serving_default"]
        outputs = served(text=tf.constant(self.texts))
        self.assertAllClose(outputs["probabilities"].numpy(), expected, atol=1e-5)
        got = [
            [label.decode() for label in row[:count]]
            for row, count in zip(outputs["labels"].numpy(), outputs["num_labels"].numpy(), strict=True)
        ]
        self.assertEqual(got, model.label_names(probabilities))
        self.assertTrue(0 < sum(len(labels) for labels in got) < 3 * len(self.texts))

    def test_the_saved_model_answers_what_evaluation_scores(self):
        directory = self.get_temp_dir()
        # Saved, the model keeps its windows (task.json), which the command line's export reads.
        saved = self.classifier.save(os.path.join(directory, "saved"))
        with open(os.path.join(saved, "task.json")) as handle:
            info = json.load(handle)
        self.assertEqual((info["doc_stride"], info["window_pooling"]), (5, "mean"))
        export_task(saved, os.path.join(directory, "classifier"))
        served = tf.saved_model.load(os.path.join(directory, "classifier")).signatures["serving_default"]
        probabilities = served(text=tf.constant(self.texts))["probabilities"].numpy()
        # Classification: the export's probabilities are the softmax of evaluation's pooled logits.
        labels = ["a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "b"]
        logits = self.classifier.predict(self.texts, batch_size=4)
        self.assertAllClose(probabilities, tf.nn.softmax(logits).numpy(), atol=1e-5)
        self.assertAllClose(
            self.classifier.evaluate(self.texts, labels)["accuracy"],
            np.mean(
                [
                    self.classifier.label_list[i] == y
                    for i, y in zip(probabilities.argmax(-1), labels, strict=True)
                ]
            ),
        )
        # Tagging: the export's entities are those of evaluation's word tags.
        texts = [text for text in self.texts if text]
        self.tagger.export(os.path.join(directory, "tagger"))
        served = tf.saved_model.load(os.path.join(directory, "tagger")).signatures["serving_default"]
        entities = served(text=tf.constant(texts))
        sentences = [text.split() for text in texts]
        tag_ids = [ner_entities.word_tag_ids(logits).numpy() for logits in self.tagger.predict(sentences)]
        found = ner_entities.entity_words(tf.ragged.constant(tag_ids, tf.int64), self.tagger.label_list)
        for row, text in enumerate(texts):
            starts = np.cumsum([0] + [len(word) + 1 for word in sentences[row]])
            expected = [
                (int(starts[first]), int(starts[last] + len(sentences[row][last])), label.decode())
                for r, first, last, label in zip(
                    found.row.numpy(),
                    found.first_word.numpy(),
                    found.last_word.numpy(),
                    found.type_name.numpy(),
                    strict=True,
                )
                if r == row
            ]
            count = int(entities["num_entities"][row])
            got = [
                (
                    int(entities["entity_start"][row, i]),
                    int(entities["entity_end"][row, i]),
                    entities["entity_label"][row, i].numpy().decode(),
                )
                for i in range(count)
            ]
            self.assertEqual(got, expected, text)
        self.assertGreater(int(tf.reduce_sum(entities["num_entities"])), 0)


@pytest.mark.slow  # ~60 s of training; windows and their pooling: WindowedPredictionTest
class LearningTest(tf.test.TestCase):
    def test_windows_learn_a_label_that_truncation_never_sees(self):
        """The polarity word sits past the first window: cut at max_seq_length, a text is
        filler only (chance); read in windows, its label is learnt. The same recipe from
        Python (cut) and from the command line (windows), which give the same weights
        (tests/tasks/test_keras_task.py)."""
        directory = self.get_temp_dir()
        checkpoint = tiny_checkpoint(directory, write_vocab(directory))
        rng = random.Random(0)

        def rows(n):
            texts, labels = [], []
            for _ in range(n):
                words = [rng.choice(FILLER) for _ in range(rng.randint(14, 18))]
                positive = rng.random() < 0.5
                words.insert(rng.randint(14, len(words)), rng.choice(POSITIVE if positive else NEGATIVE))
                texts.append(" ".join(words))
                labels.append("pos" if positive else "neg")
            return texts, labels

        train, test = rows(128), rows(80)
        # Cut (Python): the examples are counted as cut, with the way to read them whole.
        tf.keras.utils.set_random_seed(1)
        model = bert_tf.BertClassifier.from_pretrained(
            checkpoint, label_list=["neg", "pos"], max_seq_length=16
        )
        model.compile(learning_rate=3e-3)
        with self.assertLogs("bert_tf.tasks.family", logging.WARNING) as logs:
            model.fit(*train, batch_size=16, epochs=8, seed=1, verbose=0)
        self.assertIn("128 of 128 examples were longer than max_seq_length=16", logs.output[0])
        self.assertIn("--doc_stride=N (doc_stride=N in Python) reads them whole", logs.output[0])
        truncated = model.evaluate(*test)["accuracy"]
        # Windows (the command line): nothing cut, one answer per text.
        files = {
            name: write_csv(
                os.path.join(directory, f"{name}.csv"),
                [{"text": t, "label": y} for t, y in zip(*data, strict=True)],
            )
            for name, data in (("train", train), ("test", test))
        }
        output_dir = os.path.join(directory, "windows")
        recipe = dict(task="classification", max_seq_length=16, eval_file=files["test"], verbose=0)
        with self.assertNoLogs("bert_tf.tasks.family", logging.WARNING):
            windows = run(
                FinetuneSettings.of(
                    output_dir=output_dir,
                    init_checkpoint=checkpoint,
                    train_file=files["train"],
                    learning_rate=3e-3,
                    train_batch_size=16,
                    num_train_epochs=8,
                    eval_every_steps=0,
                    seed=1,
                    **recipe,
                    options=dict(doc_stride=7, window_pooling="max"),
                )
            )["accuracy"]
        print("long documents, test accuracy: truncated", truncated, "windows", windows)
        self.assertLess(truncated, 0.7)
        self.assertGreater(windows, 0.9)
        with open(os.path.join(output_dir, "data_stats.json")) as handle:
            stats = json.load(handle)
        self.assertEqual(stats["train"]["num_truncated"], 0)
        self.assertGreater(stats["train"]["num_features"], stats["train"]["num_examples"])  # windows
        with open(os.path.join(output_dir, "model", "task.json")) as handle:
            info = json.load(handle)
        self.assertEqual((info["doc_stride"], info["window_pooling"]), (7, "max"))
        with open(os.path.join(output_dir, "eval_predictions.tsv")) as handle:
            self.assertLen(handle.read().splitlines(), 1 + 80)  # a header, one answer per text
        # The saved model evaluates in the same windows without being told again.
        again = os.path.join(directory, "again")
        scores = run(
            FinetuneSettings.of(output_dir=again, init_checkpoint=os.path.join(output_dir, "model"), **recipe)
        )
        with open(os.path.join(again, "data_stats.json")) as handle:
            self.assertEqual(json.load(handle)["eval"], stats["eval"])
        self.assertAllClose(scores["accuracy"], windows)
        # ... and pools them as told when told: --window_pooling=mean over the saved max.
        mean = run(
            FinetuneSettings.of(
                output_dir=os.path.join(directory, "mean"),
                init_checkpoint=os.path.join(output_dir, "model"),
                **recipe,
                options=dict(window_pooling="mean"),
            )
        )
        self.assertNotAllClose(mean["eval_loss"], scores["eval_loss"])


class CommandLineTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.vocab = write_vocab(self.dir)
        rng = random.Random(0)
        rows = [
            {"text": " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 30))), "label": str(i % 2)}
            for i in range(12)
        ]
        self.csv = write_csv(os.path.join(self.dir, "train.csv"), rows)
        self.base = dict(
            task="classification",
            vocab_file=self.vocab,
            bert_config="bert_tiny",
            max_seq_length=16,
            train_file=self.csv,
            eval_file=self.csv,
            train_batch_size=4,
            num_train_epochs=1.0,
            verbose=0,
        )

    def test_bad_settings_get_one_clear_error_and_nothing_is_written(self):
        out = os.path.join(self.dir, "out")
        cases = [
            ({"doc_stride": 0}, "--doc_stride must be a positive"),
            ({"doc_stride": -4}, "--doc_stride must be a positive"),
            ({"doc_stride": 14}, "--doc_stride=14 is not below the 14 pieces"),
            ({"doc_stride": 13, "text_b_column": "label"}, "--doc_stride=13 is not below the 13 pieces"),
            ({"doc_stride": 6, "window_pooling": "median"}, "--window_pooling=median"),
            (
                {"doc_stride": 6, "task": "swag"},
                "--doc_stride is not an option of the choice family's tasks \\(swag\\)",
            ),
            ({"doc_stride": 60, "task": "ner"}, "--doc_stride=60 is not below the 14 pieces"),
        ]
        for change, message in cases:
            with self.subTest(change=change), self.assertRaisesRegex(UsageError, message):
                run(FinetuneSettings.of(output_dir=out, **{**self.base, **change}))
            self.assertFalse(os.path.exists(out))
        # A pair's first text is kept whole: one that fills the row is a data error, named.
        long_first = write_csv(
            os.path.join(self.dir, "pairs.csv"), [{"text": "the " * 20, "text_b": "film", "label": "0"}]
        )
        settings = {**self.base, "train_file": long_first, "eval_file": None, "text_b_column": "text_b"}
        with self.assertRaisesRegex(TaskDataError, "first text of a pair fills the 16 pieces"):
            run(FinetuneSettings.of(output_dir=out, **settings, options=dict(doc_stride=4)))
        self.assertFalse(os.path.exists(out))
        # Python: the same checks, from from_pretrained.
        with self.assertRaisesRegex(UsageError, "--doc_stride=14 is not below"):
            bert_tf.BertClassifier.from_pretrained(HF_TINY, num_classes=2, max_seq_length=16, doc_stride=14)
        with self.assertRaisesRegex(UsageError, "--doc_stride is not an option of the choice family"):
            bert_tf.BertMultipleChoice.from_pretrained(HF_TINY, max_seq_length=16, doc_stride=4)
        with self.assertRaisesRegex(UsageError, "--window_pooling=sum"):
            bert_tf.BertClassifier.from_pretrained(HF_TINY, num_classes=2, doc_stride=4, window_pooling="sum")
        # Settings alone (what the flags fill in), without a run.
        with self.assertRaisesRegex(UsageError, "not below the 126 pieces"):
            make_family(FinetuneSettings.of(task="sst2", output_dir="-", options=dict(doc_stride=126)), None)
