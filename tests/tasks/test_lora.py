"""LoRA fine-tuning (bert_tf.tasks.lora): the encoder stays as it was, the adapters and head
learn; the merged save, the exports and the adapters-only file give the adapted model's
outputs; the command line and Python reach the same adapters; mistakes get one clear error
and change nothing."""

import os
import random
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.checkpoints import export_pretrained
from bert_tf.config import BertConfig
from bert_tf.errors import DamagedFileError, UsageError
from bert_tf.models import BertEncoder
from bert_tf.tasks.runner import FinetuneSettings, run
from bert_tf.training import callbacks
from tests.harness.data import sentiment_rows, tiny_checkpoint, write_csv, write_vocab


def arrays_of(path: str) -> dict:
    with np.load(path) as file:
        return {name: file[name] for name in file.files if name != "__lora__"}


class LoraTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="lora_")
        cls.vocab = write_vocab(cls.dir)
        keras.utils.set_random_seed(1)
        cls.checkpoint = tiny_checkpoint(cls.dir, cls.vocab)
        rng = random.Random(0)
        cls.train_rows, cls.dev_rows = sentiment_rows(rng, 64), sentiment_rows(rng, 16)
        cls.texts = [row["text"] for row in cls.train_rows]
        cls.labels = [row["label"] for row in cls.train_rows]
        cls.dev_texts = [row["text"] for row in cls.dev_rows]

    def base(self, **kwargs):
        kwargs.setdefault("label_list", ["neg", "pos"])
        return bert_tf.BertClassifier.from_pretrained(self.checkpoint, max_seq_length=32, **kwargs)

    def adapted(self, rank=4, seed=3):
        keras.utils.set_random_seed(seed)
        model = self.base()
        model.enable_lora(rank)
        model.compile(learning_rate=1e-2)
        model.fit(self.texts, self.labels, batch_size=16, epochs=2, seed=seed, verbose=0)
        return model

    def test_fit_trains_the_adapters_and_the_head_and_leaves_the_encoder_as_it_was(self):
        keras.utils.set_random_seed(3)
        model = self.base()
        encoder_before = {w.path: np.array(w.numpy()) for w in model.encoder.weights}
        head_before = np.array(model.get_layer("classifier").kernel.numpy())
        model.enable_lora(4, lora_alpha=8)
        self.assertEqual(model.lora_rank, 4)
        trainable = sorted(w.path for w in model.trainable_weights)
        # 2 layers x (query, value) x (a, b), and the classifier's kernel and bias.
        self.assertLen(trainable, 10)
        self.assertTrue(all("lora_kernel" in p or p.startswith("classifier/") for p in trainable), trainable)
        model.compile(learning_rate=1e-2)
        model.fit(self.texts, self.labels, batch_size=16, epochs=2, seed=3, verbose=0)
        self.assertEqual(int(model.optimizer.iterations), 8)
        # Only the variables the optimizer holds moments for: the trainable ones.
        self.assertLen(model.optimizer.variables, 1 + 2 * 10)  # its step count, and two moments each
        for weight in model.encoder.weights:
            if "lora_kernel" in weight.path:
                continue
            self.assertAllEqual(weight.numpy(), encoder_before[weight.path], msg=weight.path)
        query = model.encoder.transformer_layers[0].attention.query
        self.assertGreater(np.abs(query.lora_kernel_b.numpy()).max(), 0)  # learnt (it starts at 0)
        self.assertNotAllClose(model.get_layer("classifier").kernel.numpy(), head_before)
        # The layer computes with kernel + alpha / rank * a @ b.
        expected = query._kernel.numpy() + 2.0 * query.lora_kernel_a.numpy() @ query.lora_kernel_b.numpy()
        self.assertAllClose(query.kernel, expected, atol=1e-6)

    def test_merged_save_and_exports_give_the_adapted_models_outputs(self):
        model = self.adapted()
        logits = model.predict(self.dev_texts)
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        folder = model.save(os.path.join(root, "model"))
        reloaded = bert_tf.BertClassifier.from_pretrained(folder)
        self.assertIsNone(reloaded.lora_rank)  # a plain fine-tuned model
        self.assertFalse(any("lora" in w.path for w in reloaded.weights))
        self.assertAllClose(reloaded.predict(self.dev_texts), logits, atol=1e-5)
        self.assertEqual(reloaded.label_list, ["neg", "pos"])
        self.assertEqual(model.lora_rank, 4)  # the model in memory keeps its adapters
        # Every export of the adapted model is of the merged one.
        model.export(os.path.join(root, "hf"), format="huggingface")
        from_hf = bert_tf.BertClassifier.from_pretrained(os.path.join(root, "hf"))
        self.assertAllClose(from_hf.predict(self.dev_texts), logits, atol=1e-5)
        model.save(os.path.join(root, "model.keras"))
        from_keras = keras.saving.load_model(os.path.join(root, "model.keras"))
        self.assertAllClose(from_keras.predict(self.dev_texts), logits, atol=1e-5)

    def test_adapters_alone_load_onto_the_base_to_the_same_outputs(self):
        model = self.adapted()
        logits = model.predict(self.dev_texts)
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        path = model.save_lora_weights(os.path.join(root, "adapters.npz"))
        whole = model.save(os.path.join(root, "model"))
        self.assertLess(os.path.getsize(path), os.path.getsize(os.path.join(whole, "model.keras")) / 4)
        saved = arrays_of(path)
        self.assertLen([name for name in saved if name.startswith("encoder/")], 8)
        self.assertLen([name for name in saved if name.startswith("head/")], 2)
        # On a base with a new head (its classes by number): the adapters, head and labels come back.
        base = bert_tf.BertClassifier.from_pretrained(self.checkpoint, num_classes=2, max_seq_length=32)
        base.load_lora_weights(path)
        self.assertEqual(base.lora_rank, 4)
        self.assertEqual(base.label_list, ["neg", "pos"])
        self.assertAllClose(base.predict(self.dev_texts), logits, atol=1e-6)
        # And it trains on from there like the model it came from.
        base.compile(learning_rate=1e-2)
        base.fit(self.texts[:16], self.labels[:16], batch_size=16, epochs=1, seed=1, verbose=0)

    def test_command_line_and_python_reach_the_same_adapters(self):
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        train = write_csv(os.path.join(root, "train.csv"), self.train_rows)
        settings = FinetuneSettings.of(
            task="classification",
            init_checkpoint=self.checkpoint,
            train_file=train,
            output_dir=os.path.join(root, "cli"),
            max_seq_length=32,
            train_batch_size=16,
            num_train_epochs=2,
            learning_rate=1e-2,
            lora_rank=4,
            lora_alpha=8,
            seed=7,
            verbose=0,
        )
        run(settings)
        cli = arrays_of(os.path.join(root, "cli", "lora_weights.npz"))

        keras.utils.set_random_seed(7)
        model = self.base()
        model.enable_lora(4, lora_alpha=8)
        model.compile(learning_rate=1e-2)
        model.fit(self.texts, self.labels, batch_size=16, epochs=2, seed=7, verbose=0)
        python = model.save_lora_weights(os.path.join(root, "python.npz"))
        ours = arrays_of(python)
        self.assertEqual(sorted(ours), sorted(cli))
        for name in ours:
            self.assertAllClose(ours[name], cli[name], atol=1e-6, msg=name)
        self.assertGreater(np.abs(ours["encoder/layer_1/attention/value/lora_kernel_b"]).max(), 0)
        # The run's model/ is the merged model.
        merged = bert_tf.BertClassifier.from_pretrained(os.path.join(root, "cli", "model"))
        self.assertAllClose(merged.predict(self.dev_texts), model.predict(self.dev_texts), atol=1e-5)

    @pytest.mark.slow  # ~30 s: a model of every family
    def test_every_familys_model_takes_adapters_and_saves_them_alone_and_merged(self):
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        cases = [
            (
                bert_tf.BertTokenClassifier,
                {"label_list": ["O", "B-X"]},
                [["a", "good", "film"], ["bad"]],
                "classifier",
            ),
            (bert_tf.BertSpanLabeler, {}, [("what film", "a good film it was")], "span_dense"),
            (bert_tf.BertMultipleChoice, {}, [("a film", ["good", "bad"])], "scorer"),
        ]
        rng = np.random.default_rng(0)
        for cls, options, x, head in cases:
            with self.subTest(model=cls.__name__):
                model = cls.from_pretrained(self.checkpoint, max_seq_length=32, **options)
                model.enable_lora(2)
                self.assertEqual(
                    {w.path.split("/")[0] for w in model.trainable_weights} - {"layer_0", "layer_1"}, {head}
                )
                for weight in model.trainable_weights:  # as if trained: adapters away from zero
                    weight.assign(rng.normal(0, 0.05, weight.shape).astype("float32"))
                outputs = model.predict(x)
                adapters = model.save_lora_weights(os.path.join(root, f"{cls.__name__}.npz"))
                on_base = cls.from_pretrained(self.checkpoint, max_seq_length=32, **options)
                on_base.load_lora_weights(adapters)
                merged = cls.from_pretrained(model.save(os.path.join(root, cls.__name__)))
                for other in (on_base, merged):
                    if cls is bert_tf.BertSpanLabeler:  # answers (strings)
                        self.assertEqual(other.predict(x), outputs)
                    else:
                        for want, got in zip(outputs, other.predict(x), strict=True):
                            self.assertAllClose(want, got, atol=1e-5)

    def test_a_training_backup_restores_the_adapters_and_the_frozen_kernels_as_they_were(self):
        # Keras saves a LoRA layer's kernel merged and zeroes its adapters on loading; a resumed
        # run must go on from the adapters and frozen kernels themselves.
        model = self.adapted()
        saved = [np.array(w.numpy()) for w in model.weights]
        backup_dir = os.path.join(tempfile.mkdtemp(dir=self.get_temp_dir()), "backup")
        backup = callbacks.TrainingBackup(backup_dir)
        backup.set_model(model)
        backup.save(step=8)
        fresh = self.base()
        fresh.enable_lora(4)
        fresh.compile(learning_rate=1e-2)
        self.assertEqual(callbacks.TrainingBackup(backup_dir).restore(fresh), 8)
        for want, got in zip(saved, fresh.weights, strict=True):
            self.assertAllEqual(want, got.numpy(), msg=got.path)
        self.assertEqual(int(fresh.optimizer.iterations), 8)

    def test_mistakes_get_one_clear_error_and_change_nothing(self):
        model = self.base()
        for rank in (0, -2, 1.5, True):
            with self.assertRaisesRegex(UsageError, f"rank must be a positive integer .*got {rank!r}"):
                model.enable_lora(rank)
        with self.assertRaisesRegex(UsageError, "lora_alpha must be > 0, got 0"):
            model.enable_lora(4, lora_alpha=0)
        self.assertIsNone(model.lora_rank)
        self.assertFalse(any("lora" in w.path for w in model.weights))
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        with self.assertRaisesRegex(UsageError, "no LoRA adapters to save: call model.enable_lora"):
            model.save_lora_weights(os.path.join(root, "none.npz"))
        model.enable_lora(4)
        with self.assertRaisesRegex(UsageError, r"has LoRA adapters already \(rank 4\)"):
            model.enable_lora(8)
        with self.assertRaisesRegex(UsageError, "writes an .npz file; name it so"):
            model.save_lora_weights(os.path.join(root, "adapters.bin"))
        self.assertEqual(os.listdir(root), [])
        path = model.save_lora_weights(os.path.join(root, "adapters.npz"))

        # A base of another shape: refused before the model changes.
        other_vocab = write_vocab(tempfile.mkdtemp(dir=self.get_temp_dir()))
        config = BertConfig(
            vocab_size=len(open(other_vocab).read().split()),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
        other_dir = os.path.join(tempfile.mkdtemp(dir=self.get_temp_dir()), "other")
        export_pretrained(
            BertEncoder(config),
            other_dir,
            vocab_file=other_vocab,
            lower_case=True,
            formats=("google",),
        )
        other = bert_tf.BertClassifier.from_pretrained(
            other_dir, label_list=["neg", "pos"], max_seq_length=32
        )
        with self.assertRaisesRegex(
            UsageError,
            r"holds adapters for another base \(hidden_size 64 there, 32 here, intermediate_size 128 "
            r"there, 64 here\); load them onto a model built from the checkpoint they were trained on",
        ):
            other.load_lora_weights(path)
        self.assertIsNone(other.lora_rank)
        # A head of other classes.
        three = self.base(label_list=["a", "b", "c"])
        with self.assertRaisesRegex(
            UsageError, r"holds a head of another shape .*label_list= or num_classes="
        ):
            three.load_lora_weights(path)
        self.assertIsNone(three.lora_rank)
        # Another task model's adapters.
        tagger = bert_tf.BertTokenClassifier.from_pretrained(
            self.checkpoint, label_list=["O", "B"], max_seq_length=32
        )
        with self.assertRaisesRegex(
            UsageError, "holds the head of a BertClassifier, not of a BertTokenClassifier"
        ):
            tagger.load_lora_weights(path)
        # Files that are not adapters.
        fresh = self.base()
        with self.assertRaisesRegex(UsageError, "no LoRA weights at"):
            fresh.load_lora_weights(os.path.join(root, "missing.npz"))
        cut = os.path.join(root, "cut.npz")
        with open(path, "rb") as source, open(cut, "wb") as target:
            target.write(source.read()[: os.path.getsize(path) // 2])
        with self.assertRaisesRegex(DamagedFileError, "cut.npz is truncated or corrupt"):
            fresh.load_lora_weights(cut)
        self.assertIsNone(fresh.lora_rank)


if __name__ == "__main__":
    tf.test.main()
