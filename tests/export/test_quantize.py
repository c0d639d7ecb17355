"""int8 task SavedModels and LiteRT (TFLite) files of a fine-tuned model, against the float export.

The tiny classifier the export tests share (export_helpers.fine_tuned_classifier), fine-tuned
by the real runner on a task it learns. Tolerances, stated per variant on the probabilities (softmax of
the logits) over many texts: int8 SavedModel (weight-only int8 dense kernels) 1e-2; LiteRT
float32 1e-5, float16 weights 1e-2, dynamic-range int8 5e-2; int8's dev accuracy within one
point of float's. The LiteRT files run in a fresh interpreter process that imports neither
bert_tf nor TensorFlow.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the task SavedModel's tokenizer ops)

from bert_tf.models import BertEncoder
from bert_tf.serving import litert_conversion as tflite
from bert_tf.serving import quantize as int8
from bert_tf.serving.exporter import export_saved_model
from bert_tf.tasks.choice.model import BertMultipleChoice
from bert_tf.tasks.finetuned import FinetunedModelInfo, load_finetuned
from bert_tf.tasks.span.model import BertSpanLabeler
from bert_tf.tasks.token.model import BertTokenClassifier
from bert_tf.tokenization import BertTokenizer
from tests.harness.exports import CLASSIFIER_SEQ_LENGTH, VOCAB, WORDS, export_config, fine_tuned_classifier
from tests.harness.reference import original_features

SEQ_LENGTH = CLASSIFIER_SEQ_LENGTH

# The LiteRT interpreter in a process of its own: no TensorFlow. Each file runs on the
# features (padded, and the shorter rows trimmed), and the raw texts go through bert_tf's
# TensorFlow-free client (bert_tf.serving.litert): as one batch, packed, and one at a time.
INTERPRETER = r"""
import json, sys, numpy as np
from ai_edge_litert.interpreter import Interpreter
from bert_tf.serving import litert
assert "tensorflow" not in sys.modules
loaded = dict(np.load(sys.argv[1]))
short = loaded.pop("short_rows")
arrays = loaded
texts = json.load(open(sys.argv[2], encoding="utf-8"))
# The shorter rows padded to their longest only: the model takes any length up to seq_length.
longest = int(arrays["input_mask"][short].sum(axis=1).max())
trimmed = {key: value[short, :longest] for key, value in arrays.items()}
outputs = {}
for name in sys.argv[4:]:
    interpreter = Interpreter(model_path=name + "/model.tflite", num_threads=2)
    assert sorted(interpreter.get_signature_list()) == ["serving_default", "serving_packed"]
    runner = interpreter.get_signature_runner("serving_default")
    outputs[name] = runner(**arrays)["logits"]
    outputs[name + "/trimmed"] = runner(**trimmed)["logits"]
    classifier = litert.load(name, num_threads=2)  # the task's client: a LiteRTClassifier
    outputs[name + "/client"] = classifier(texts)["probabilities"]
    outputs[name + "/alone"] = np.concatenate([classifier([text])["probabilities"] for text in texts])
