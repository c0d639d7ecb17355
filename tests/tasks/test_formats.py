"""Fine-tuned models with their heads, in the Hugging Face and original formats, both ways.

transformers (run in its own process by transformers_side.py) is the reference: our
exports load in its AutoModelFor... classes with the same outputs, and its BertFor...
models (random weights, written by save_pretrained) load in bert_tf with the same outputs
and label names. The original checkpoints are checked against the original scripts'
variable names, written out here.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

import bert_tf
from bert_tf.checkpoints import CheckpointError
from bert_tf.errors import BertTfError, DamagedFileError, UsageError
from bert_tf.serving.exporter import export_saved_model
from bert_tf.serving.saving import ExportError
from bert_tf.tasks.runner import run
from bert_tf.tasks.settings import FinetuneSettings
from tests import harness

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "fixtures", "hf_tiny")  # a small random BertForPreTraining
# Run as a script, in a process of its own (it imports torch and transformers).
SIDE = os.path.join(os.path.dirname(harness.__file__), "transformers_side.py")
TEXTS = ["tok1 tok2 tok3", "tok10 tok20 tok30 tok40 tok50 tok60", "tok7 unknown tok8"]
TINY_CONFIG = dict(
    vocab_size=99,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=32,
)

# name: (bert_tf class, from_pretrained arguments, the head's Keras layer, transformers'
# AutoModelFor... and BertFor... class, its config, FEATURES prefix)
FAMILIES = {
    "classification": (
        bert_tf.BertClassifier,
        {"label_list": ["neg", "pos", "mid"]},
        "classifier",
        "AutoModelForSequenceClassification",
        "BertForSequenceClassification",
        {"id2label": {0: "spam", 1: "ham"}, "label2id": {"spam": 0, "ham": 1}},
        "rows",
    ),
    "regression": (
        bert_tf.BertClassifier,
        {"num_classes": 1},
        "classifier",
        "AutoModelForSequenceClassification",
        "BertForSequenceClassification",
        {"num_labels": 1, "problem_type": "regression"},
        "rows",
    ),
    "multi_label": (
        bert_tf.BertClassifier,
        {"task": "multi_label", "label_list": ["news", "sport", "tech"]},
        "classifier",
        "AutoModelForSequenceClassification",
        "BertForSequenceClassification",
        {
            "id2label": {0: "red", 1: "green", 2: "blue"},
            "label2id": {"red": 0, "green": 1, "blue": 2},
            "problem_type": "multi_label_classification",
        },
        "rows",
    ),
    "token": (
        bert_tf.BertTokenClassifier,
        {"label_list": ["O", "B-PER", "I-PER"]},
        "classifier",
        "AutoModelForTokenClassification",
        "BertForTokenClassification",
        {"num_labels": 4},  # transformers' default names: LABEL_0 ... LABEL_3
        "rows",
    ),
    "span": (
        bert_tf.BertSpanLabeler,
        {},
        "span_dense",
        "AutoModelForQuestionAnswering",
        "BertForQuestionAnswering",
        {},
        "rows",
    ),
    "choice": (
        bert_tf.BertMultipleChoice,
        {},
        "scorer",
        "AutoModelForMultipleChoice",
        "BertForMultipleChoice",
        {},
        "choice",
    ),
}


def features(seed: int, shape) -> dict:
    """Random ids with padding at the end of some rows, both segments in use."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 99, size=shape).astype(np.int32)
    lengths = rng.integers(4, shape[-1] + 1, size=shape[:-1])
    mask = (np.arange(shape[-1]) < lengths[..., None]).astype(np.int32)
    segments = ((np.arange(shape[-1]) >= lengths[..., None] // 2) & (mask > 0)).astype(np.int32)
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": segments}


def outputs_of(model, inputs) -> dict:
    outputs = model(inputs, training=False)
    if isinstance(outputs, dict):
        return {name: np.asarray(value) for name, value in outputs.items()}
    return {"logits": np.asarray(outputs)}


class FormatsTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        keras.utils.set_random_seed(3)
        cls.root = tempfile.mkdtemp(prefix="bert_tf_formats_")
        cls.inputs = {"rows": features(1, (3, 12)), "choice": features(2, (2, 3, 12))}
        cls.models, cls.ours = {}, {}
        request = {"load": [], "make": [], "texts": TEXTS}
        for name, (model_class, arguments, layer, auto, hf_class, hf_config, prefix) in FAMILIES.items():
            model = model_class.from_pretrained(TINY, max_seq_length=16, **arguments)
            head = model.get_layer(layer)  # random bias too: a lost bias would not show with zeros
            for weight in (head.kernel, head.bias):
                weight.assign(np.random.default_rng(4).normal(0, 0.5, weight.shape).astype(np.float32))
            cls.models[name] = model
            cls.ours[name] = outputs_of(model, cls.inputs[prefix])
            for format in ("huggingface", "google"):
                model.export(cls.path("ours", format, name), format=format)
            request["load"].append(
                {
                    "name": f"ours/{name}",
                    "dir": cls.path("ours", "huggingface", name),
                    "auto": auto,
                    "features": prefix,
                }
            )
            request["make"].append(
                {
                    "name": f"made/{name}",
                    "dir": cls.path("made", name),
                    "class": hf_class,
                    "config": {**TINY_CONFIG, **hf_config},
                    "vocab": os.path.join(TINY, "vocab.txt"),
                    "features": prefix,
                }
            )
        cls.reference = cls.run_transformers(request)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def path(cls, *parts) -> str:
        return os.path.join(cls.root, *parts)

    @classmethod
    def run_transformers(cls, request: dict) -> dict:
        files = [cls.path(name) for name in ("request.json", "features.npz", "outputs.npz")]
        with open(files[0], "w", encoding="utf-8") as handle:
            json.dump(request, handle)
        np.savez(
            files[1],
            **{
                f"{prefix}/{name}": value
                for prefix, inputs in cls.inputs.items()
                for name, value in inputs.items()
            },
        )
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        result = subprocess.run(
            [sys.executable, SIDE, *files], capture_output=True, text=True, env=env, cwd=cls.root, timeout=600
        )
        if result.returncode != 0:
            raise AssertionError(f"transformers_side.py failed:\n{result.stderr[-4000:]}")
        with np.load(files[2]) as arrays:
            return {key: arrays[key] for key in arrays.files}

    def reference_outputs(self, name: str) -> dict:
        prefix = f"{name}/"
        return {
            key[len(prefix) :]: value
            for key, value in self.reference.items()
            if key.startswith(prefix) and not key[len(prefix) :].startswith("text_")
        }

    # --- bert_tf -> transformers ---------------------------------------------------------

    def test_our_exports_load_in_transformers_with_equal_outputs(self):
        for name in FAMILIES:
            with self.subTest(family=name):
                theirs = self.reference_outputs(f"ours/{name}")
                self.assertEqual(sorted(theirs), sorted(self.ours[name]))
                for output, value in self.ours[name].items():
                    self.assertAllClose(theirs[output], value, atol=1e-5, rtol=0)

    def test_our_export_configs_say_the_head(self):
        expected = {
            "classification": ("BertForSequenceClassification", "single_label_classification", 3),
            "regression": ("BertForSequenceClassification", "regression", 1),
            "multi_label": ("BertForSequenceClassification", "multi_label_classification", 3),
            "token": ("BertForTokenClassification", None, 3),
            "span": ("BertForQuestionAnswering", None, 2),
        }
        for name, (architecture, problem_type, num_labels) in expected.items():
            with open(os.path.join(self.path("ours", "huggingface", name), "config.json")) as handle:
                config = json.load(handle)
            self.assertEqual(config["architectures"], [architecture])
            self.assertEqual(config.get("problem_type"), problem_type)
            self.assertEqual(len(config.get("id2label") or range(config.get("num_labels", 2))), num_labels)
        with open(os.path.join(self.path("ours", "huggingface", "classification"), "config.json")) as handle:
            config = json.load(handle)
        self.assertEqual(config["id2label"], {"0": "neg", "1": "pos", "2": "mid"})
        self.assertEqual(config["label2id"], {"neg": 0, "pos": 1, "mid": 2})

    def test_transformers_tokenizes_our_export_as_we_do(self):
        # AutoTokenizer on the exported folder, then the model: what our predict gives on the texts.
        self.assertAllClose(
            self.reference["ours/classification/text_logits"],
            self.models["classification"].predict(TEXTS),
            atol=1e-5,
            rtol=0,
        )

    # --- transformers -> bert_tf ---------------------------------------------------------

    def test_transformers_models_load_with_equal_outputs_and_label_names(self):
        label_names = {
            "classification": ["spam", "ham"],
            "regression": None,
            "multi_label": ["red", "green", "blue"],
            "token": ["LABEL_0", "LABEL_1", "LABEL_2", "LABEL_3"],
            "span": None,
            "choice": None,
        }
        for name, (model_class, *_, prefix) in FAMILIES.items():
            with self.subTest(family=name):
                model = model_class.from_pretrained(self.path("made", name))
                self.assertEqual(model.label_list, label_names[name])
                ours = outputs_of(model, self.inputs[prefix])
                theirs = self.reference_outputs(f"made/{name}")
                self.assertEqual(sorted(ours), sorted(theirs))
                for output, value in theirs.items():
                    self.assertAllClose(ours[output], value, atol=1e-5, rtol=0)
        model = bert_tf.BertClassifier.from_pretrained(self.path("made", "classification"))
        logits = self.reference["made/classification/logits"]
        self.assertEqual(model.label_names(logits), [["spam", "ham"][i] for i in logits.argmax(-1)])
        # transformers' folders do not say a sequence length: fine-tuning's default, or the caller's
        self.assertEqual(model.task_info.max_seq_length, 32)  # 128, within max_position_embeddings
        model = bert_tf.BertClassifier.from_pretrained(self.path("made", "classification"), max_seq_length=20)
        self.assertEqual(model.task_info.max_seq_length, 20)
        with self.assertRaisesRegex(UsageError, "max_seq_length=64 must be in \\[3, 32\\]"):
            bert_tf.BertClassifier.from_pretrained(self.path("made", "classification"), max_seq_length=64)
        # A multi-label model from transformers: its labels are those whose sigmoid is above 0.5.
        multi = bert_tf.BertClassifier.from_pretrained(self.path("made", "multi_label"))
        self.assertEqual((multi.task_info.kind, multi.task_info.option("threshold")), ("multi_label", 0.5))
        logits = self.reference["made/multi_label/logits"]
        expected = [
            [name for name, x in zip(["red", "green", "blue"], row, strict=True) if x > 0] for row in logits
        ]
        probabilities = 1 / (1 + np.exp(-logits))  # predict gives a multi-label model's probabilities
        self.assertEqual(multi.label_names(probabilities), expected)

    def test_the_command_line_evaluates_a_transformers_classifier(self):
        labels = ["spam", "ham", "ham"]
        data = self.path("eval.csv")
        with open(data, "w") as handle:
            handle.write(
                "text,label\n"
                + "".join(f"{text},{label}\n" for text, label in zip(TEXTS, labels, strict=True))
            )
        settings = FinetuneSettings.of(
            task="classification",
            init_checkpoint=self.path("made", "classification"),
            output_dir=self.path("run"),
            eval_file=data,
            max_seq_length=16,
            verbose=0,
        )
        predicted = self.reference["made/classification/text_logits"].argmax(-1)
        expected = np.mean([["spam", "ham"][i] == label for i, label in zip(predicted, labels, strict=True)])
        self.assertAllClose(run(settings)["accuracy"], expected)

    def test_a_transformers_classifier_serves_from_a_task_saved_model(self):
        export_dir = export_saved_model("task", self.path("made", "classification"), self.path("served"))
        served = tf.saved_model.load(export_dir).signatures["serving_default"](text=tf.constant(TEXTS))
        logits = self.reference["made/classification/text_logits"]
        self.assertAllClose(served["probabilities"], tf.nn.softmax(logits), atol=1e-5, rtol=0)
        self.assertEqual(
            [label.decode() for label in served["label"].numpy()],
            [["spam", "ham"][i] for i in logits.argmax(-1)],
        )

    # --- the original format ---------------------------------------------------------------

    def test_google_exports_use_the_original_head_names(self):
        hidden = TINY_CONFIG["hidden_size"]
        expected = {
            # run_classifier.py create_model
            "classification": {"output_weights": [3, hidden], "output_bias": [3]},
            "regression": {"output_weights": [1, hidden], "output_bias": [1]},
            # run_squad.py create_model
            "span": {"cls/squad/output_weights": [2, hidden], "cls/squad/output_bias": [2]},
            # no original script: named in run_squad.py's style
            "token": {"cls/token/output_weights": [3, hidden], "cls/token/output_bias": [3]},
            "choice": {
                "cls/multiple_choice/output_weights": [1, hidden],
                "cls/multiple_choice/output_bias": [1],
            },
        }
        for name, heads in expected.items():
            with self.subTest(family=name):
                variables = dict(
                    tf.train.list_variables(
                        os.path.join(self.path("ours", "google", name), "bert_model.ckpt")
                    )
                )
                for variable, shape in heads.items():
                    self.assertEqual(variables.get(variable), shape, variable)
                self.assertIn("bert/encoder/layer_1/output/LayerNorm/gamma", variables)
                others = [v for v in variables if not v.startswith("bert/") and v not in heads]
                self.assertEqual(others, [])

    def test_google_exports_read_back_with_equal_outputs_and_labels(self):
        for name, (model_class, arguments, *_, prefix) in FAMILIES.items():
            with self.subTest(family=name):
                model = model_class.from_pretrained(self.path("ours", "google", name))
                self.assertEqual(model.label_list, arguments.get("label_list"))
                ours = outputs_of(model, self.inputs[prefix])
                for output, value in self.ours[name].items():
                    self.assertAllClose(ours[output], value, atol=1e-6, rtol=0)
        # The head names of a multi-label model are run_classifier.py's too: task.json tells it.
        model = bert_tf.BertClassifier.from_pretrained(self.path("ours", "google", "multi_label"))
        self.assertEqual((model.task_info.kind, model.task_info.option("threshold")), ("multi_label", 0.5))

    def test_an_original_run_classifier_checkpoint_reads_with_class_ids(self):
        # What run_classifier.py leaves: the checkpoint, no task.json: classes are named by id.
        directory = self.path("original_classifier")
        shutil.copytree(self.path("ours", "google", "classification"), directory)
        os.remove(os.path.join(directory, "task.json"))
        model = bert_tf.BertClassifier.from_pretrained(directory)
        self.assertEqual(model.label_list, ["0", "1", "2"])
        self.assertAllClose(
            outputs_of(model, self.inputs["rows"])["logits"], self.ours["classification"]["logits"]
        )

    # --- the command line's path, and bad input ---------------------------------------------

    def test_export_kinds_from_a_saved_folder(self):
        saved = self.models["classification"].save(self.path("saved"))
        for kind in ("huggingface", "google"):
            target = export_saved_model(kind, saved, self.path(f"from_saved_{kind}"))
            model = bert_tf.BertClassifier.from_pretrained(target)
            self.assertEqual(model.label_list, ["neg", "pos", "mid"])
            self.assertAllClose(
                outputs_of(model, self.inputs["rows"])["logits"],
                self.ours["classification"]["logits"],
                atol=1e-6,
            )

    def test_another_familys_model_gives_its_encoder_to_a_new_head_and_another_size_is_refused(self):
        # A model fine-tuned by another family (transformers' here) gives its encoder to a new
        # head, as a pretrained checkpoint does; its own family's other classes are refused.
        made = self.path("made", "classification")
        with self.assertRaisesRegex(UsageError, "needs its classes"):
            bert_tf.BertTokenClassifier.from_pretrained(made)
        tagger = bert_tf.BertTokenClassifier.from_pretrained(made, label_list=["O", "B-X"])
        classifier = bert_tf.BertClassifier.from_pretrained(made)
        for ours, theirs in zip(tagger.encoder.weights, classifier.encoder.weights, strict=True):
            self.assertAllEqual(ours, theirs)
        with self.assertRaisesRegex(UsageError, "has 2 classes, not num_classes=5"):
            bert_tf.BertClassifier.from_pretrained(made, num_classes=5)
        chooser = bert_tf.BertMultipleChoice.from_pretrained(self.path("ours", "google", "span"))
        self.assertEqual(chooser.task_info.task, "swag")

    def test_a_problem_type_bert_tf_does_not_read_is_refused(self):
        directory = self.path("multi_label")
        shutil.copytree(self.path("made", "classification"), directory)
        with open(os.path.join(directory, "config.json")) as handle:
            config = json.load(handle)
        with open(os.path.join(directory, "config.json"), "w") as handle:
            json.dump({**config, "problem_type": "ordinal_regression"}, handle)
        with self.assertRaisesRegex(CheckpointError, "problem_type='ordinal_regression'"):
            bert_tf.BertClassifier.from_pretrained(directory)

    def test_a_truncated_safetensors_is_one_clear_error_and_nothing_is_written(self):
        directory = self.path("truncated")
        shutil.copytree(self.path("made", "classification"), directory)
        weights = os.path.join(directory, "model.safetensors")
        with open(weights, "r+b") as handle:
            handle.truncate(os.path.getsize(weights) // 2)
        with self.assertRaisesRegex(DamagedFileError, "model.safetensors is truncated or corrupt"):
            bert_tf.BertClassifier.from_pretrained(directory)
        for kind in ("task", "huggingface"):
            with self.assertRaisesRegex(BertTfError, "truncated"):
                export_saved_model(kind, directory, self.path(f"never_{kind}"))
            self.assertFalse(os.path.exists(self.path(f"never_{kind}")))

    def test_an_export_over_an_existing_folder_is_refused_and_leaves_it(self):
        existing = self.path("existing")
        os.makedirs(existing)
        with open(os.path.join(existing, "notes.txt"), "w") as handle:
            handle.write("mine")
        for format in ("huggingface", "google"):
            with self.assertRaisesRegex(ExportError, "exists and is not empty.*--overwrite"):
                self.models["token"].export(existing, format=format)
            with self.assertRaisesRegex(ExportError, "exists and is not empty"):
                export_saved_model(format, self.path("ours", "google", "token"), existing)
        self.assertEqual(os.listdir(existing), ["notes.txt"])

    def test_a_checkpoint_without_a_task_head_is_not_a_fine_tuned_model(self):
        with self.assertRaisesRegex(ExportError, "needs a fine-tuned model.*task head"):
            export_saved_model("huggingface", TINY, self.path("no_head"))
        self.assertFalse(os.path.exists(self.path("no_head")))
        # The pretrained encoder of a fine-tuned folder still loads alone.
        encoder, _ = bert_tf.checkpoints.from_pretrained(self.path("made", "token"), heads="encoder")
        self.assertIsInstance(encoder, bert_tf.models.BertEncoder)
        with self.assertRaises(CheckpointError):
            bert_tf.checkpoints.load_weights(encoder, self.path("missing"))
