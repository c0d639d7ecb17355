"""The task models' Keras-native API: from_pretrained -> compile() -> fit on raw text -> predict
-> save -> reload -> export, as the fine-tuning docs show it, the same weights as the command
line, and one clear error for each mistake a user makes."""

import os
import pathlib
import random
import re
import tempfile
from unittest import mock

import keras
import tensorflow as tf

import bert_tf
from bert_tf.checkpoints.names import CheckpointError
from bert_tf.checkpoints.pretrained import export_pretrained
from bert_tf.errors import UsageError
from bert_tf.plot import describe_run
from bert_tf.tasks.finetuned import load_finetuned
from bert_tf.tasks.runner import FinetuneSettings, run
from bert_tf.training.progress import read_metrics
from tests.harness.data import sentiment_rows, tiny_checkpoint, write_csv, write_vocab

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "fine-tuning.md"


def docs_snippet() -> str:
    """The first Python block of docs/fine-tuning.md."""
    return re.search(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S).group(1)


class KerasTaskTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="keras_task_")
        cls.vocab = write_vocab(cls.dir)
        keras.utils.set_random_seed(1)
        cls.checkpoint = tiny_checkpoint(cls.dir, cls.vocab)
        rng = random.Random(0)
        cls.train_rows, cls.dev_rows = sentiment_rows(rng, 64), sentiment_rows(rng, 24)

    def texts_labels(self, rows):
        return [r["text"] for r in rows], [r["label"] for r in rows]

    def test_docs_snippet_runs_and_round_trips(self):
        """The docs' snippet, on the tiny checkpoint: the reloaded model predicts the same logits,
        and the export serves the same labels."""
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        code = docs_snippet().replace('"uncased_L-12_H-768_A-12"', repr(self.checkpoint))
        code = code.replace('"runs/', f'"{root}/runs/').replace('"exports/', f'"{root}/exports/')
        code = code.replace("epochs=3", "epochs=1")
        (train_texts, train_labels), (dev_texts, dev_labels) = map(
            self.texts_labels, (self.train_rows, self.dev_rows)
        )
        scope = dict(
            train_texts=train_texts, train_labels=train_labels, dev_texts=dev_texts, dev_labels=dev_labels
        )
        exec(compile(code, str(DOCS), "exec"), scope)  # noqa: S102 - the documented snippet itself
        trained_logits = scope["logits"]
        reloaded = scope["model"]
        texts = ["a quiet, moving film", "two hours I will not get back"]
        self.assertAllClose(reloaded.predict(texts), trained_logits, atol=1e-6)
        self.assertEqual(reloaded.label_list, ["neg", "pos"])
        # Saved with its optimizer, which comes back (Keras' loader skips a custom compile).
        model = load_finetuned(f"{root}/runs/reviews_py/model")
        self.assertEqual(type(model.optimizer).__name__, "AdamW")
        self.assertContainsSubset(["LayerNorm", "bias"], model.optimizer.weight_decay_exclusions)
        self.assertGreater(int(model.optimizer.iterations), 0)
        # That a task export serves without bert_tf: tests/export/test_task_export.py.
        serve = tf.saved_model.load(f"{root}/exports/reviews").signatures["serving_default"]
        self.assertEqual(
            [label.decode() for label in serve(text=tf.constant(dev_texts))["label"].numpy()],
            reloaded.label_names(reloaded.predict(dev_texts)),
        )

    def test_fit_traces_its_training_step_once(self):
        # The optimizer's slots exist before the first step: created in it, TensorFlow would
        # trace the step a second time (seconds on a CPU, for every fit).
        # The recipe's optimizer and one given to compile alike.
        for optimizer in (None, keras.optimizers.Adam(1e-4)):
            with self.subTest(optimizer=optimizer):
                model = bert_tf.BertClassifier.from_pretrained(
                    self.checkpoint, label_list=["neg", "pos"], max_seq_length=32
                )
                model.compile(optimizer=optimizer)
                traced = []
                step = type(model).train_step

                def counted(self, data, step=step, traced=traced):
                    traced.append(1)
                    return step(self, data)

                with mock.patch.object(type(model), "train_step", counted):
                    model.fit(*self.texts_labels(self.train_rows), batch_size=16, epochs=1, seed=1, verbose=0)
                self.assertLen(traced, 1)

    def test_command_line_and_python_give_the_same_weights(self):
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
            learning_rate=1e-3,
            seed=7,
            verbose=0,
        )
        run(settings)
        cli = bert_tf.BertClassifier.from_pretrained(os.path.join(root, "cli", "model"))

        keras.utils.set_random_seed(7)
        model = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, label_list=cli.label_list, max_seq_length=32
        )
        model.compile(learning_rate=1e-3)
        model.fit(*self.texts_labels(self.train_rows), batch_size=16, epochs=2, seed=7, verbose=0)
        self.assertEqual(int(model.optimizer.iterations), 8)  # 64 examples / 16, 2 epochs
        for ours, theirs in zip(model.weights, cli.weights, strict=True):
            self.assertAllClose(ours, theirs, atol=1e-6, msg=ours.path)

    def test_pairs_from_lists_tuples_and_datasets(self):
        model = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, label_list=["no", "yes"], max_seq_length=32
        )
        model.compile(learning_rate=1e-3)
        pairs = [("good film", "great plot"), ("bad film", "great plot"), ("nice cast", "fine music")]
        model.fit(pairs, ["yes", "no", 1], batch_size=2, epochs=1, verbose=0)  # names and ids
        self.assertEqual(model.task_info.option("text_b_column"), "text_b")  # saved: the model reads pairs
        from_pairs = model.predict(pairs)
        from_columns = model.predict(tuple(map(list, zip(*pairs, strict=True))))
        from_dataset = model.predict(
            tf.data.Dataset.from_tensor_slices(([a for a, _ in pairs], [b for _, b in pairs])).map(
                lambda a, b: ((a, b),)
            )
        )
        self.assertAllClose(from_pairs, from_columns)
        self.assertAllClose(from_pairs, from_dataset)
        with self.assertRaisesRegex(UsageError, r"reads \(text_a, text_b\) pairs"):
            model.predict(["good film"])

    def test_reads_every_checkpoint_format_and_fits_a_dataset(self):
        """The same encoder from a Google folder, a Hugging Face folder and a pretraining
        model_dir (its export/) gives the same logits; fit takes a tf.data.Dataset of raw pairs."""
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        google = bert_tf.BertClassifier.from_pretrained(self.checkpoint, num_classes=3, max_seq_length=32)
        encoder = google.encoder
        hf = export_pretrained(
            encoder, os.path.join(root, "hf"), vocab_file=self.vocab, formats=("huggingface",)
        )
        run_dir = os.path.join(root, "run")
        export_pretrained(encoder, os.path.join(run_dir, "export"), vocab_file=self.vocab, lower_case=True)
        encoder.config.to_json_file(os.path.join(run_dir, "bert_config.json"))
        texts = [r["text"] for r in self.dev_rows]
        for path in (hf, run_dir):
            other = bert_tf.BertClassifier.from_pretrained(path, num_classes=3, max_seq_length=32)
            other.get_layer("classifier").set_weights(google.get_layer("classifier").get_weights())
            self.assertAllClose(other.predict(texts), google.predict(texts), atol=1e-5, msg=path)
            self.assertEqual(other.label_list, ["0", "1", "2"])
        texts, labels = self.texts_labels(self.train_rows[:16])
        model = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, label_list=["neg", "pos"], max_seq_length=32
        )
        model.compile()
        model.fit(tf.data.Dataset.from_tensor_slices((texts, labels)), batch_size=8, epochs=1, verbose=0)
        self.assertEqual(int(model.optimizer.iterations), 2)

    def test_save_never_replaces_a_fine_tuned_model_unasked_and_writes_whole(self):
        # The README's tour once saved a barely trained Python model over the command line's
        # fine-tuned one, without a word: a fine-tuned folder is replaced only with overwrite=True.
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        texts, labels = self.texts_labels(self.train_rows[:16])
        cli = os.path.join(root, "cli")
        run(
            FinetuneSettings.of(
                task="classification",
                init_checkpoint=self.checkpoint,
                train_file=write_csv(os.path.join(root, "train.csv"), self.train_rows[:16]),
                output_dir=cli,
                max_seq_length=32,
                num_train_epochs=1,
                verbose=0,
            )
        )
        folder = os.path.join(cli, "model")
        before = {name: pathlib.Path(folder, name).read_bytes() for name in os.listdir(folder)}
        model = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, label_list=["neg", "pos"], max_seq_length=32
        )
        with self.assertRaisesRegex(UsageError, r"holds a fine-tuned model already .*pass overwrite=True"):
            model.save(folder)
        self.assertEqual(
            {name: pathlib.Path(folder, name).read_bytes() for name in os.listdir(folder)}, before
        )
        # Whole or nothing: a save that fails on the way leaves the old model as it was.
        with mock.patch.object(keras.Model, "save", side_effect=OSError("disk full")):
            with self.assertRaisesRegex(OSError, "disk full"):
                model.save(folder, overwrite=True)
        self.assertEqual(
            {name: pathlib.Path(folder, name).read_bytes() for name in os.listdir(folder)}, before
        )
        self.assertEqual([name for name in os.listdir(cli) if name.startswith(".")], [])
        model.save(folder, overwrite=True)
        self.assertAllClose(
            bert_tf.BertClassifier.from_pretrained(folder).predict(texts), model.predict(texts), atol=1e-6
        )
        # A folder of other files is never replaced, overwrite or not.
        with self.assertRaisesRegex(
            UsageError, r"holds other files \(data_stats.json, model\).*save to a new or empty folder"
        ):
            model.save(cli, overwrite=True)

    def test_a_python_fit_logs_its_curves_to_its_run_folder(self):
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        run_dir = os.path.join(root, "reviews_py")
        model = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, label_list=["neg", "pos"], max_seq_length=32
        )
        model.compile(learning_rate=1e-3)
        texts, labels = self.texts_labels(self.train_rows)
        model.fit(
            texts,
            labels,
            batch_size=16,
            epochs=2,
            validation_data=self.texts_labels(self.dev_rows),
            output_dir=run_dir,
            verbose=0,
        )
        model.fit(texts[:16], labels[:16], batch_size=16, epochs=1, output_dir=run_dir, verbose=0)  # adds on
        reports = read_metrics(run_dir)
        runs = [r for r in reports if r["split"] == "run"]
        self.assertEqual(
            [(r["step"], r["program"]) for r in runs],
            [(0, "BertClassifier.fit in Python"), (8, "BertClassifier.fit in Python")],
        )
        train = [r for r in reports if r["split"] == "train"]
        self.assertEqual(train[-1]["step"], 9)  # 64 / 16 * 2 updates, then one more
        self.assertEqual([r["step"] for r in reports if r["split"] == "eval"], [4, 8])
        self.assertIn("accuracy", [r for r in reports if r["split"] == "eval"][0])
        self.assertTrue(os.path.isdir(os.path.join(run_dir, "logs", "train")))
        # The plot says which run it draws; the model saved into the run folder keeps the curves.
        self.assertIn(f"{run_dir}: BertClassifier.fit in Python, ", describe_run(run_dir, reports))
        model.save(run_dir)
        self.assertEqual(read_metrics(run_dir), reports)
        self.assertTrue(os.path.isfile(os.path.join(run_dir, "task.json")))
        # Another model's fit does not mix its curves into this run's.
        other = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, label_list=["neg", "pos"], max_seq_length=32
        )
        other.compile()
        with self.assertRaisesRegex(UsageError, "holds the curves of another run"):
            other.fit(texts, labels, output_dir=run_dir, verbose=0)

    def test_mistakes_get_one_clear_error(self):
        texts, labels = self.texts_labels(self.train_rows[:4])
        model = bert_tf.BertClassifier.from_pretrained(
            self.checkpoint, label_list=["neg", "pos"], max_seq_length=32
        )
        with self.assertRaisesRegex(UsageError, r"fit before compile: call model.compile\(\)"):
            model.fit(texts, labels)
        model.compile()
        with self.assertRaisesRegex(
            UsageError, r"y\[1\] is 'meh', not one of the model's labels \['neg', 'pos'\]"
        ):
            model.fit(texts, [labels[0], "meh", *labels[2:]], verbose=0)
        with self.assertRaisesRegex(UsageError, r"y\[0\] is label id 2, outside 0..1"):
            model.fit(texts, [2, 0, 0, 0], verbose=0)
        with self.assertRaisesRegex(UsageError, "x has 4 examples but y has 3 labels"):
            model.fit(texts, labels[:3], verbose=0)
        mrpc = bert_tf.BertClassifier.from_pretrained(self.checkpoint, task="mrpc", max_seq_length=32)
        mrpc.compile()
        with self.assertRaisesRegex(
            UsageError, r"this model reads \(text_a, text_b\) pairs; x holds single texts"
        ):
            mrpc.fit(texts, ["0", "1", "0", "1"], verbose=0)
        with self.assertRaisesRegex(UsageError, "needs its classes: pass num_classes=N or label_list"):
            bert_tf.BertClassifier.from_pretrained(self.checkpoint)
        empty = tempfile.mkdtemp(dir=self.get_temp_dir())
        with self.assertRaisesRegex(CheckpointError, "holds no BERT checkpoint"):
            bert_tf.BertClassifier.from_pretrained(empty, num_classes=2)
        folder = model.save(os.path.join(tempfile.mkdtemp(dir=self.get_temp_dir()), "model"))
        # A classifier's folder gives its encoder to a tagger's new head, which needs its tags.
        with self.assertRaisesRegex(UsageError, "a new BertTokenClassifier head needs its classes"):
            bert_tf.BertTokenClassifier.from_pretrained(folder)
        with self.assertRaisesRegex(UsageError, "needs the model's tokenizer and task"):
            bert_tf.BertClassifier(model.encoder, num_classes=2).predict(["good"])


if __name__ == "__main__":
    tf.test.main()
