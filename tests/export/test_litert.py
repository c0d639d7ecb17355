"""The TensorFlow-free LiteRT client (bert_tf.serving.litert) and the file's packed signature.

Its packer against the graph packer the task SavedModel runs (`pack_sequences`), on many
random batches; its raw-text outputs for regression, multi-label and pair models against
the Keras model on the original features (tokenized by bert_tf's tokenizer, cut by the
original `_truncate_seq_pair`); and its errors. The fine-tuned classifier's files, raw text
against the task SavedModel in a process without TensorFlow, are in test_quantize.py.
"""

import json
import os
import random
import tempfile
from unittest import mock

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models import BertEncoder
from bert_tf.preprocessing.packing import pack_sequences
from bert_tf.serving import litert_conversion as tflite
from bert_tf.serving.litert import pack
from bert_tf.tasks.classification.family import ClassificationFamily
from bert_tf.tasks.classification.litert import LiteRTClassifier
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.finetuned import FinetunedModelInfo
from bert_tf.tokenization import BertTokenizer
from tests.harness.exports import VOCAB, WORDS, export_config
from tests.harness.reference import original_features

SEQ_LENGTH = 24


def write_export(root: str, model, info: FinetunedModelInfo) -> str:
    """A --kind=tflite folder of an in-memory model, as export_tflite writes it."""
    folder = tempfile.mkdtemp(prefix=f"{info.kind}_", dir=root)
    with open(os.path.join(folder, "model.tflite"), "wb") as file:
        file.write(tflite.convert(model, info))
    with open(VOCAB, encoding="utf-8") as source, open(os.path.join(folder, "vocab.txt"), "w") as target:
        target.write(source.read())
    export_info = {
        "kind": "tflite",
        "task_kind": info.kind,
        "label_list": info.label_list,
        "seq_length": SEQ_LENGTH,
        "lower_case": True,
    }
    if info.option("threshold") is not None:
        export_info["threshold"] = info.option("threshold")
    with open(os.path.join(folder, "export_info.json"), "w") as file:
        json.dump(export_info, file)
    return folder


class PackTest(tf.test.TestCase):
    def test_same_rows_as_the_graph_packer_on_random_batches(self):
        rng = np.random.default_rng(3)
        for _ in range(200):
            count = int(rng.integers(1, 12))
            lengths = rng.integers(2, 16, count)
            lengths[rng.random(count) < 0.3] = lengths[0]  # ties: placed in batch order by both
            sequences = [[101, *rng.integers(1000, 2000, n - 2).tolist(), 102] for n in lengths]
            types = [rng.integers(0, 2, n).tolist() for n in lengths]
            got = pack(sequences, types)
            longest = int(lengths.max())
            padded = {
                "input_ids": [s + [0] * (longest - len(s)) for s in sequences],
                "segment_ids": [t + [0] * (longest - len(t)) for t in types],
                "input_mask": [[1] * len(s) + [0] * (longest - len(s)) for s in sequences],
            }
            want = pack_sequences(
                {k: tf.constant(v, tf.int32) for k, v in padded.items()}, row_length=longest
            )
            self.assertEqual(sorted(got), sorted(want))
            for name, value in want.items():
                self.assertAllEqual(got[name], value, msg=name)
                self.assertEqual(got[name].dtype, np.int32)
            # Every sequence's [CLS] is where cls_positions says.
            self.assertAllEqual(got["input_ids"].reshape(-1)[got["cls_positions"]], [101] * count)

    def test_an_empty_batch_or_sequence_is_refused(self):
        with self.assertRaisesRegex(ValueError, "at least one sequence, and no empty one"):
            pack([], [])
        with self.assertRaisesRegex(ValueError, "no empty one"):
            pack([[101, 102], []], [[0, 0], []])


class LiteRTClassifierTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        keras.utils.set_random_seed(5)
        cls.root = tempfile.mkdtemp(prefix="bert_tf_litert_")
        cls.tokenizer = BertTokenizer(VOCAB, lower_case=True)
        rng = random.Random(5)
        words = [*WORDS, "naïve", "Über", "東京", "don't", "3.14"]
        cls.texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(40)]
        cls.pairs = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(40)]

    def model_and_export(self, kind, num_classes, labels=None, threshold=None):
        rng = np.random.default_rng(num_classes)
        model = BertClassifier(BertEncoder(export_config()), num_classes=num_classes)
        ids = np.full([1, SEQ_LENGTH], 1000, np.int32)
        model({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": 0 * ids})
        for weight in model.weights:  # outputs that differ from text to text
            weight.assign(weight + rng.normal(0, 0.05, weight.shape).astype(np.float32))
        info = FinetunedModelInfo(
            "t", kind, labels, True, SEQ_LENGTH, {"threshold": threshold}, family="classification"
        )
        return model, write_export(self.root, model, info)

    def keras_logits(self, model, texts, pairs=None):
        tokens = self.tokenizer.tokenize(texts).to_list()
        others = self.tokenizer.tokenize(pairs).to_list() if pairs is not None else [None] * len(texts)
        rows = [original_features(a, b, SEQ_LENGTH) for a, b in zip(tokens, others, strict=True)]
        inputs = {
            name: np.array([row[i] for row in rows], np.int32)
            for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))
        }
        return model(inputs).numpy()

    def test_regression_on_pairs_cut_as_the_original(self):
        model, folder = self.model_and_export("regression", 1)
        classifier = LiteRTClassifier(folder, num_threads=2)
        want = self.keras_logits(model, self.texts, self.pairs)[:, 0]
        got = classifier(self.texts, text_pairs=self.pairs)["score"]
        self.assertGreater(np.std(want), 1e-3)
        self.assertAllClose(got, want, atol=1e-5, rtol=0)
        self.assertAllClose(classifier(self.texts[3], self.pairs[3])["score"], want[3:4], atol=1e-5, rtol=0)
        with self.assertRaisesRegex(ValueError, "40 texts but 39 text_pairs: give one pair per text"):
            classifier(self.texts, text_pairs=self.pairs[1:])

    def test_multi_label_probabilities_and_labels_above_the_threshold(self):
        labels = ["io", "net", "text"]
        model, folder = self.model_and_export("multi_label", 3, labels, threshold=0.5)
        want = tf.sigmoid(self.keras_logits(model, self.texts)).numpy()
        # The threshold is export_info.json's: here one that splits the texts.
        threshold = float(np.median(want))
        info_file = os.path.join(folder, "export_info.json")
        with open(info_file) as file:
            info = json.load(file)
        with open(info_file, "w") as file:
            json.dump({**info, "threshold": threshold}, file)
        got = LiteRTClassifier(folder)(self.texts)
        self.assertAllClose(got["probabilities"], want, atol=1e-5, rtol=0)
        chosen = [[n for n, p in zip(labels, row, strict=True) if p > threshold] for row in want]
        self.assertEqual(got["labels"], chosen)
        self.assertGreater(len({tuple(row) for row in chosen}), 1)  # labels that depend on the text

    def test_classification_of_one_text_and_of_none(self):
        model, folder = self.model_and_export("classification", 2, ["neg", "pos"])
        classifier = LiteRTClassifier(folder)
        want = tf.nn.softmax(self.keras_logits(model, self.texts[:1])).numpy()
        got = classifier(self.texts[0])
        self.assertAllClose(got["probabilities"], want, atol=1e-5, rtol=0)
        self.assertEqual(got["label"], [["neg", "pos"][int(want[0].argmax())]])
        self.assertEqual(classifier([])["probabilities"].shape, (0, 2))

    def test_a_folder_it_cannot_serve_is_refused_with_the_fix(self):
        with self.assertRaisesRegex(ValueError, "holds no export_info.json: give the folder .*--kind=tflite"):
            LiteRTClassifier(self.root)
        folder = os.path.join(self.root, "span")
        os.makedirs(folder)
        with open(os.path.join(folder, "export_info.json"), "w") as file:
            json.dump({"kind": "tflite", "task_kind": "span"}, file)
        with self.assertRaisesRegex(
            ValueError,
            "a --kind=tflite export of a span model; LiteRTClassifier serves those of classification",
        ):
            LiteRTClassifier(folder)

    def test_a_file_without_the_packed_signature_is_refused_with_the_fix(self):
        model, folder = self.model_and_export("classification", 2, ["neg", "pos"])
        # A file as an earlier bert_tf wrote it: serving_default only.
        with mock.patch.object(ClassificationFamily, "litert_packed", return_value=False):
            content = tflite.convert(
                model, FinetunedModelInfo("t", "classification", ["neg", "pos"], True, 8)
            )
        with open(os.path.join(folder, "model.tflite"), "wb") as file:
            file.write(content)
        with self.assertRaisesRegex(ValueError, "has no serving_packed signature .*: export it again"):
            LiteRTClassifier(folder)

    def test_a_model_fine_tuned_on_windows_warns_that_one_window_is_read(self):
        _, folder = self.model_and_export("classification", 3, ["a", "b", "c"])
        info_file = os.path.join(folder, "export_info.json")
        with open(info_file) as file:
            info = json.load(file)
        with open(info_file, "w") as file:
            json.dump({**info, "doc_stride": 8}, file)
        with self.assertWarnsRegex(UserWarning, "first 24 pieces only: serve the task SavedModel"):
            LiteRTClassifier(folder)


if __name__ == "__main__":
    tf.test.main()