assert "tensorflow" not in sys.modules
np.savez(sys.argv[3], **{str(i): value for i, value in enumerate(outputs.values())})
"""


class QuantizeTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        classifier = fine_tuned_classifier()
        cls.model_dir, cls.dev_file = classifier.model_dir, classifier.dev_file
        cls.root = tempfile.mkdtemp(prefix="bert_tf_quantize_")
        cls.exports = {
            "float": classifier.float_export,
            "int8": export_saved_model(
                "task", cls.model_dir, os.path.join(cls.root, "int8"), quantize="int8", dev_file=cls.dev_file
            ),
        }
        rng = random.Random(6)
        cls.texts = [" ".join(rng.choice([*WORDS, "good", "bad", "naïve", "東京"]) for _ in range(rng.randint(0, 20))) for _ in range(200)]  # fmt: skip

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def probabilities(self, name: str) -> np.ndarray:
        serve = tf.saved_model.load(self.exports[name]).signatures["serving_default"]
        return serve(text=tf.constant(self.texts))["probabilities"].numpy()

    def test_int8_savedmodel_is_within_1e_2_of_float_on_many_texts(self):
        want, got = self.probabilities("float"), self.probabilities("int8")
        self.assertGreater(np.abs(want - 0.5).max(), 0.3)  # a model that decides, not a coin
        self.assertLessEqual(np.abs(got - want).max(), 1e-2)
        self.assertGreater(np.abs(got - want).max(), 0.0)  # the weights did change
        with open(os.path.join(self.exports["int8"], "assets.extra", "export_info.json")) as file:
            self.assertEqual(json.load(file)["quantize"], "int8")
        saved = tf.train.load_checkpoint(os.path.join(self.exports["int8"], "variables", "variables"))
        kernels = [name for name, dtype in saved.get_variable_to_dtype_map().items() if dtype == tf.int8]
        self.assertLen(kernels, 6 * 2 + 1)  # q, k, v, attention output, intermediate, output; pooler

    # By default: setUpClass's int8 export succeeds only within MAX_LOSS of float on the dev set
    # (check_accuracy raises otherwise), and the refusal test reads float32's 1.0000 there.
    @pytest.mark.slow
    def test_int8_scores_within_a_point_of_float_on_the_dev_set(self):
        model, tokenizer, info = load_finetuned(self.model_dir, compile=False)
        before = int8.score(model, tokenizer, info, self.dev_file)
        int8.quantize_encoder(model)
        after = int8.score(model, tokenizer, info, self.dev_file)
        self.assertGreaterEqual(before["accuracy"], 0.9)  # the model learnt the task
        self.assertLessEqual(abs(after["accuracy"] - before["accuracy"]), int8.MAX_LOSS)

    def test_int8_that_loses_too_much_is_refused_and_nothing_is_written(self):
        target = os.path.join(self.root, "refused")
        old = int8.MAX_LOSS
        int8.MAX_LOSS = -1.0  # any int8 model "loses" more than this
        try:
            with self.assertRaisesRegex(
                int8.AccuracyLossError,
                r"accuracy on .*dev.csv: float32 1.0000, int8 .*--accept_accuracy_loss",
            ):
                export_saved_model("task", self.model_dir, target, quantize="int8", dev_file=self.dev_file)
        finally:
            int8.MAX_LOSS = old
        self.assertFalse(os.path.exists(target))
        self.assertFalse([name for name in os.listdir(self.root) if ".tmp-" in name])
        # A quantized LiteRT file the same way: scored through the interpreter and refused.
        int8.MAX_LOSS = -1.0
        try:
            with self.assertRaisesRegex(
                int8.AccuracyLossError,
                r"accuracy on .*dev.csv: float32 1.0000, float16 .*: float16 loses more",
            ):
                export_saved_model(
                    "tflite", self.model_dir, target, quantize="float16", dev_file=self.dev_file
                )
        finally:
            int8.MAX_LOSS = old
        self.assertFalse(os.path.exists(target))
        self.assertFalse([name for name in os.listdir(self.root) if ".tmp-" in name])
        # Accepted, the same comparison is a line (and a warning) instead.
        line = int8.check_accuracy({"accuracy": 0.9}, {"accuracy": 0.85}, "dev.csv", accept=True)
        self.assertEqual(line, "accuracy on dev.csv: float32 0.9000, int8 0.8500 (-0.0500)")
        with self.assertRaisesRegex(int8.AccuracyLossError, r"\(-0.0500\): int8 loses more than 0.01"):
            int8.check_accuracy({"accuracy": 0.9}, {"accuracy": 0.85}, "dev.csv")
        self.assertIn("(-0.0100)", int8.check_accuracy({"accuracy": 0.9}, {"accuracy": 0.89}, "dev.csv"))

    def test_tflite_variants_in_a_fresh_litert_process(self):
        tokenizer = BertTokenizer(VOCAB, lower_case=True)
        rows = [original_features(ids, None, SEQ_LENGTH) for ids in tokenizer.tokenize(self.texts).to_list()]
        arrays = {
            name: np.array([row[i] for row in rows], np.int32)
            for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))
        }
        lengths = arrays["input_mask"].sum(axis=1)
        short_rows = np.flatnonzero(lengths < lengths.max())
        self.assertGreater(len(short_rows), 10)
        features = os.path.join(self.root, "features.npz")
        np.savez(features, short_rows=short_rows, **arrays)
        texts = os.path.join(self.root, "texts.json")
        with open(texts, "w", encoding="utf-8") as file:
            json.dump(self.texts, file)
        variants = {"float32": None, "float16": "float16", "int8": "int8"}
        folders = {}
        for name, quantize in variants.items():
            # The quantized files are scored against the float model on the dev set as they are
            # written (fine-tuning's evaluation through the interpreter, packed batches included).
            folders[name] = export_saved_model(
                "tflite",
                self.model_dir,
                os.path.join(self.root, f"tflite_{name}"),
                quantize=quantize,
                dev_file=self.dev_file if quantize else None,
            )
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        outputs = os.path.join(self.root, "litert.npz")
        result = subprocess.run(
            [sys.executable, "-c", INTERPRETER, features, texts, outputs, *folders.values()],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
            timeout=300,
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        with np.load(outputs) as loaded:
            results = [[loaded[str(4 * i + j)] for j in range(4)] for i in range(len(folders))]
        want = self.probabilities("float")
        for name, tolerance, (padded, trimmed, client, alone) in zip(
            variants, (1e-5, 1e-2, 5e-2), results, strict=True
        ):
            self.assertLessEqual(np.abs(tf.nn.softmax(padded).numpy() - want).max(), tolerance, name)
            self.assertLessEqual(
                np.abs(tf.nn.softmax(trimmed).numpy() - want[short_rows]).max(), tolerance, name
            )
            # Raw text through the client, packed: the SavedModel's probabilities, and each
            # text's whatever batch it comes in.
            self.assertLessEqual(np.abs(client - want).max(), tolerance, name)
            self.assertLessEqual(np.abs(client - alone).max(), 1e-5, name)
        info = json.load(open(os.path.join(folders["int8"], "export_info.json")))
        self.assertEqual(
            (info["quantize"], info["seq_length"], info["lower_case"], info["label_list"]),
            ("int8", SEQ_LENGTH, True, ["neg", "pos"]),
        )
        with open(os.path.join(folders["int8"], "labels.txt")) as file:
            self.assertEqual(file.read(), "neg\npos\n")
        sizes = [os.path.getsize(os.path.join(folder, "model.tflite")) for folder in folders.values()]
        self.assertGreater(sizes[0], sizes[1])  # float16 weights: smaller
        self.assertGreater(sizes[0], sizes[2])  # int8 weights: smaller still


class EncoderInt8Test(tf.test.TestCase):
    def test_int8_encoder_export_is_within_1e_2_of_the_float_encoder(self):
        from bert_tf.checkpoints import export_pretrained
        from bert_tf.models import BertPretrainer

        keras.utils.set_random_seed(6)
        root = os.path.join(tempfile.gettempdir(), f"bert_tf_int8_encoder_{os.getpid()}")
        shutil.rmtree(root, ignore_errors=True)
        pretrainer = BertPretrainer(export_config())
        ids = np.random.default_rng(6).integers(1000, 2000, size=(8, SEQ_LENGTH)).astype(np.int32)
        inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": 0 * ids}
        pretrainer({**inputs, "masked_lm_positions": ids[:, :1] * 0})
        checkpoint = os.path.join(root, "google")
        export_pretrained(pretrainer, checkpoint, vocab_file=VOCAB, lower_case=True, formats=("google",))
        try:
            path = export_saved_model(
                "encoder", checkpoint, os.path.join(root, "int8"), seq_length=SEQ_LENGTH, quantize="int8"
            )
            got = tf.saved_model.load(path).signatures["serving_default"](**inputs)["sequence_output"]
            want = pretrainer.encoder(inputs)["sequence_output"]
            self.assertLessEqual(np.abs(got - want).max(), 1e-2)
            self.assertGreater(np.abs(got - want).max(), 0.0)
            with open(os.path.join(path, "assets.extra", "export_info.json")) as file:
                self.assertEqual(json.load(file)["quantize"], "int8")
        finally:
            shutil.rmtree(root, ignore_errors=True)


class TfliteFamiliesTest(tf.test.TestCase):
    """Span, token and multiple-choice heads convert, and LiteRT's float32 outputs are the model's."""

    def test_span_token_and_choice_models_convert(self):
        from ai_edge_litert.interpreter import Interpreter

        keras.utils.set_random_seed(4)
        rng = np.random.default_rng(4)
        cases = [
            ("span", BertSpanLabeler, {}, (2, SEQ_LENGTH)),
            ("token", BertTokenClassifier, {"num_classes": 3}, (2, SEQ_LENGTH)),
            ("multiple_choice", BertMultipleChoice, {}, (2, 3, SEQ_LENGTH)),
        ]
        for kind, model_class, options, shape in cases:
            with self.subTest(kind=kind):
                model = model_class(BertEncoder(export_config()), **options)
                ids = rng.integers(1000, 2000, size=shape).astype(np.int32)
                inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": 0 * ids}
                model(inputs)
                # Weights as a fine-tuned model's: no two biases alike (the converter shares
                # equal constants, and does not fuse a bias another op also reads).
                for weight in model.weights:
                    weight.assign(weight + rng.normal(0, 0.02, weight.shape).astype(np.float32))
                want = model(inputs)
                info = FinetunedModelInfo("t", kind, None, True, SEQ_LENGTH)
                interpreter = Interpreter(model_content=tflite.convert(model, info))
                runner = interpreter.get_signature_runner()
                got = runner(**inputs)
                # Every dense layer is one FULLY_CONNECTED op with its bias, no reshape chain.
                ops = interpreter._get_ops_details()
                dense = [op for op in ops if op["op_name"] == "FULLY_CONNECTED"]
                self.assertGreaterEqual(len(dense), 6 * export_config().num_hidden_layers)
                self.assertTrue(all(len(op["inputs"]) == 3 and op["inputs"][2] >= 0 for op in dense))
                self.assertNotIn("REDUCE_PROD", {op["op_name"] for op in ops})
                want = want if isinstance(want, dict) else {"logits": want}
                self.assertEqual(sorted(got), sorted(want))
                for name in want:
                    self.assertAllClose(got[name], want[name], atol=1e-5, rtol=0)


if __name__ == "__main__":
    tf.test.main()
