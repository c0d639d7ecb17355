"""Exported preprocessor, encoder and fill-mask SavedModels, loaded without bert_tf.

One tiny model is exported once per class; one fresh interpreter (importing only
tensorflow and tensorflow_text) runs every exported endpoint, and each test compares what
it returned with the in-process Keras model and the original feature rules.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import CheckpointError
from bert_tf.config import BertConfig, load_config
from bert_tf.models import BertPretrainer
from bert_tf.serving.exporter import export_from_model, export_saved_model
from bert_tf.serving.saving import ExportError
from bert_tf.tokenization import BertTokenizer
from tests.harness.exports import VOCAB, int32, strings
from tests.harness.processes import run_in_fresh_process
from tests.harness.reference import original_features

SEQ_LENGTH = 16
TEXTS = [
    "Hello, world!",
    "",
    "naïve café — 東京 😀 Привет ♡",
    "long text " * 40,
    "   ",
]
TEXTS_B = ["A second segment.", "only b", "", "short", "long text " * 40]
MASK_TEXTS = ["the [MASK] sat on the [MASK].", "no mask here", "[MASK]", "", "over " * 30 + "[MASK]"]


def export_config() -> BertConfig:
    return load_config("bert_tiny").replace(
        hidden_size=32, intermediate_size=64, num_attention_heads=2, max_position_embeddings=64
    )


def packed(tokenizer, texts_a, texts_b=None):
    ids_a = tokenizer.tokenize(tf.constant(texts_a)).to_list()
    ids_b = tokenizer.tokenize(tf.constant(texts_b)).to_list() if texts_b is not None else [None] * len(ids_a)
    rows = [original_features(a, b, SEQ_LENGTH) for a, b in zip(ids_a, ids_b, strict=True)]
    return {
        name: np.array([row[i] for row in rows], np.int32)
        for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))
    }


class ExportedModelsTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        keras.utils.set_random_seed(1)
        cls.root = os.path.join(tempfile.gettempdir(), f"bert_tf_export_test_{os.getpid()}")
        shutil.rmtree(cls.root, ignore_errors=True)
        os.makedirs(cls.root)
        cls.config = export_config()
        cls.tokenizer = BertTokenizer(VOCAB, lower_case=True)
        cls.pretrainer = BertPretrainer(cls.config)
        cls.reference = packed(cls.tokenizer, TEXTS)
        cls.reference_pair = packed(cls.tokenizer, TEXTS, TEXTS_B)
        cls.pretrainer({**cls.reference, "masked_lm_positions": np.zeros((len(TEXTS), 1), np.int32)})
        cls.dirs = {}
        for kind in ("preprocessor", "encoder", "mlm"):
            cls.dirs[kind] = export_from_model(
                kind,
                cls.pretrainer,
                cls.config,
                VOCAB,
                True,
                os.path.join(cls.root, kind),
                seq_length=SEQ_LENGTH,
                top_k=4,
            )
        ragged_a = cls.tokenizer.tokenize(tf.constant(TEXTS)).to_list()
        ragged_b = cls.tokenizer.tokenize(tf.constant(TEXTS_B)).to_list()
        pre, enc, mlm = cls.dirs["preprocessor"], cls.dirs["encoder"], cls.dirs["mlm"]
        calls = [
            {"name": "pre_call", "export_dir": pre, "endpoint": "call", "args": [strings(TEXTS)]},
            {
                "name": "pre_call_pair",
                "export_dir": pre,
                "endpoint": "call",
                "args": [[strings(TEXTS), strings(TEXTS_B)]],
            },
            {
                "name": "pre_sig",
                "export_dir": pre,
                "endpoint": "signature:serving_default",
                "kwargs": {"text": strings(TEXTS)},
            },
            {
                "name": "pre_default",
                "export_dir": pre,
                "endpoint": "signature:default",
                "kwargs": {"text": strings(TEXTS)},
            },
            {
                "name": "pre_pair",
                "export_dir": pre,
                "endpoint": "signature:serving_pair",
                "kwargs": {"text_a": strings(TEXTS), "text_b": strings(TEXTS_B)},
            },
            {
                "name": "pre_tokenize",
                "export_dir": pre,
                "endpoint": "attr:tokenize",
                "args": [strings(TEXTS)],
            },
            {
                "name": "pre_tokenize_sig",
                "export_dir": pre,
                "endpoint": "signature:tokenize",
                "kwargs": {"text": strings(TEXTS)},
            },
            {
                "name": "pre_pack",
                "export_dir": pre,
                "endpoint": "attr:bert_pack_inputs",
                "args": [[{"ragged_int64": ragged_a}, {"ragged_int64": ragged_b}]],
            },
            {
                "name": "pre_pack_8",
                "export_dir": pre,
                "endpoint": "attr:bert_pack_inputs",
                "args": [[{"ragged_int64": ragged_a}], {"int32": 8}],
            },
            {
                "name": "enc_sig",
                "export_dir": enc,
                "endpoint": "signature:serving_default",
                "kwargs": {name: int32(value) for name, value in cls.reference_pair.items()},
            },
            {
                "name": "enc_call",
                "export_dir": enc,
                "endpoint": "call",
                "args": [{name: int32(value) for name, value in cls.reference_pair.items()}],
            },
            {
                "name": "mlm",
                "export_dir": mlm,
                "endpoint": "signature:serving_default",
                "kwargs": {"text": strings(MASK_TEXTS)},
            },
        ]
        cls.loaded = run_in_fresh_process(calls, cls.root)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def test_loading_process_never_imported_bert_tf(self):
        self.assertEqual(self.loaded["__bert_tf_modules__"].tolist(), [])

    def test_preprocessor_matches_the_original_feature_rules(self):
        for prefix, expected in [
            ("pre_call", self.reference),
            ("pre_sig", self.reference),
            ("pre_default", self.reference),
            ("pre_call_pair", self.reference_pair),
            ("pre_pair", self.reference_pair),
            ("pre_pack", self.reference_pair),
        ]:
            for name, value in expected.items():
                self.assertAllEqual(self.loaded[f"{prefix}/{name}"], value, msg=f"{prefix}/{name}")
                self.assertEqual(self.loaded[f"{prefix}/{name}"].dtype, np.int32)

    def test_unicode_empty_and_over_length_text(self):
        ids = self.loaded["pre_sig/input_ids"]
        mask = self.loaded["pre_sig/input_mask"]
        cls_id, sep_id = self.tokenizer.cls_id, self.tokenizer.sep_id
        self.assertEqual(ids[1, :3].tolist(), [cls_id, sep_id, 0])  # "" -> [CLS] [SEP]
        self.assertEqual(ids[4, :3].tolist(), [cls_id, sep_id, 0])  # whitespace only
        self.assertEqual(mask[3].tolist(), [1] * SEQ_LENGTH)  # over-length: full, ends in [SEP]
        self.assertEqual(ids[3, -1], sep_id)
        unicode_ids = ids[2][mask[2] == 1]
        self.assertIn(self.tokenizer.vocab.index("東"), unicode_ids.tolist())
        self.assertIn(self.tokenizer.vocab.index("naive"), unicode_ids.tolist())  # accents stripped

    def test_tokenize_returns_ragged_word_pieces(self):
        expected = self.tokenizer.tokenize(tf.constant(TEXTS))
        self.assertAllEqual(self.loaded["pre_tokenize.values"], expected.flat_values)
        self.assertAllEqual(self.loaded["pre_tokenize.row_lengths"], expected.row_lengths())
        self.assertAllEqual(self.loaded["pre_tokenize_sig/num_tokens"], expected.row_lengths())
        self.assertAllEqual(self.loaded["pre_tokenize_sig/token_ids"], expected.to_tensor())

    def test_bert_pack_inputs_at_another_seq_length(self):
        ids_a = self.tokenizer.tokenize(tf.constant(TEXTS)).to_list()
        expected = [original_features(a, None, 8)[0] for a in ids_a]
        self.assertAllEqual(self.loaded["pre_pack_8/input_ids"], expected)

    def test_encoder_matches_the_keras_model(self):
        expected = self.pretrainer.encoder(self.reference_pair)
        for prefix in ("enc_sig", "enc_call"):
            for name in ("sequence_output", "pooled_output"):
                got = self.loaded[f"{prefix}/{name}"]
                self.assertEqual(got.dtype, np.float32)
                self.assertLessEqual(np.abs(got - expected[name]).max(), 1e-5, msg=f"{prefix}/{name}")
        num_layers = self.config.num_hidden_layers
        stacked = self.loaded["enc_sig/encoder_outputs"]
        self.assertEqual(stacked.shape, (num_layers, len(TEXTS), SEQ_LENGTH, self.config.hidden_size))
        for layer in range(num_layers):
            want = expected["encoder_outputs"][layer]
            self.assertLessEqual(np.abs(stacked[layer] - want).max(), 1e-5)
            self.assertLessEqual(np.abs(self.loaded[f"enc_call/encoder_outputs/{layer}"] - want).max(), 1e-5)

    def test_fill_mask_matches_the_pretrainer(self):
        mask_id = self.tokenizer.mask_id
        num_masks = self.loaded["mlm/num_masks"]
        self.assertEqual(num_masks.tolist(), [2, 0, 1, 0, 0])  # the last [MASK] is trimmed away
        positions = self.loaded["mlm/mask_positions"]
        self.assertEqual(positions.tolist(), [[2, 6], [-1, -1], [1, -1], [-1, -1], [-1, -1]])
        # Reference: tokenize the parts around the marker, pack the original way, run the model.
        rows = []
        for text in MASK_TEXTS:
            parts = [
                self.tokenizer.tokenize(tf.constant([part])).to_list()[0] for part in text.split("[MASK]")
            ]
            ids = sum(([*part, mask_id] for part in parts), [])[:-1]
            rows.append(original_features(ids, None, SEQ_LENGTH))
        features = {
            name: np.array([r[i] for r in rows], np.int32)
            for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))
        }
        self.assertEqual(positions[0].tolist(), np.flatnonzero(features["input_ids"][0] == mask_id).tolist())
        logits = self.pretrainer({**features, "masked_lm_positions": np.maximum(positions, 0)})["mlm_logits"]
        probabilities = tf.nn.softmax(logits).numpy()
        for row, count in enumerate(num_masks):
            for slot in range(count):
                want = np.argsort(-probabilities[row, slot])[:4]
                self.assertAllEqual(self.loaded["mlm/top_k_ids"][row, slot], want)
                self.assertAllClose(
                    self.loaded["mlm/top_k_scores"][row, slot], probabilities[row, slot][want], atol=1e-5
                )
                tokens = [token.decode() for token in self.loaded["mlm/top_k_tokens"][row, slot]]
                self.assertEqual(tokens, [self.tokenizer.vocab[i] for i in want])
        self.assertAllEqual(self.loaded["mlm/top_k_ids"][1], -np.ones((2, 4)))
        self.assertAllEqual(self.loaded["mlm/top_k_scores"][1], np.zeros((2, 4)))

    def test_tfsm_layer_wraps_the_encoder_in_a_new_keras_model(self):
        layer = keras.layers.TFSMLayer(self.dirs["encoder"], call_endpoint="__call__")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in self.reference}
        outputs = layer(inputs)
        model = keras.Model(
            inputs,
            {"pooled": outputs["pooled_output"], "score": keras.layers.Dense(1)(outputs["pooled_output"])},
        )
        got = model(self.reference)
        want = self.pretrainer.encoder(self.reference)["pooled_output"]
        self.assertLessEqual(np.abs(got["pooled"] - want).max(), 1e-5)
        self.assertEqual(got["score"].shape, (len(TEXTS), 1))

    def test_export_dir_holds_config_vocab_and_info(self):
        for kind, directory in self.dirs.items():
            extra = os.path.join(directory, "assets.extra")
            self.assertEqual(BertConfig.from_json_file(os.path.join(extra, "bert_config.json")), self.config)
            with open(os.path.join(extra, "vocab.txt"), "rb") as copy, open(VOCAB, "rb") as source:
                self.assertEqual(copy.read(), source.read())
            with open(os.path.join(extra, "export_info.json")) as file:
                info = json.load(file)
            self.assertEqual((info["kind"], info["seq_length"], info["lower_case"]), (kind, SEQ_LENGTH, True))
        self.assertTrue(os.path.isfile(os.path.join(self.dirs["preprocessor"], "assets", "vocab.txt")))

    def saved_model_cli_show(self, kind):
        cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
        result = subprocess.run(
            [cli, "show", "--dir", self.dirs[kind], "--all"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return result.stdout

    def test_saved_model_cli_lists_the_encoder_signature(self):
        shown = self.saved_model_cli_show("encoder")
        self.assertIn("signature_def['serving_default']", shown)
        self.assertIn(
            "inputs['segment_ids'] tensor_info:\n        dtype: DT_INT32\n        shape: (-1, -1)", shown
        )
        hidden, layers = self.config.hidden_size, self.config.num_hidden_layers
        self.assertIn(
            f"outputs['encoder_outputs'] tensor_info:\n        dtype: DT_FLOAT\n        shape: ({layers}, -1, -1, {hidden})",
            shown,
        )
        self.assertIn(
            f"outputs['pooled_output'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1, {hidden})",
            shown,
        )

    @pytest.mark.slow
    def test_saved_model_cli_lists_the_preprocessor_and_mlm_signatures(self):
        shown = self.saved_model_cli_show("preprocessor")
        for key in ("serving_default", "default", "serving_pair", "tokenize"):
            self.assertIn(f"signature_def['{key}']", shown)
        self.assertIn("inputs['text_b'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)", shown)
        self.assertIn(
            f"outputs['input_ids'] tensor_info:\n        dtype: DT_INT32\n        shape: (-1, {SEQ_LENGTH})",
            shown,
        )
        shown = self.saved_model_cli_show("mlm")
        self.assertIn(
            "outputs['top_k_tokens'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1, -1, 4)",
            shown,
        )


class BadExportTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.config = export_config()
        self.encoder = BertPretrainer(self.config).encoder

    def test_seq_length_above_max_position_embeddings(self):
        target = os.path.join(self.get_temp_dir(), "too_long")
        with self.assertRaisesRegex(
            ExportError, "--max_seq_length=65 is above the model's max_position_embeddings=64"
        ):
            export_from_model("encoder", self.encoder, self.config, VOCAB, True, target, seq_length=65)
        self.assertFalse(os.path.exists(target))

    def test_existing_non_empty_export_dir_is_refused(self):
        target = self.get_temp_dir()
        with open(os.path.join(target, "keep.txt"), "w") as file:
            file.write("keep")
        with self.assertRaisesRegex(ExportError, "not empty.*--overwrite"):
            export_from_model("preprocessor", self.encoder, self.config, VOCAB, True, target, seq_length=8)
        self.assertEqual(os.listdir(target), ["keep.txt"])

    def test_no_checkpoint(self):
        empty = os.path.join(self.get_temp_dir(), "empty")
        os.makedirs(empty)
        export_dir = os.path.join(self.get_temp_dir(), "out")
        with self.assertRaisesRegex(ExportError, "empty directory"):
            export_saved_model("encoder", empty, export_dir)
        with self.assertRaisesRegex(ExportError, "does not exist"):
            export_saved_model("encoder", os.path.join(empty, "missing"), export_dir)
        shutil.copyfile(VOCAB, os.path.join(empty, "vocab.txt"))  # files, but no weights
        with self.assertRaisesRegex(CheckpointError, "holds no BERT checkpoint"):
            export_saved_model("encoder", empty, export_dir)
        self.assertFalse(os.path.exists(export_dir))


if __name__ == "__main__":
    tf.test.main()
