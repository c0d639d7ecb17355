"""The export, extract_features and fill_mask command lines, from a Google-format checkpoint."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import export_pretrained
from bert_tf.config import load_config
from bert_tf.models import BertPretrainer
from bert_tf.serving.features import FeatureExtractor
from bert_tf.serving.mlm import FillMask
from bert_tf.tokenization import BertTokenizer
from tests.harness.exports import VOCAB
from tests.harness.reference import original_features

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINES = ["Hello, world!", "The cat ||| sat on the mat.", "", "naïve 東京 " * 20]


def run_module(module, *args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": REPO}
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )


class CommandLineTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        keras.utils.set_random_seed(5)
        cls.root = os.path.join(tempfile.gettempdir(), f"bert_tf_export_cli_{os.getpid()}")
        shutil.rmtree(cls.root, ignore_errors=True)
        cls.config = load_config("bert_tiny").replace(
            hidden_size=32, intermediate_size=64, max_position_embeddings=64
        )
        cls.pretrainer = BertPretrainer(cls.config)
        ids = np.ones((1, 4), np.int32)
        cls.pretrainer(
            {"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids, "masked_lm_positions": ids[:, :1]}
        )
        cls.checkpoint = os.path.join(cls.root, "google")
        export_pretrained(
            cls.pretrainer, cls.checkpoint, vocab_file=VOCAB, lower_case=True, formats=("google",)
        )
        cls.tokenizer = BertTokenizer(VOCAB, lower_case=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def test_export_encoder_from_a_google_checkpoint(self):
        export_dir = os.path.join(self.root, "encoder")
        args = [
            "--kind=encoder",
            f"--init_checkpoint={self.checkpoint}",
            f"--export_dir={export_dir}",
            "--max_seq_length=32",
        ]
        result = run_module("bert_tf.export", *args)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        # The folder named first (on stderr) and last (on stdout, with the results).
        export_dir = os.path.abspath(export_dir)
        self.assertEqual(
            result.stdout.splitlines()[-1], f"inspect it with: saved_model_cli show --dir {export_dir} --all"
        )
        # Quiet when it works: the folder and the two long steps' progress, nothing else (not
        # even TensorFlow's "INFO:tensorflow:Assets written to: ...").
        first, *steps = result.stderr.strip().splitlines()
        self.assertEqual(first, f"export_dir: {export_dir}")
        self.assertEqual(
            {re.sub(r"[\d.]+s$", "Ns", line) for line in steps},
            {
                "tracing the serving signatures ...",
                "tracing the serving signatures: done in Ns",
                "writing the SavedModel ...",
                "writing the SavedModel: done in Ns",
            },
        )
        ids = np.array([[101, 7592, 2088, 102, 0]], np.int32)
        inputs = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32), "segment_ids": 0 * ids}
        got = tf.saved_model.load(export_dir).signatures["serving_default"](**inputs)
        want = self.pretrainer.encoder(inputs)
        self.assertLessEqual(np.abs(got["pooled_output"] - want["pooled_output"]).max(), 1e-5)

    @pytest.mark.slow  # the same check runs in-process in test_export.py
    def test_export_refuses_a_seq_length_above_the_position_embeddings(self):
        export_dir = os.path.join(self.root, "too_long")
        result = run_module(
            "bert_tf.export",
            "--kind=preprocessor",
            f"--init_checkpoint={self.checkpoint}",
            f"--export_dir={export_dir}",
            "--max_seq_length=512",
        )
        self.assertEqual(result.returncode, 2)
        self.assertIn("--max_seq_length=512 is above the model's max_position_embeddings=64", result.stderr)
        self.assertFalse(os.path.exists(export_dir))
        self.assertFalse([name for name in os.listdir(self.root) if ".tmp-" in name])

    def test_extract_features_writes_layers_and_sentence_vectors(self):
        input_file = os.path.join(self.root, "lines.txt")
        output_file = os.path.join(self.root, "features.jsonl")
        with open(input_file, "w", encoding="utf-8") as file:
            file.write("\n".join(LINES) + "\n")
        result = run_module(
            "bert_tf.extract_features",
            f"--input_file={input_file}",
            f"--output_file={output_file}",
            f"--init_checkpoint={self.checkpoint}",
            "--layers=-1,-2",
            "--pooling=mean",
            "--max_seq_length=16",
            "--batch_size=3",
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        with open(output_file, encoding="utf-8") as file:
            records = [json.loads(line) for line in file]
        self.assertEqual([r["line_index"] for r in records], [0, 1, 2, 3])
        # Reference: pack the original way, run the encoder, pick the layers.
        ids_a = self.tokenizer.tokenize(
            tf.constant(["Hello, world!", "The cat", "", "naïve 東京 " * 20])
        ).to_list()
        ids_b = [None, self.tokenizer.tokenize(tf.constant(["sat on the mat."])).to_list()[0], None, None]
        rows = [original_features(a, b, 16) for a, b in zip(ids_a, ids_b, strict=True)]
        x = {
            name: np.array([r[i] for r in rows], np.int32)
            for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))
        }
        layers = self.pretrainer.encoder(x)["encoder_outputs"]
        for row, record in enumerate(records):
            length = int(x["input_mask"][row].sum())
            tokens = [feature["token"] for feature in record["features"]]
            self.assertEqual(tokens, [self.tokenizer.vocab[i] for i in x["input_ids"][row, :length]])
            for position, feature in enumerate(record["features"]):
                self.assertEqual([layer["index"] for layer in feature["layers"]], [-1, -2])
                for layer in feature["layers"]:
                    want = layers[layer["index"]][row, position]
                    self.assertLessEqual(np.abs(np.array(layer["values"]) - want).max(), 2e-6)
            want_sentence = np.mean(layers[-1][row, :length], axis=0)
            self.assertLessEqual(np.abs(np.array(record["sentence_vector"]) - want_sentence).max(), 2e-6)
        self.assertEqual(records[1]["features"][3]["token"], "[SEP]")  # the pair's first [SEP]
        self.assertEqual(len(records[3]["features"]), 16)  # over-length line trimmed

    def test_extractor_cls_pooling_and_bad_layers(self):
        extractor = FeatureExtractor(
            self.pretrainer.encoder, self.tokenizer, layers=[0], pooling="cls", max_seq_length=8
        )
        record = next(extractor.extract(["hello"]))
        self.assertEqual(record["sentence_vector"], record["features"][0]["layers"][0]["values"])
        with self.assertRaisesRegex(ValueError, r"the model has 2 layers.*\[-2, 1\]"):
            FeatureExtractor(self.pretrainer.encoder, self.tokenizer, layers=[-3])
        with self.assertRaisesRegex(ValueError, "max_position_embeddings=64"):
            FeatureExtractor(self.pretrainer.encoder, self.tokenizer, layers=[-1], max_seq_length=65)

    @pytest.mark.slow  # FillMask itself is checked against the pretrainer in test_export.py
    def test_fill_mask_prints_the_top_predictions(self):
        result = run_module(
            "bert_tf.fill_mask",
            f"--init_checkpoint={self.checkpoint}",
            "--top_k=3",
            "--max_seq_length=16",
            "the [MASK] sat",
            "no mask",
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        expected = FillMask(self.pretrainer, self.tokenizer, seq_length=16, top_k=3)(
            tf.constant(["the [MASK] sat"])
        )
        tokens = [token.decode() for token in expected["top_k_tokens"][0, 0].numpy()]
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], "the [MASK] sat")
        self.assertTrue(lines[1].startswith("  [MASK] #1: "), lines[1])
        self.assertEqual([part.split(" (")[0] for part in lines[1].split(": ", 1)[1].split(", ")], tokens)
        self.assertIn("(no [MASK] in this text", lines[3])
        help_text = run_module("bert_tf.fill_mask", "--helpfull").stdout
        self.assertIn('the literal upper-case "[MASK]" means the mask token', help_text)


if __name__ == "__main__":
    tf.test.main()
