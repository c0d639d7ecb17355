"""keras-hub BERT presets in and out, checked against keras-hub itself.

In: tiny `BertBackbone` and `BertTextClassifier` models built by keras-hub with random
weights (biases and LayerNorms included) and written by its own `save_to_preset` are read by
bert_tf, whose outputs must equal keras-hub's (encoder outputs on ids, classifier logits on
raw text through each side's own preprocessor). Out: `bert_tf.export --kind=keras_hub` writes
presets that keras-hub loads in a process that never imports bert_tf
(`tests/harness/load_keras_hub.py`), with our outputs. Tokenization is compared on real text (the Python
documentation corpus) with the real uncased vocab. Nothing is downloaded.
"""

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.checkpoints import (
    CheckpointError,
    export_keras_hub,
    export_pretrained,
    find_head,
    from_pretrained,
    inspect_checkpoint,
)
from bert_tf.config import BertConfig
from bert_tf.errors import DamagedFileError
from bert_tf.models import BertEncoder
from bert_tf.serving.exporter import export_saved_model
from bert_tf.serving.saving import ExportError
from bert_tf.tasks.finetuned import read_info
from bert_tf.tasks.registry import task_heads
from bert_tf.tokenization import BertTokenizer
from pipelines import corpus
from tests.harness.data import UNCASED_VOCAB

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VOCAB = UNCASED_VOCAB
SMALL_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".", "a"]
SEQUENCE_LENGTH = 24
# Real text (sentences of the Python documentation), one cut by the preprocessors.
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!",
    "A class definition is an executable statement, which may be used to define new types of objects "
    "and is evaluated when the program runs, long after it was written",
]


def hub():
    """keras_hub, imported when a test first needs it rather than when pytest collects this
    module (seconds in every worker process)."""
    import keras_hub

    return keras_hub


def vocab_tokens(path=VOCAB):
    with open(path, encoding="utf-8") as file:
        return [line.rstrip("\n") for line in file]


def randomize(model, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign((scale * rng.normal(size=variable.shape)).astype("float32"))
    return model


def keras_hub_backbone(vocabulary_size, seed=0, num_layers=2):
    backbone = hub().models.BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=64,
    )
    return randomize(backbone, seed)


def keras_hub_classifier(directory, num_classes=3, activation=None, vocab=SMALL_VOCAB, seed=1):
    """A random tiny BertTextClassifier saved as keras-hub saves it; the model."""
    tokenizer = hub().models.BertTokenizer(vocabulary=vocab, lowercase=True)
    preprocessor = hub().models.BertTextClassifierPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)
    classifier = hub().models.BertTextClassifier(
        keras_hub_backbone(len(vocab), seed),
        num_classes=num_classes,
        preprocessor=preprocessor,
        activation=activation,
    )
    randomize(classifier, seed)
    classifier.save_to_preset(directory)
    return classifier


