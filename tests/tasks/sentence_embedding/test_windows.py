"""Long texts read in windows (`doc_stride`): a text's vector is the mean of its windows'
vectors, each window encoded on its own (checked against windows cut here in plain Python,
every `doc_stride` pieces), the same through `encode`, the command line's evaluation and
predictions, and the task SavedModel; texts that fit a row are unchanged."""

import json
import math
import os
import random
import tempfile

import keras
import numpy as np
import tensorflow as tf

import bert_tf
from bert_tf.errors import UsageError
from bert_tf.serving.exporter import export_saved_model
from bert_tf.tasks.runner import run
from bert_tf.tasks.settings import FinetuneSettings
from tests.harness import data
from tests.tasks.sentence_embedding.test_family import topic_pairs, write_table

MAX_SEQ_LENGTH, DOC_STRIDE = 16, 5  # windows of 14 pieces, every 5


def long_text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice([*data.FILLER, *data.COLORS, *data.ANIMALS]) for _ in range(words))


def python_windows(pieces: list[int], room: int, stride: int) -> list[list[int]]:
    """The windows of a text, written out: `room` pieces from every `stride`-th piece, until one
    reaches the text's end."""
    count = 1 + max(0, math.ceil((len(pieces) - room) / stride))
    return [pieces[start * stride : start * stride + room] for start in range(count)]


class WindowsTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="sentence_windows_")
        keras.utils.set_random_seed(2)
        cls.checkpoint = data.tiny_checkpoint(cls.dir, data.write_vocab(cls.dir))
        rng = random.Random(4)
        cls.texts = ["red dog", long_text(rng, 40), "blue owl hoots", long_text(rng, 23), long_text(rng, 14)]

    def _expected(self, model, texts) -> np.ndarray:
        """Each text's windows encoded one by one (rows of [CLS] window [SEP]), averaged, unit length."""
        tokenizer = model.preprocessor.tokenizer
        vectors = []
        for text in texts:
            pieces = tokenizer.tokenize(tf.constant([text])).merge_dims(1, -1)[0].numpy().tolist()
            window_vectors = []
            for window in python_windows(pieces, MAX_SEQ_LENGTH - 2, DOC_STRIDE):
                ids = np.array([[[tokenizer.cls_id, *window, tokenizer.sep_id]]])
                inputs = {
                    "input_ids": ids,
                    "input_mask": np.ones_like(ids),
                    "segment_ids": np.zeros_like(ids),
                }
                window_vectors.append(np.asarray(model(inputs))[0, 0])
            mean = np.mean(window_vectors, axis=0)
            vectors.append(mean / np.linalg.norm(mean))
        return np.array(vectors)

    def test_a_long_texts_vector_is_the_mean_of_its_windows(self):
        windowed = bert_tf.BertSentenceEncoder.from_pretrained(
            self.checkpoint, max_seq_length=MAX_SEQ_LENGTH, doc_stride=DOC_STRIDE
        )
        vectors = windowed.encode(self.texts, batch_size=2)
        self.assertAllClose(vectors, self._expected(windowed, self.texts), atol=1e-5)
        # A text's vector does not depend on its batch.
        self.assertAllClose(windowed.encode(self.texts[1:2]), vectors[1:2], atol=1e-5)
        # Texts that fit a row (2 and 14 pieces... here the short ones) are as without windows;
        # long ones are not what a cut text gives.
        cut = bert_tf.BertSentenceEncoder.from_pretrained(self.checkpoint, max_seq_length=MAX_SEQ_LENGTH)
        cut_vectors = cut.encode(self.texts)
        self.assertAllClose(vectors[[0, 2]], cut_vectors[[0, 2]], atol=1e-5)
        self.assertGreater(np.abs(vectors[1] - cut_vectors[1]).max(), 1e-3)

    def test_command_line_evaluation_predictions_and_saved_model_read_windows(self):
        root = tempfile.mkdtemp()
        rng = random.Random(5)
        train = topic_pairs(rng, 24)
        # Dev passages longer than a row: evaluation reads them in windows.
        dev = [(query, f"{passage} {long_text(rng, 30)}") for query, passage in topic_pairs(rng, 10)]
        header = ("query", "passage")
        results = run(
            FinetuneSettings.of(
                task="sentence_embedding",
                init_checkpoint=self.checkpoint,
                output_dir=os.path.join(root, "out"),
                train_file=write_table(os.path.join(root, "train.csv"), header, train),
                eval_file=write_table(os.path.join(root, "dev.csv"), header, dev),
                predict_file=write_table(os.path.join(root, "texts.csv"), ("query",), [(p,) for _, p in dev]),
                text_column="query",
                text_b_column="passage",
                max_seq_length=MAX_SEQ_LENGTH,
                doc_stride=DOC_STRIDE,
                train_batch_size=8,
                num_train_epochs=1,
                seed=1,
                verbose=0,
            )
        )
        # No eval loss: the training loss is of cut texts, not of windows.
        self.assertEqual(sorted(results), ["mrr_at_10", "recall_at_1", "recall_at_10"])
        out = os.path.join(root, "out")
        with open(os.path.join(out, "model", "task.json")) as handle:
            self.assertEqual(json.load(handle)["doc_stride"], DOC_STRIDE)
        model = bert_tf.BertSentenceEncoder.from_pretrained(os.path.join(out, "model"))
        passages = [passage for _, passage in dev]
        expected = self._expected(model, passages)
        self.assertAllClose(model.encode(passages), expected, atol=1e-5)
        self.assertAllClose(np.load(os.path.join(out, "eval_embeddings.npy"))[:, 1], expected, atol=1e-5)
        self.assertAllClose(np.load(os.path.join(out, "predict_embeddings.npy")), expected, atol=1e-5)
        # The task SavedModel reads every window too.
        export_dir = export_saved_model("task", os.path.join(out, "model"), os.path.join(root, "task"))
        served = tf.saved_model.load(export_dir).signatures["serving_default"](text=tf.constant(passages))
        self.assertAllClose(served["embedding"].numpy(), expected, atol=1e-5)

    def test_doc_stride_out_of_range_is_refused(self):
        for doc_stride, message in ((0, "positive number of word pieces"), (14, "not below the 14 pieces")):
            with self.assertRaisesRegex(UsageError, message):
                bert_tf.BertSentenceEncoder.from_pretrained(
                    self.checkpoint, max_seq_length=MAX_SEQ_LENGTH, doc_stride=doc_stride
                ).encode(["red dog"])
