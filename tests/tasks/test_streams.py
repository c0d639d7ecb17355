"""Streamed task data: batches, static shapes, length buckets and bad rows."""

import json
import os

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models import BertEncoder
from bert_tf.tasks import streams
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.registry import make_family
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.tokenization import BertTokenizer
from tests import harness
from tests.harness import unpack_sequences

VOCAB = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bert_uncased_vocab.txt")
WORDS = "the a cat dog sat on mat house tree big small red blue green ran fast slow".split()


class StreamsTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = BertTokenizer(VOCAB)

    def write(self, name, rows, header="text,label"):
        path = os.path.join(self.get_temp_dir(), name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(header + "\n" + "".join(f"{row}\n" for row in rows))
        return path

    def adapter(self, **changes):
        rng = np.random.default_rng(0)
        rows = [
            # Longer rows further down: the batches in file order have different widths.
            f"{' '.join(rng.choice(WORDS, 1 + i))},{'pos' if i % 3 else 'neg'}"
            for i in range(37)
        ]
        settings = FinetuneSettings.of(
            task="classification",
            output_dir=self.get_temp_dir(),
            train_file=self.write("train.csv", rows),
            eval_file=self.write("eval.csv", rows),
            max_seq_length=32,
            **changes,
        )
        adapter = make_family(settings, self.tokenizer)
        return adapter, adapter.load("train")[0], adapter.load("eval")[0]

    def test_dynamic_static_and_bucketed_batches(self):
        adapter, train, evaluation = self.adapter()
        self.assertEqual(adapter.count(train).num_examples, 37)
        self.assertEqual(adapter.label_list, ["neg", "pos"])
        widths = [x["input_ids"].shape[1] for x, _, _ in adapter.dataset(evaluation, 8)]
        self.assertTrue(all(width % 8 == 0 and width <= 32 for width in widths), widths)
        self.assertGreater(len(set(widths)), 1)

        # Static shapes: every batch [8, 32]; the last one filled with rows of weight 0.
        adapter.static = True
        batches = list(adapter.dataset(evaluation, 8))
        self.assertEqual({tuple(x["input_ids"].shape) for x, _, _ in batches}, {(8, 32)})
        self.assertEqual(sum(float(tf.reduce_sum(w)) for _, _, w in batches), 37.0)
        for x, _ in adapter.dataset(train, 8, training=True).take(5):
            self.assertEqual(x["input_ids"].shape, (8, 32))
        # Prediction keeps one row per example, in order, without the filling rows.
        predictions = adapter.predict(_MeanLogits(), evaluation, batch_size=8)
        self.assertEqual(predictions.outputs.shape, (37, 2))

        bucketed, train, _ = self.adapter(length_buckets=True)
        for x, y in bucketed.dataset(train, 4, training=True).take(12):
            lengths = x["input_mask"].numpy().sum(axis=1)
            width = x["input_ids"].shape[1]
            self.assertEqual(width % 8, 0)
            self.assertTrue((lengths > width - 8).all() and (lengths <= width).all(), (lengths, width))
            self.assertEqual(len(y), len(lengths))

    def test_packed_training_batches_hold_the_unpacked_batches_examples(self):
        packed, train, _ = self.adapter()  # packing is the default for classification
        unpacked, unpacked_train, _ = self.adapter(packing=False)
        pairs = zip(
            packed.dataset(train, 8, training=True).take(6),
            unpacked.dataset(unpacked_train, 8, training=True).take(6),
            strict=True,
        )
        rows_used = 0
        for (x, y), (plain_x, plain_y) in pairs:
            self.assertAllEqual(y, plain_y)  # the same examples, in the same order
            # Rows as long as the padded batch's.
            self.assertEqual(x["input_ids"].shape[1], plain_x["input_ids"].shape[1])
            rows_used += x["input_ids"].shape[0]
            rows = {name: value.numpy() for name, value in x.items()}
            lengths = plain_x["input_mask"].numpy().sum(axis=1)
            expected = [
                (plain_x["input_ids"].numpy()[i, :n].tolist(), plain_x["segment_ids"].numpy()[i, :n].tolist())
                for i, n in enumerate(lengths)
            ]
            self.assertEqual(unpack_sequences(rows), expected)
        self.assertLess(rows_used, 6 * 8)  # short examples share rows
        # Keras evaluation batches and static shapes are not packed.
        for x, _, _ in packed.dataset(train, 8).take(2):
            self.assertNotIn("cls_positions", x)
        packed.static = True
        for x, _ in packed.dataset(train, 8, training=True).take(2):
            self.assertEqual(x["input_ids"].shape, (8, 32))

    def test_packed_prediction_equals_one_example_at_a_time(self):
        adapter, _, evaluation = self.adapter()
        keras.utils.set_random_seed(1)
        model = BertClassifier(BertEncoder(harness.tiny_config(self.tokenizer.vocab_size)), num_classes=2)
        packed = adapter.predict(model, evaluation, batch_size=8)
        self.assertIn("cls_positions", next(iter(adapter.batches(evaluation, 8, by_length=True)))["inputs"])
        adapter.pack = False
        one_by_one = adapter.predict(model, evaluation, batch_size=1)
        self.assertAllClose(packed.outputs, one_by_one.outputs, atol=1e-5, rtol=0)
        self.assertAllEqual(packed.labels, one_by_one.labels)
        self.assertAllClose(packed.loss, one_by_one.loss, atol=1e-6)

    def test_a_step_compiled_per_shape_sees_few_batch_shapes_with_the_same_examples(self):
        # JAX's jit (and XLA on TensorFlow, as here) compiles the step once per batch shape.
        dynamic, train, evaluation = self.adapter()
        few, few_train, few_evaluation = self.adapter(jit_compile=True)
        ladder = streams.shape_ladder(8)
        shapes, dynamic_shapes = set(), set()
        pairs = zip(
            few.batches(few_train, 8, training=True).take(40),
            dynamic.batches(train, 8, training=True).take(40),
            strict=True,
        )
        for element, plain in pairs:
            x = element["inputs"]
            shapes.add((*x["input_ids"].shape, *x["cls_positions"].shape))
            dynamic_shapes.add((*plain["inputs"]["input_ids"].shape, *plain["inputs"]["cls_positions"].shape))
            self.assertAllEqual(element["labels"], plain["labels"])  # the same examples, in order
            rows = {name: value.numpy() for name, value in x.items()}
            plain_rows = {name: value.numpy() for name, value in plain["inputs"].items()}
            self.assertEqual(unpack_sequences(rows), unpack_sequences(plain_rows))
        # Rows of the full sequence length, as many as the ladder's next size (<= 6 shapes
        # for batches of 8, whatever the data); dynamic padding makes more.
        self.assertTrue({(rows, 32, 8) for rows in ladder} >= shapes, shapes)
        self.assertGreater(len(dynamic_shapes), len(shapes))
        # Evaluation: every batch 8 examples, the last one filled with weight 0.
        batches = list(few.batches(few_evaluation, 8, by_length=True))
        self.assertEqual({tuple(b["inputs"]["cls_positions"].shape) for b in batches}, {(8,)})
        self.assertEqual(sum(float(tf.reduce_sum(b["weight"])) for b in batches), 37.0)
        keras.utils.set_random_seed(1)
        model = BertClassifier(BertEncoder(harness.tiny_config(self.tokenizer.vocab_size)), num_classes=2)
        predicted = few.predict(model, few_evaluation, batch_size=8)
        dynamic.pack = False
        one_by_one = dynamic.predict(model, evaluation, batch_size=1)
        self.assertAllClose(predicted.outputs, one_by_one.outputs, atol=1e-5, rtol=0)
        self.assertAllEqual(predicted.labels, one_by_one.labels)
        self.assertAllClose(predicted.loss, one_by_one.loss, atol=1e-6)

    def test_prediction_by_length_returns_the_rows_in_example_order(self):
        adapter, _, evaluation = self.adapter(packing=False)
        self.assertTrue(adapter.predict_by_length)
        grouped = adapter.predict(_SumOfIds(), evaluation, batch_size=8)
        widths = [e["inputs"]["input_ids"].shape[1] for e in adapter.batches(evaluation, 8, by_length=True)]
        self.assertGreater(len(set(widths)), 1)
        adapter.predict_by_length = False
        one_by_one = adapter.predict(_SumOfIds(), evaluation, batch_size=1)
        self.assertAllEqual(grouped.outputs, one_by_one.outputs)
        self.assertAllEqual(grouped.labels, one_by_one.labels)
        # The rows grow longer down the file: in example order the sums mostly grow too.
        self.assertGreater(np.mean(np.diff(grouped.outputs[:, 0]) > 0), 0.6)

    def test_bad_rows_are_named(self):
        adapter, _, _ = self.adapter()
        # A row without its label (a short CSV row, a JSON null) names the file and line.
        adapter.settings.eval_file = self.write("short.csv", ["good film,pos", "fine"])
        with self.assertRaisesRegex(TaskDataError, r"/short.csv line 3: no label in column 'label'"):
            adapter.load("eval")
        adapter.settings.eval_file = self.write("bad_label.csv", ["good film,pos", "fine,meh"])
        with self.assertRaisesRegex(
            TaskDataError, r"bad_label.csv line 3: label 'meh' is not one of .*'neg', 'pos'"
        ):
            adapter.load("eval")
        adapter.settings.eval_file = self.write("empty.csv", ["good film,pos", ",neg"])
        with self.assertRaisesRegex(TaskDataError, "empty.csv line 3: the text is empty"):
            adapter.load("eval")
        adapter.settings.eval_file = self.write("extra.csv", ["good film,pos", "a,b,pos"])
        with self.assertRaisesRegex(TaskDataError, "extra.csv line 3: 3 fields, the header has 2"):
            adapter.load("eval")

    def test_a_squad_question_too_long_for_the_sequence(self):
        directory = self.get_temp_dir()
        path = os.path.join(directory, "train.json")
        qa = {
            "id": "a",
            "question": "where is paris " * 10,
            "answers": [{"text": "france", "answer_start": 12}],
        }
        with open(path, "w") as handle:
            json.dump({"data": [{"paragraphs": [{"context": "paris is in france", "qas": [qa]}]}]}, handle)
        settings = FinetuneSettings.of(task="squad", output_dir=directory, train_file=path, max_seq_length=16)
        adapter = make_family(settings, self.tokenizer)
        [train] = adapter.load("train")
        with self.assertRaisesRegex(
            TaskDataError,
            r"^the train data: sequence length 16 leaves no room .*max_query_length=64.*--max_seq_length",
        ):
            adapter.count(train)

    def test_squad_batches_count_windows(self):
        # Long contexts make several windows per question: a batch holds batch_size windows
        # (as run_squad batches features), whichever questions they come from.
        directory = self.get_temp_dir()
        rng = np.random.default_rng(0)
        paragraphs = []
        for number in range(6):
            context = " ".join(rng.choice(WORDS, 40 + 30 * number))
            qa = {
                "id": str(number),
                "question": "what sat",
                "answers": [{"text": context[:3], "answer_start": 0}],
            }
            paragraphs.append({"context": context, "qas": [qa]})
        path = os.path.join(directory, "squad.json")
        with open(path, "w") as handle:
            json.dump({"data": [{"paragraphs": paragraphs}]}, handle)
        settings = FinetuneSettings.of(
            task="squad",
            output_dir=directory,
            train_file=path,
            predict_file=path,
            max_seq_length=32,
            options=dict(doc_stride=16),
        )
        adapter = make_family(settings, self.tokenizer)
        [train] = adapter.load("train")
        windows = adapter.count(train).num_features
        self.assertGreater(windows, 3 * 6)
        sizes = [x["input_ids"].shape[0] for x, _, _ in adapter.dataset(train, 4)]
        self.assertEqual(sizes, [4] * (windows // 4) + ([windows % 4] if windows % 4 else []))
        for x, _ in adapter.dataset(train, 4, training=True).take(3):
            self.assertEqual(x["input_ids"].shape[0], 4)

    def test_ner_sentences_stream_whole(self):
        # A sentence's words and tags are one vector field each, whatever their number.
        path = os.path.join(self.get_temp_dir(), "ner.txt")
        with open(path, "w") as handle:
            handle.write("Paris B-LOC\nis O\nbig O\n\nRome B-LOC\n\nAlice B-PER\nsat O\n")
        settings = FinetuneSettings.of(task="ner", output_dir=self.get_temp_dir(), train_file=path)
        adapter = make_family(settings, self.tokenizer)
        train = adapter.load("train")[0]
        self.assertEqual(adapter.count(train).num_examples, 3)
        x, y = next(iter(adapter.dataset(train, 3, training=False)))[:2]
        tags = {tag: index for index, tag in enumerate(adapter.label_list)}
        ids = x["input_ids"].numpy()
        # [CLS] paris is big [SEP]: each word one piece, its tag on it; -1 elsewhere.
        vocab = {token: index for index, token in enumerate(self.tokenizer.vocab)}
        self.assertEqual(ids[0, :5].tolist(), [vocab[t] for t in ("[CLS]", "paris", "is", "big", "[SEP]")])
        self.assertEqual(y.numpy()[0, :5].tolist(), [-1, tags["B-LOC"], tags["O"], tags["O"], -1])

    def test_ner_eval_tags_must_be_training_tags(self):
        directory = self.get_temp_dir()
        train, evaluation = os.path.join(directory, "train.txt"), os.path.join(directory, "eval.txt")
        with open(train, "w") as handle:
            handle.write("Paris B-LOC\nis O\n\nRome B-LOC\n")
        with open(evaluation, "w") as handle:
            handle.write("Alice B-PER\n")
        settings = FinetuneSettings.of(
            task="ner", output_dir=directory, train_file=train, eval_file=evaluation
        )
        adapter = make_family(settings, self.tokenizer)
        adapter.load("train")
        with self.assertRaisesRegex(
            TaskDataError, r"eval.txt: sentence at line 1: tag 'B-PER' of word 'Alice'"
        ):
            adapter.load("eval")


class ResumableStreamTest(tf.test.TestCase):
    def test_a_restored_training_stream_continues_without_reading_past_passes_again(self):
        """tf.data's iterator checkpoint of a shuffled, repeated stream of record_chunks: a new
        stream restored from it yields what the saved one yields next, and its reader passes over
        at most one pass of records to get there, however many passes came before."""
        from bert_tf.tasks import streams
        from bert_tf.training.fit_input import InputPosition

        words = [f"{WORDS[i % len(WORDS)]} {WORDS[(3 * i) % len(WORDS)]}" for i in range(600)]

        def source():  # 600 records: three chunks of 256 a pass
            for index, text in enumerate(words):
                yield text, index

        signature = (tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.int64))

        def stream():
            chunks = streams.record_chunks(source, signature)
            batching = streams.Batching(batch_size=16, training=True, seed=5, shuffle_buffer=100)
            ids = chunks.unbatch().shuffle(batching.shuffle_buffer, seed=batching.seed).repeat()
            return ids.map(lambda record: record["y"]).batch(batching.batch_size), chunks

        prefix = os.path.join(self.get_temp_dir(), "input")
        for steps in (10, 130):  # in the 1st pass, and in the 4th (600 records a pass, 16 a batch)
            position = InputPosition()
            dataset, _ = stream()
            iterator = iter(position.track(dataset))
            for _ in range(steps):
                next(iterator)
            self.assertTrue(position.save(prefix))
            expected = [next(iterator).numpy().tolist() for _ in range(50)]

            resumed = InputPosition()
            resumed.restore_from(prefix)
            readers = []
            original = streams.RecordReader.__init__

            def init(reader, *args, original=original, readers=readers, **kwargs):
                original(reader, *args, **kwargs)
                readers.append(reader)

            with tf.compat.v1.test.mock.patch.object(streams.RecordReader, "__init__", init):
                dataset, _ = stream()
            restored = iter(resumed.track(dataset))
            self.assertEqual([next(restored).numpy().tolist() for _ in range(50)], expected)
            (reader,) = readers
            self.assertLessEqual(reader.records_passed_over, len(words), steps)


class _MeanLogits:
    """A stand-in model: two logits from the mean input id (no training needed)."""

    def __call__(self, inputs, training=False):
        mean = tf.reduce_mean(tf.cast(inputs["input_ids"], tf.float32), axis=1, keepdims=True)
        return tf.concat([mean, -mean], axis=1)


class _SumOfIds:
    """A stand-in model whose logits do not depend on padding: the sum of the real ids."""

    def __call__(self, inputs, training=False):
        ids = tf.cast(
            inputs["input_ids"] * tf.cast(inputs["input_mask"], inputs["input_ids"].dtype), tf.float32
        )
        total = tf.reduce_sum(ids, axis=1, keepdims=True)
        return tf.concat([total, -total], axis=1)
