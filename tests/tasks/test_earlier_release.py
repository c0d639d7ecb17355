"""Fine-tuned folders and exports an earlier release wrote still load and answer as they did.

tests/fixtures/release_0.1.0 (its README says how it was made): a fine-tuned folder per
family, with what that release's `predict` answered, and a task SavedModel and LiteRT export.
"""

import json
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

import bert_tf
from bert_tf.serving import litert
from bert_tf.serving.exporter import export_saved_model

RELEASE = Path(__file__).resolve().parents[1] / "fixtures" / "release_0.1.0"
CLASSES = {
    "classification": bert_tf.BertClassifier,
    "regression": bert_tf.BertClassifier,
    "multi_label": bert_tf.BertClassifier,
    "squad": bert_tf.BertSpanLabeler,
    "ner": bert_tf.BertTokenClassifier,
    "swag": bert_tf.BertMultipleChoice,
}


class EarlierReleaseTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.expected = json.loads((RELEASE / "expected.json").read_text())

    def test_every_familys_folder_predicts_as_it_did(self):
        for name, model_class in CLASSES.items():
            with self.subTest(family=name):
                model = model_class.from_pretrained(str(RELEASE / name))
                x, want = self.expected[name]["x"], self.expected[name]["outputs"]
                got = model.predict([tuple(item) for item in x] if name in ("squad", "swag") else x)
                if name == "squad":
                    self.assertEqual([str(answer) for answer in got], want)
                else:
                    for ours, theirs in zip(got, want, strict=True):
                        self.assertAllClose(ours, np.asarray(theirs, np.float32), atol=1e-5)

    def test_a_folder_exports_and_the_earlier_exports_serve(self):
        logits = np.asarray(self.expected["classification"]["outputs"], np.float32)
        texts = self.expected["classification"]["x"]
        probabilities = tf.nn.softmax(logits).numpy()
        for export_dir in (
            str(RELEASE / "classification_export"),
            export_saved_model("task", str(RELEASE / "classification"), tempfile.mkdtemp() + "/task"),
        ):
            with self.subTest(export=export_dir):
                served = tf.saved_model.load(export_dir).signatures["serving_default"](
                    text=tf.constant(texts)
                )
                self.assertAllClose(served["probabilities"], probabilities, atol=1e-5)

    def test_the_earlier_litert_export_serves(self):
        from bert_tf.tasks.classification.litert import LiteRTClassifier

        logits = np.asarray(self.expected["classification"]["outputs"], np.float32)
        outputs = LiteRTClassifier(str(RELEASE / "classification_tflite"))(
            self.expected["classification"]["x"]
        )
        self.assertAllClose(outputs["probabilities"], tf.nn.softmax(logits).numpy(), atol=1e-4)
        # It names no client (that release had one), which `litert.load` says with both fixes.
        with self.assertRaisesRegex(ValueError, "earlier bert_tf.*client class.*or export it again"):
            litert.load(str(RELEASE / "classification_tflite"))