def ids_batch(vocab_size, seed=0):
    """token_ids, segment_ids, padding_mask [3, 10]: two segments, one row padded."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, vocab_size, size=(3, 10)).astype(np.int32)
    padding_mask = np.ones_like(token_ids)
    padding_mask[1, 6:] = 0
    token_ids[1, 6:] = 0
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 5:] = 1
    return token_ids, segment_ids, padding_mask


def one_line(test, error):
    test.assertNotIn("\n", str(error))


class KerasHubPresetInTest(tf.test.TestCase):
    """Presets written by keras-hub's `save_to_preset`, read by bert_tf."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp()
        cls.vocab = vocab_tokens()
        cls.classifier_dir = os.path.join(cls.root, "classifier")
        # keras-hub's uncased tokenizer as its users make it (strip_accents left at False).
        cls.classifier = keras_hub_classifier(cls.classifier_dir, vocab=cls.vocab)
        cls.backbone_dir = os.path.join(cls.root, "backbone")
        # 12 blocks: Keras names their h5 groups transformer_encoder, _1, ..., _10, _11.
        cls.backbone = keras_hub_backbone(len(SMALL_VOCAB), seed=4, num_layers=12)
        cls.backbone.save_to_preset(cls.backbone_dir)
        hub().models.BertTokenizer(vocabulary=SMALL_VOCAB, lowercase=False).save_to_preset(cls.backbone_dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def test_backbone_preset_gives_keras_hubs_encoder_outputs(self):
        encoder, settings = from_pretrained(self.backbone_dir, heads="encoder")
        token_ids, segment_ids, padding_mask = ids_batch(len(SMALL_VOCAB))
        expected = self.backbone(
            {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        )
        actual = encoder({"input_ids": token_ids, "input_mask": padding_mask, "segment_ids": segment_ids})
        for key in ("sequence_output", "pooled_output"):
            self.assertAllClose(actual[key], expected[key], atol=1e-5, rtol=0, msg=key)
        self.assertEqual(
            settings.vocab_file, os.path.join(self.backbone_dir, "assets", "tokenizer", "vocabulary.txt")
        )
        self.assertFalse(settings.lower_case)  # the tokenizer's lowercase=False
        self.assertIn("tokenizer.json", settings.lower_case_reason)

    def test_config_maps_every_backbone_setting(self):
        config, settings = inspect_checkpoint(self.classifier_dir)
        expected = BertConfig(
            vocab_size=len(self.vocab),
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            hidden_act="gelu",  # keras-hub's gelu_approximate is the original's tanh GELU
            max_position_embeddings=64,
            type_vocab_size=2,
        )
        self.assertEqual(config, expected)
        self.assertTrue(settings.lower_case)

    def test_classifier_preset_gives_keras_hubs_logits_on_raw_text(self):
        model = bert_tf.BertClassifier.from_pretrained(self.classifier_dir)
        expected = self.classifier.predict(TEXTS, verbose=0)
        self.assertAllClose(model.predict(TEXTS), expected, atol=1e-5, rtol=0)
        self.assertEqual(model.get_layer("classifier").units, 3)

    def test_classifier_preset_is_a_fine_tuned_folder(self):
        info = read_info(self.classifier_dir)
        self.assertEqual(info.kind, "classification")
        self.assertEqual(info.label_list, ["0", "1", "2"])  # keras-hub keeps no class names
        self.assertEqual(info.max_seq_length, SEQUENCE_LENGTH)  # its preprocessor's
        self.assertTrue(info.lower_case)
        # Its encoder alone, as from any fine-tuned folder.
        encoder, _ = from_pretrained(self.classifier_dir, heads="encoder")
        self.assertAllClose(encoder.pooler_dense.kernel, self.classifier.backbone.pooled_dense.kernel)

    def test_head_kind_follows_keras_hubs_activation_and_classes(self):
        heads = task_heads()
        cases = [(2, "softmax", "classification"), (4, "sigmoid", "multi_label")]
        cases.append((1, None, "regression"))
        for num_classes, activation, kind in cases:
            directory = os.path.join(self.root, f"head_{num_classes}_{activation}")
            classifier = keras_hub_classifier(directory, num_classes, activation)
            found = find_head(directory, list(heads.values()))
            self.assertEqual(found.head, heads[kind], msg=activation)
            self.assertEqual(found.units, num_classes)
            # On keras-hub's own features: the tokenizers are compared elsewhere.
            features = classifier.preprocessor(["the cat sat on the mat.", "a cat"])
            logits = bert_tf.BertClassifier.from_pretrained(directory)(
                {
                    "input_ids": features["token_ids"],
                    "input_mask": features["padding_mask"],
                    "segment_ids": features["segment_ids"],
                }
            )
            # keras-hub's outputs are after its activation: softmax, sigmoid, none (the score)
            expected = classifier(features)
            activate = {"softmax": tf.nn.softmax, "sigmoid": tf.sigmoid}.get(activation, tf.identity)
            self.assertAllClose(activate(logits), expected, atol=1e-5, rtol=0)

    def test_pretraining_heads_are_refused_with_the_hint(self):
        with self.assertRaisesRegex(CheckpointError, "heads='encoder'"):
            from_pretrained(self.backbone_dir)


class TokenizationTest(tf.test.TestCase):
    """keras-hub's BertTokenizer against ours on real text with the real uncased vocab."""

    @staticmethod
    def differs(character):
        """Whether keras-hub's rules (NFKC case folding; Cc/Cf split words) and the original's
        (lower(), then accents removed; Cc/Cf deleted) can treat `character` differently."""

        def strip(text):
            return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")

        folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", strip(character)).casefold())
        return unicodedata.category(character) in ("Cc", "Cf") or folded != strip(character.lower())

    def test_same_word_pieces_except_where_keras_hub_folds_compatibility_characters(self):
        lines = [sentence for document in corpus.documents() for sentence in document]
        ours = BertTokenizer(VOCAB, lower_case=True)
        theirs = hub().models.BertTokenizer(vocabulary=vocab_tokens(), lowercase=True, strip_accents=True)
        different = []
        for start in range(0, len(lines), 512):
            batch = lines[start : start + 512]
            expected = ours.tokenize(tf.constant(batch)).to_list()
            actual = theirs(tf.constant(batch))
            actual = actual if isinstance(actual, list) else actual.to_list()
            different += [line for line, a, b in zip(batch, expected, actual, strict=True) if a != b]
        self.assertGreater(len(lines), 2000)
        self.assertLess(len(different), len(lines) // 100)  # 16 of 2288 lines: "…" is "..." there
        for line in different:
            self.assertTrue(any(self.differs(c) for c in line), msg=line)

    def test_accents_are_removed_only_with_strip_accents(self):
        ours = BertTokenizer(VOCAB, lower_case=True).tokenize(tf.constant(["Café naïve résumé"])).to_list()
        for strip_accents, same in ((True, True), (False, False)):
            theirs = hub().models.BertTokenizer(
                vocabulary=vocab_tokens(), lowercase=True, strip_accents=strip_accents
            )(tf.constant(["Café naïve résumé"]))
            theirs = theirs if isinstance(theirs, list) else theirs.to_list()
            self.assertEqual(theirs == ours, same)


class KerasHubPresetRefusalTest(tf.test.TestCase):
    """Presets bert_tf cannot read: one line each with the fix, nothing written."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp()
        cls.classifier_dir = os.path.join(cls.root, "classifier")
        keras_hub_classifier(cls.classifier_dir)
        sizes = dict(vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        cls.others = {
            "RobertaBackbone": hub().models.RobertaBackbone(max_sequence_length=16, **sizes),
            "DistilBertBackbone": hub().models.DistilBertBackbone(max_sequence_length=16, **sizes),
        }
        for name, backbone in cls.others.items():
            backbone.save_to_preset(os.path.join(cls.root, name))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def damaged_copy(self, remove=(), truncate=None):
        directory = os.path.join(tempfile.mkdtemp(dir=self.root), "preset")
        shutil.copytree(self.classifier_dir, directory)
        for name in remove:
            os.remove(os.path.join(directory, name))
        if truncate:
            path = os.path.join(directory, truncate)
            with open(path, "r+b") as file:
                file.truncate(os.path.getsize(path) // 2)
        return directory

    def assertRefusedWithNothingWritten(self, preset, pattern, error=CheckpointError):
        out = os.path.join(self.root, "never_written")
        for kind in ("keras_hub", "encoder"):
            with self.assertRaisesRegex(error, pattern) as raised:
                export_saved_model(kind, preset, out)
            one_line(self, raised.exception)
            self.assertFalse(os.path.exists(out))
            self.assertEqual([n for n in os.listdir(self.root) if n.startswith(".never_written")], [])

    def test_presets_of_other_architectures(self):
        for name in self.others:
            preset = os.path.join(self.root, name)
            with self.assertRaisesRegex(
                CheckpointError, f"keras-hub {name} preset.*not a BERT one.*BertBackbone"
            ):
                from_pretrained(preset, heads="encoder")
            self.assertRefusedWithNothingWritten(preset, name)

    def test_missing_weights_files(self):
        for missing, fix in (
            ("model.weights.h5", "copy the preset whole"),
            ("task.weights.h5", "head's weights"),
        ):
            preset = self.damaged_copy(remove=(missing,))
            with self.assertRaisesRegex(CheckpointError, f"without {missing}.*{fix}"):
                from_pretrained(preset, heads="encoder")
            self.assertRefusedWithNothingWritten(preset, missing)

    def test_truncated_weights_file_is_named(self):
        preset = self.damaged_copy(truncate="model.weights.h5")
        with self.assertRaisesRegex(DamagedFileError, "model.weights.h5 is truncated or corrupt"):
            inspect_checkpoint(preset)
        self.assertRefusedWithNothingWritten(preset, "truncated or corrupt", DamagedFileError)

    def test_writing_without_keras_hub_names_the_install(self):
        with mock.patch.dict(sys.modules, {"keras_hub": None}):  # what an import of a missing package meets
            with self.assertRaisesRegex(
                CheckpointError, r'needs keras-hub: pip install "bert_tf\[keras_hub\]"'
            ):
                export_saved_model("keras_hub", self.classifier_dir, os.path.join(self.root, "never_written"))
        self.assertFalse(os.path.exists(os.path.join(self.root, "never_written")))

    def test_activation_bert_tf_cannot_read(self):
        directory = os.path.join(self.root, "relu")
        keras_hub_classifier(directory, activation="relu")
        with self.assertRaisesRegex(CheckpointError, "activation='relu'.*linear.*softmax.*sigmoid"):
            bert_tf.BertClassifier.from_pretrained(directory)


class KerasHubPresetOutTest(tf.test.TestCase):
    """`bert_tf.export --kind=keras_hub`, loaded by keras-hub in a process without bert_tf."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        keras.utils.set_random_seed(2)
        cls.root = tempfile.mkdtemp()
        config = BertConfig(
            vocab_size=len(vocab_tokens()),
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
        )
        encoder = BertEncoder(config)
        ones = np.ones((1, 2), np.int32)
        encoder({"input_ids": ones, "input_mask": ones, "segment_ids": 0 * ones})
        randomize(encoder, seed=7)
        cls.pretrained_dir = export_pretrained(
            encoder,
            os.path.join(cls.root, "pretrained"),
            vocab_file=VOCAB,
            lower_case=True,
            formats=("google",),
        )
        cls.encoder = encoder
        cls.labels = ["negative", "neutral", "positive"]
        cls.classifier = cls.fine_tuned("classifier", label_list=cls.labels, max_seq_length=SEQUENCE_LENGTH)
        cls.multi_label = cls.fine_tuned("multi_label", label_list=["a", "b"], task="multi_label")
        cls.presets = {
            name: os.path.join(cls.root, f"{name}_preset") for name in ("classifier", "multi_label")
        }
        export_saved_model("keras_hub", os.path.join(cls.root, "classifier"), cls.presets["classifier"])
        export_saved_model("keras_hub", os.path.join(cls.root, "multi_label"), cls.presets["multi_label"])
        cls.backbone_preset = export_saved_model(
            "keras_hub", cls.pretrained_dir, os.path.join(cls.root, "backbone")
        )
        cls.texts = [*TEXTS, "Café naïve résumé"]  # accents: keras-hub strips them as we do
        cls.ids = ids_batch(config.vocab_size)
        cls.loaded = cls.load_in_keras_hub()

    @classmethod
    def fine_tuned(cls, name, **kwargs):
        model = bert_tf.BertClassifier.from_pretrained(cls.pretrained_dir, **kwargs)
        randomize(model.get_layer("classifier"), seed=len(name))
        model.save(os.path.join(cls.root, name))
        return model

    @classmethod
    def load_in_keras_hub(cls):
        request = {
            "classifiers": cls.presets,
            "texts": cls.texts,
            "backbone": cls.backbone_preset,
            **{
                key: value.tolist()
                for key, value in zip(("token_ids", "segment_ids", "padding_mask"), cls.ids, strict=True)
            },
        }
        request_file, output = os.path.join(cls.root, "request.json"), os.path.join(cls.root, "out.npz")
        with open(request_file, "w", encoding="utf-8") as file:
            json.dump(request, file)
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        result = subprocess.run(
            [
                sys.executable,
                os.path.join(REPO, "tests", "harness", "load_keras_hub.py"),
                request_file,
                output,
            ],
            cwd=cls.root,
            env={**env, "TF_CPP_MIN_LOG_LEVEL": "3"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode:
            raise AssertionError(f"keras-hub failed to load the presets:\n{result.stderr[-4000:]}")
        with np.load(output) as arrays:
            return {key: arrays[key] for key in arrays.files}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def test_classifier_preset_files(self):
        files = set(os.listdir(self.presets["classifier"]))
        expected = {"config.json", "model.weights.h5", "task.json", "task.weights.h5", "preprocessor.json"}
        self.assertTrue(expected <= files, files)
        self.assertEqual([n for n in os.listdir(self.root) if ".tmp-" in n or ".partial-" in n], [])

    def test_keras_hub_never_imported_bert_tf(self):
        self.assertEqual(self.loaded["__bert_tf_modules__"].tolist(), [])

    def test_classifier_preset_gives_our_logits_on_raw_text(self):
        self.assertAllClose(
            self.loaded["classifier/outputs"], self.classifier.predict(self.texts), atol=1e-5, rtol=0
        )
        self.assertEqual(int(self.loaded["classifier/sequence_length"]), SEQUENCE_LENGTH)
        self.assertTrue(self.loaded["classifier/lowercase"] and self.loaded["classifier/strip_accents"])

    def test_multi_label_preset_gives_our_probabilities(self):
        self.assertAllClose(
            self.loaded["multi_label/outputs"], self.multi_label.predict(self.texts), atol=1e-5, rtol=0
        )

    def test_backbone_preset_gives_our_encoder_outputs(self):
        token_ids, segment_ids, padding_mask = self.ids
        ours = self.encoder({"input_ids": token_ids, "input_mask": padding_mask, "segment_ids": segment_ids})
        for key in ("sequence_output", "pooled_output"):
            self.assertAllClose(self.loaded[f"backbone/{key}"], ours[key], atol=1e-5, rtol=0, msg=key)

    def test_bert_tf_reads_its_presets_back_with_labels_and_kind(self):
        info = read_info(self.presets["classifier"])
        self.assertEqual(
            (info.kind, info.label_list, info.max_seq_length), ("classification", self.labels, 24)
        )
        self.assertEqual(read_info(self.presets["multi_label"]).kind, "multi_label")
        model = bert_tf.BertClassifier.from_pretrained(self.presets["classifier"])
        expected = {variable.path: variable for variable in self.classifier.weights}
        for variable in model.weights:  # bit for bit
            self.assertAllEqual(variable, expected[variable.path], msg=variable.path)

    def test_families_without_a_keras_hub_task_are_written_as_the_backbone(self):
        span_dir = os.path.join(self.root, "span")
        bert_tf.BertSpanLabeler.from_pretrained(self.pretrained_dir).save(span_dir)
        out = os.path.join(self.root, "span_preset")
        with self.assertLogs("bert_tf.serving.exporter", logging.WARNING) as logs:
            export_saved_model("keras_hub", span_dir, out)
        self.assertIn("no BERT task class for span models", logs.output[0])
        self.assertNotIn("task.json", os.listdir(out))
        encoder, _ = from_pretrained(out, heads="encoder")
        self.assertAllEqual(encoder.pooler_dense.kernel, self.encoder.pooler_dense.kernel)

    def test_refusals_write_nothing(self):
        out = os.path.join(self.root, "refused")
        with self.assertRaisesRegex(ExportError, "drop --max_seq_length"):
            export_saved_model("keras_hub", self.pretrained_dir, out, seq_length=32)
        exact = BertEncoder(self.encoder.config.replace(hidden_act="gelu_exact"))
        with self.assertRaisesRegex(CheckpointError, "tanh GELU.*'gelu_exact'.*--kind=huggingface"):
            export_keras_hub(exact, out, vocab_file=VOCAB, lower_case=True)
        with self.assertRaisesRegex(CheckpointError, "has 12 tokens but the model's vocab_size is 30522"):
            vocab = os.path.join(self.root, "small_vocab.txt")
            with open(vocab, "w", encoding="utf-8") as file:
                file.write("\n".join(SMALL_VOCAB) + "\n")
            export_keras_hub(self.encoder, out, vocab_file=vocab, lower_case=True)
        self.assertFalse(os.path.exists(out))


def run_export(*flags):
    return subprocess.run(
        [sys.executable, "-m", "bert_tf.export", "--kind=keras_hub", *flags],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO},
        cwd=REPO,
        timeout=300,
    )


@pytest.mark.slow
class KerasHubCommandLineTest(tf.test.TestCase):
    """The program as users run it (a process each: slow)."""

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)
        super().tearDown()

    def test_a_fine_tuned_classifier_becomes_a_text_classifier_preset(self):
        preset = os.path.join(self.root, "source")
        keras_hub_classifier(preset)
        out = os.path.join(self.root, "out")
        result = run_export(f"--init_checkpoint={preset}", f"--export_dir={out}")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(
            result.stdout.splitlines(),
            [
                f"exported a keras-hub BertTextClassifier preset to {out}",
                f"load it with: keras_hub.models.BertTextClassifier.from_preset({out!r})",
            ],
        )
        self.assertEqual(hub().models.BertTextClassifier.from_preset(out).num_classes, 3)

    def test_a_roberta_preset_is_one_line_and_nothing_written(self):
        preset = os.path.join(self.root, "roberta")
        hub().models.RobertaBackbone(
            vocabulary_size=20,
            num_layers=1,
            num_heads=2,
            hidden_dim=8,
            intermediate_dim=16,
            max_sequence_length=16,
        ).save_to_preset(preset)
        out = os.path.join(self.root, "out")
        result = run_export(f"--init_checkpoint={preset}", f"--export_dir={out}")
        self.assertEqual(result.returncode, 1)
        lines = [line for line in result.stderr.splitlines() if not line.startswith("export_dir:")]
        self.assertLen(lines, 1, result.stderr)
        self.assertRegex(lines[0], "error: .*RobertaBackbone preset.*not a BERT one")
        self.assertFalse(os.path.exists(out))
