"""from_pretrained / export_pretrained: formats, round trips, and the refusals."""

import json
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from bert_tf import fileio
from bert_tf.checkpoints import (
    CheckpointError,
    detect_lower_case,
    export_pretrained,
    from_pretrained,
    load_weights,
)
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer
from bert_tf.tasks.classification.model import BertClassifier

CONFIG = BertConfig(
    vocab_size=30,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=12,
)
FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf_tiny")


def write_vocab(path, size=CONFIG.vocab_size, cased=False):
    words = [f"Word{i}" if cased else f"word{i}" for i in range(size - 5)]
    with open(path, "w", encoding="utf-8") as file:
        file.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    return path


def randomized(model):
    rng = np.random.default_rng(3)
    for variable in model.weights:
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    return model


def weights_by_path(model):
    return {variable.path: variable.numpy() for variable in model.weights}


class ExportRoundTripTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.directory = tempfile.mkdtemp()
        self.vocab = write_vocab(os.path.join(self.directory, "source_vocab.txt"))

    def assertSameWeights(self, model, other):
        expected, actual = weights_by_path(model), weights_by_path(other)
        self.assertEqual(sorted(expected), sorted(actual))
        for path, value in expected.items():
            self.assertAllEqual(actual[path], value, msg=path)  # bit for bit

    def test_both_formats_round_trip_every_weight(self):
        model = randomized(BertPretrainer(CONFIG))
        out = export_pretrained(
            model, os.path.join(self.directory, "out"), vocab_file=self.vocab, lower_case=False
        )
        self.assertTrue(
            {"bert_config.json", "bert_model.ckpt.index", "config.json", "model.safetensors", "vocab.txt"}
            <= set(os.listdir(out))
        )
        for path in (os.path.join(out, "bert_model.ckpt"), os.path.join(out, "model.safetensors")):
            restored, settings = from_pretrained(path)
            self.assertSameWeights(model, restored)
            self.assertFalse(settings.lower_case)  # recorded in tokenizer_config.json
            self.assertEqual(settings.vocab_file, os.path.join(out, "vocab.txt"))

    def test_google_checkpoint_has_the_original_names_and_shapes(self):
        model = randomized(BertPretrainer(CONFIG))
        out = export_pretrained(model, os.path.join(self.directory, "out"), formats=("google",))
        shapes = dict(tf.train.list_variables(os.path.join(out, "bert_model.ckpt")))
        self.assertEqual(shapes["bert/encoder/layer_1/intermediate/dense/kernel"], [16, 32])
        self.assertEqual(shapes["cls/seq_relationship/output_weights"], [2, 16])
        self.assertEqual(shapes["cls/predictions/output_bias"], [30])
        self.assertLen(shapes, 5 + 2 * 16 + 2 + 4 + 1 + 2)
        reader = tf.train.load_checkpoint(os.path.join(out, "bert_model.ckpt"))
        self.assertAllEqual(
            reader.get_tensor("cls/seq_relationship/output_weights"),
            model.next_sentence_head.dense.kernel.numpy().T,
        )

    def test_huggingface_file_has_transformers_names_and_layouts(self):
        model = randomized(BertPretrainer(CONFIG))
        out = export_pretrained(model, os.path.join(self.directory, "out"), formats=("huggingface",))
        tensors = load_file(os.path.join(out, "model.safetensors"))
        query = model.encoder.transformer_layers[0].attention.query.kernel.numpy()
        self.assertAllEqual(tensors["bert.encoder.layer.0.attention.self.query.weight"], query.T)
        self.assertIn("cls.predictions.bias", tensors)
        with open(os.path.join(out, "config.json")) as file:
            config = json.load(file)
        self.assertEqual(config["hidden_act"], "gelu_new")  # transformers' name for the tanh GELU
        self.assertEqual(config["architectures"], ["BertForPreTraining"])

    def test_encoder_export_and_load_into_a_task_model(self):
        encoder = randomized(BertEncoder(CONFIG))
        out = export_pretrained(encoder, os.path.join(self.directory, "enc"), formats=("huggingface",))
        self.assertNotIn("bert.", "".join(load_file(os.path.join(out, "model.safetensors"))))
        classifier = BertClassifier(BertEncoder(CONFIG), num_classes=2)
        load_weights(classifier, out)
        self.assertSameWeights(encoder, classifier.encoder)
        with self.assertRaisesRegex(CheckpointError, "heads='encoder'"):
            from_pretrained(out)  # no cls/ weights: only an encoder can be built
        restored, _ = from_pretrained(out, heads="encoder")
        self.assertSameWeights(encoder, restored)

    def test_pretraining_checkpoint_loads_as_encoder(self):
        model = randomized(BertPretrainer(CONFIG))
        out = export_pretrained(model, os.path.join(self.directory, "out"), formats=("google",))
        encoder, _ = from_pretrained(out, heads="encoder")
        self.assertSameWeights(model.encoder, encoder)


class RefusalTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.directory = tempfile.mkdtemp()
        self.model = randomized(BertPretrainer(CONFIG))
        self.out = export_pretrained(
            self.model, os.path.join(self.directory, "out"), formats=("huggingface",)
        )
        self.tensors = load_file(os.path.join(self.out, "model.safetensors"))

    def test_mismatch_lists_names_and_shapes_and_loads_nothing(self):
        tensors = dict(self.tensors)
        del tensors["bert.encoder.layer.1.output.dense.bias"]
        tensors["bert.encoder.layer.0.intermediate.dense.weight"] = np.zeros((8, 16), "float32")
        tensors["bert.encoder.layer.2.output.dense.bias"] = np.zeros((16,), "float32")
        save_file(tensors, os.path.join(self.out, "model.safetensors"))
        target = BertPretrainer(CONFIG)
        before = weights_by_path(target)
        with self.assertRaises(CheckpointError) as raised:
            load_weights(target, self.out)
        message = str(raised.exception)
        self.assertIn("missing (1): bert.encoder.layer.1.output.dense.bias [16]", message)
        self.assertIn("unexpected (1): bert.encoder.layer.2.output.dense.bias [16]", message)
        self.assertIn(
            "bert.encoder.layer.0.intermediate.dense.weight is [8, 16] in the checkpoint, [32, 16]", message
        )
        after = weights_by_path(target)
        for path, value in before.items():
            self.assertAllEqual(after[path], value)

    def test_vocab_file_must_match_vocab_size(self):
        write_vocab(os.path.join(self.out, "vocab.txt"), size=CONFIG.vocab_size + 1)
        with self.assertRaisesRegex(CheckpointError, "has 31 tokens but the config says vocab_size=30"):
            from_pretrained(self.out)

    def test_pytorch_pickle_is_refused_with_conversion_advice(self):
        directory = os.path.join(self.directory, "torch_only")
        os.makedirs(directory)
        shutil.copy(os.path.join(self.out, "config.json"), directory)
        with open(os.path.join(directory, "pytorch_model.bin"), "wb") as file:
            file.write(b"not unpickled")
        with self.assertRaisesRegex(CheckpointError, "safe_serialization=True"):
            from_pretrained(directory)

    def test_untied_decoder_weight_is_refused(self):
        tensors = dict(self.tensors)
        tensors["cls.predictions.decoder.weight"] = np.zeros_like(
            tensors["bert.embeddings.word_embeddings.weight"]
        )
        save_file(tensors, os.path.join(self.out, "model.safetensors"))
        with self.assertRaisesRegex(CheckpointError, "differs"):
            from_pretrained(self.out)

    def test_tied_copies_and_buffers_are_accepted(self):
        tensors = dict(self.tensors)
        tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"]
        tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"]
        tensors["bert.embeddings.position_ids"] = np.arange(12)[None]
        save_file(tensors, os.path.join(self.out, "model.safetensors"))
        restored, _ = from_pretrained(self.out)
        self.assertAllEqual(
            restored.encoder.embeddings.word_embeddings, self.model.encoder.embeddings.word_embeddings
        )

    def test_loading_reads_the_safetensors_file_once(self):
        tensors = dict(self.tensors)
        tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"]
        save_file(tensors, os.path.join(self.out, "model.safetensors"))
        reads = []

        def counted(read):
            def wrapper(path, *args, **kwargs):
                if os.fspath(path).endswith(".safetensors"):
                    reads.append(read.__name__)
                return read(path, *args, **kwargs)

            return wrapper

        with (
            mock.patch.object(fileio, "read_bytes", counted(fileio.read_bytes)),
            mock.patch.object(fileio, "open_binary", counted(fileio.open_binary)),
        ):
            restored, _ = from_pretrained(self.out)
        self.assertEqual(reads, ["read_bytes"])
        self.assertAllEqual(
            restored.encoder.embeddings.word_embeddings, self.model.encoder.embeddings.word_embeddings
        )

    def test_no_checkpoint_says_what_it_looked_for(self):
        with self.assertRaisesRegex(CheckpointError, "no BERT checkpoint"):
            from_pretrained(tempfile.mkdtemp())


class LowerCaseTest(tf.test.TestCase):
    def test_decided_by_config_then_name_then_vocab(self):
        root = tempfile.mkdtemp()
        plain = os.path.join(root, "model")
        os.makedirs(plain)
        cased_vocab = write_vocab(os.path.join(plain, "cased.txt"), cased=True)
        uncased_vocab = write_vocab(os.path.join(plain, "uncased.txt"))
        self.assertFalse(detect_lower_case(plain, cased_vocab)[0])
        self.assertTrue(detect_lower_case(plain, uncased_vocab)[0])
        named = os.path.join(root, "cased_L-12_H-768_A-12")
        os.makedirs(named)
        lower_case, reason = detect_lower_case(named, uncased_vocab)
        self.assertFalse(lower_case)
        self.assertIn("directory name", reason)
        with open(os.path.join(named, "tokenizer_config.json"), "w") as file:
            json.dump({"do_lower_case": True}, file)
        lower_case, reason = detect_lower_case(named, cased_vocab)
        self.assertTrue(lower_case)
        self.assertIn("do_lower_case", reason)

    def test_real_uncased_vocab_is_detected_as_uncased(self):
        vocab = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bert_uncased_vocab.txt")
        self.assertTrue(detect_lower_case(tempfile.mkdtemp(), vocab)[0])
