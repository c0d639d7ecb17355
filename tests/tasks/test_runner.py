"""The runner end to end on GLUE's MNLI layout, TFDS sources (mocked) and the CLI flags."""

import dataclasses
import json
import os
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from bert_tf.errors import UsageError
from bert_tf.tasks import registry as families
from bert_tf.tasks import runner
from bert_tf.tasks.classification import glue
from bert_tf.tasks.family import TaskData
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.finetuned import load_finetuned
from bert_tf.tasks.runner import run
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.tasks.span import squad
from bert_tf.tasks.token import conll

WORDS = ["the", "cat", "sat", "dog", "ran", "a", "mat", "not", "is", "on", "."]
LABELS = ["contradiction", "entailment", "neutral"]


def write_vocab(directory):
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w") as handle:
        handle.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    return path


def write_config(directory):
    path = os.path.join(directory, "bert_config.json")
    with open(path, "w") as handle:
        json.dump(
            {
                "vocab_size": 5 + len(WORDS),
                "hidden_size": 32,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "max_position_embeddings": 32,
            },
            handle,
        )
    return path


def mnli_rows(rng, n, labelled):
    header = [
        "index",
        "promptID",
        "pairID",
        "genre",
        "s1_bp",
        "s2_bp",
        "s1_p",
        "s2_p",
        "sentence1",
        "sentence2",
    ]
    rows = [header + (["label1", "gold_label"] if labelled else [])]
    for i in range(n):
        a, b = (" ".join(rng.choice(WORDS, size=4)) for _ in range(2))
        row = [str(100 + i), "0", "0", "g", "", "", "", "", a, b]
        label = LABELS[i % 3]
        rows.append(row + ([label, label] if labelled else []))
    return rows


class GlueRunTest(tf.test.TestCase):
    @pytest.mark.slow  # ~35 s; the GLUE readers are tested in test_glue.py
    def test_mnli_from_a_glue_directory(self):
        root = self.get_temp_dir()
        data_dir = os.path.join(root, "MNLI")
        os.makedirs(data_dir, exist_ok=True)
        rng = np.random.default_rng(0)
        for name, labelled, n in [
            ("train", True, 12),
            ("dev_matched", True, 6),
            ("dev_mismatched", True, 5),
            ("test_matched", False, 4),
            ("test_mismatched", False, 3),
        ]:
            with open(os.path.join(data_dir, f"{name}.tsv"), "w") as handle:
                handle.writelines("\t".join(row) + "\n" for row in mnli_rows(rng, n, labelled))
        output_dir = os.path.join(root, "out")
        settings = FinetuneSettings.of(
            task="mnli",
            output_dir=output_dir,
            data_dir=data_dir,
            vocab_file=write_vocab(root),
            bert_config=write_config(root),
            max_seq_length=16,
            train_batch_size=4,
            num_train_epochs=1.0,
            verbose=0,
        )
        results = run(settings)
        self.assertEqual(
            sorted(results),
            [
                "accuracy",
                "accuracy_mismatched",
                "bag_of_words_accuracy",
                "bag_of_words_accuracy_mismatched",
                "eval_loss",
                "eval_loss_mismatched",
                "majority_baseline",
                "majority_baseline_mismatched",
            ],
        )
        # Each dev set's labels cycle through the three classes from the first.
        self.assertAllClose(
            [results["majority_baseline"], results["majority_baseline_mismatched"]], [2 / 6, 2 / 5]
        )
        with open(os.path.join(output_dir, "eval_results.json")) as handle:
            self.assertAllClose(json.load(handle), results)

        # The dev predictions written agree with the accuracy reported.
        with open(os.path.join(output_dir, "eval_MNLI-m.tsv")) as handle:
            predicted = [line.rstrip("\n").split("\t")[1] for line in handle][1:]
        gold = [LABELS[i % 3] for i in range(6)]
        self.assertAllClose(
            results["accuracy"], np.mean([p == g for p, g in zip(predicted, gold, strict=True)])
        )

        # Test-set submissions: GLUE's file names, index column and label strings.
        submissions = {}
        for name, n in (("MNLI-m", 4), ("MNLI-mm", 3)):
            with open(os.path.join(output_dir, f"{name}.tsv")) as handle:
                lines = handle.read().splitlines()
            self.assertEqual(lines[0], "index\tprediction")
            self.assertEqual([line.split("\t")[0] for line in lines[1:]], [str(100 + i) for i in range(n)])
            self.assertContainsSubset({line.split("\t")[1] for line in lines[1:]}, LABELS)
            submissions[name] = [line.split("\t")[1] for line in lines[1:]]
        with open(os.path.join(output_dir, "data_stats.json")) as handle:
            self.assertEqual(json.load(handle)["train"]["num_examples"], 12)

        # The saved model rebuilds without this run's flags and predicts the same labels.
        model, tokenizer, info = load_finetuned(os.path.join(output_dir, "model"))
        self.assertEqual(info.label_list, LABELS)
        self.assertEqual((info.task, info.kind, info.max_seq_length), ("mnli", "classification", 16))
        # The optimizer comes back with its decay exclusions and Keras' replica summing.
        optimizer = getattr(model.optimizer, "inner_optimizer", model.optimizer)
        self.assertEqual(type(optimizer).__name__, "AdamW")
        self.assertContainsSubset(["LayerNorm", "bias"], optimizer.weight_decay_exclusions)
        self.assertFalse(optimizer.presummed_gradients)
        adapter = families.make_family(settings, tokenizer)
        adapter.label_list = info.label_list
        [test_data, _] = adapter.load("predict")
        logits = adapter.predict(model, test_data, batch_size=3).outputs
        self.assertEqual([LABELS[i] for i in logits.argmax(-1)], submissions["MNLI-m"])

    def test_squad_v2_evaluation_writes_the_official_files(self):
        root = self.get_temp_dir()
        data = {
            "version": "v2.0",
            "data": [
                {
                    "title": "t",
                    "paragraphs": [
                        {
                            "context": "the cat sat on a mat . the dog ran .",
                            "qas": [
                                {
                                    "id": "a",
                                    "question": "the cat ?",
                                    "answers": [{"text": "a mat", "answer_start": 15}],
                                },
                                {"id": "b", "question": "the dog ?", "answers": [], "is_impossible": True},
                            ],
                        }
                    ],
                }
            ],
        }
        dev = os.path.join(root, "dev.json")
        with open(dev, "w") as handle:
            json.dump(data, handle)
        output_dir = os.path.join(root, "squad2")
        # Evaluation only (no training data): a random-init model, official outputs all the same.
        results = run(
            FinetuneSettings.of(
                task="squad_v2",
                output_dir=output_dir,
                eval_file=dev,
                vocab_file=write_vocab(root),
                bert_config=write_config(root),
                max_seq_length=32,
                verbose=0,
                options=dict(doc_stride=8, max_query_length=8),
            )
        )
        self.assertContainsSubset(
            {"exact_match", "f1", "HasAns_exact", "NoAns_f1", "best_f1", "best_f1_thresh", "total"},
            set(results),
        )
        self.assertEqual(results["total"], 2)
        for name in ("predictions.json", "nbest_predictions.json", "null_odds.json"):
            with open(os.path.join(output_dir, name)) as handle:
                self.assertEqual(sorted(json.load(handle)), ["a", "b"])
        self.assertFalse(os.path.exists(os.path.join(output_dir, "model")))  # nothing was trained

    def test_no_data_and_unknown_task(self):
        root = self.get_temp_dir()
        base = dict(
            output_dir=os.path.join(root, "x"),
            vocab_file=write_vocab(root),
            bert_config=write_config(root),
            max_seq_length=16,  # the test config has 32 positions
        )
        with self.assertRaisesRegex(TaskDataError, "no data for task 'rte'"):
            run(FinetuneSettings.of(task="rte", **base))
        with self.assertRaisesRegex(UsageError, "unknown task 'mrcp'.*mrpc"):
            run(FinetuneSettings.of(task="mrcp", **base))


class MajorityBaselineTest(tf.test.TestCase):
    def test_scores_are_written_beside_the_majority_baseline_and_the_run_says_where(self):
        root = self.get_temp_dir()

        def write(name, labels):
            path = os.path.join(root, name)
            with open(path, "w") as handle:
                handle.write("text,label\n")
                handle.writelines(
                    f"the {word} sat,{label}\n" for word, label in zip(WORDS, labels, strict=False)
                )
            return path

        settings = FinetuneSettings.of(
            task="classification",
            output_dir=os.path.join(root, "out"),
            train_file=write("train.csv", ["a", "a", "a", "b"]),
            eval_file=write("dev.csv", ["a", "b", "b", "b"]),  # the commonest: b, 3 of 4
            vocab_file=write_vocab(root),
            bert_config=write_config(root),
            max_seq_length=16,
            train_batch_size=4,
            num_train_epochs=1.0,
            verbose=0,
            baseline=False,  # tests/tasks/test_baseline.py: its closing line
        )
        with self.assertLogs("bert_tf.tasks.runner", "INFO") as logs:
            results = run(settings)
        self.assertEqual(results["majority_baseline"], 0.75)
        with open(os.path.join(settings.output_dir, "eval_results.json")) as handle:
            self.assertEqual(json.load(handle), results)
        said = "\n".join(logs.output)
        self.assertIn(
            f"accuracy {results['accuracy']:.4f}, majority-class baseline 0.7500 (always answering 'b')", said
        )
        self.assertEqual("does not beat the majority-class baseline" in said, results["accuracy"] <= 0.75)
        out = settings.output_dir
        self.assertEndsWith(
            logs.output[-1], f"scores in {out}/eval_results.json; the fine-tuned model in {out}/model"
        )

    def test_a_model_that_does_not_beat_the_baseline_is_warned_about(self):
        data = TaskData("eval_mismatched", lambda: iter(()), True, None)

        class Family:  # a family whose data's commonest class is 'b', 60% of it
            def majority_baseline(self, outputs):
                return "b", 0.6

        for accuracy, warned in ((0.6, True), (0.55, True), (0.65, False)):
            with self.assertLogs("bert_tf.tasks.runner", "INFO") as logs:
                baseline = runner._majority_baseline(Family(), data, None, {"accuracy_mismatched": accuracy})
            self.assertEqual(baseline, {"majority_baseline_mismatched": 0.6})
            warnings = [line for line in logs.output if line.startswith("WARNING")]
            self.assertLen(warnings, int(warned))
            if warned:
                self.assertRegex(
                    warnings[0],
                    f"eval_mismatched data: accuracy {accuracy:.4f} does not beat the majority-class baseline "
                    "0.6000 \\(always answering 'b'\\).*--num_train_epochs.*--learning_rate",
                )


class TfdsSourcesTest(tf.test.TestCase):
    def test_glue_stsb_from_tfds_is_regression(self):
        root = self.get_temp_dir()
        from bert_tf.tokenization import BertTokenizer

        tokenizer = BertTokenizer(write_vocab(root))
        settings = FinetuneSettings.of(task="stsb", output_dir=root, tfds_name="glue/stsb", max_seq_length=16)
        adapter = families.make_family(settings, tokenizer)
        with tfds.testing.mock_data(num_examples=6):
            [train] = adapter.load("train")
            evals = adapter.load("eval")
            self.assertEqual(adapter.count(train).num_examples, 6)
            inputs, labels = next(iter(adapter.dataset(train, batch_size=6, training=True)))
        self.assertEqual(adapter.kind, "regression")
        self.assertEqual(labels.dtype, tf.float32)
        # One label per example; the examples packed into rows of the batch's padded length.
        self.assertEqual(labels.shape, (6,))
        self.assertEqual(inputs["cls_positions"].shape, (6,))
        self.assertLessEqual(inputs["input_ids"].shape[0], 6)
        self.assertLessEqual(inputs["input_ids"].shape[1], 16)
        self.assertEqual([data.name for data in evals], ["eval"])
        with self.assertRaisesRegex(TaskDataError, "--task=mrpc reads glue/mrpc, not --tfds_name=glue/sst2"):
            families.make_family(
                FinetuneSettings.of(task="mrpc", output_dir=root, tfds_name="glue/sst2"), tokenizer
            )

    def test_a_missing_split_names_the_others(self):
        builder = mock.Mock()
        builder.info.splits = {"train": None, "validation": None}
        with mock.patch("tensorflow_datasets.builder", return_value=builder):
            with self.assertRaisesRegex(
                TaskDataError, r"TFDS glue/stsb has no split 'tset'.*\['train', 'validation'\]"
            ):
                next(glue.iter_tfds_examples("stsb", "tset"))

    def test_a_dataset_that_is_not_prepared_and_cannot_be_downloaded_says_how_to_prepare_it(self):
        builder = mock.Mock(data_dir="/data/glue/stsb/2.0.0")
        builder.is_prepared.return_value = False
        builder.download_and_prepare.side_effect = ConnectionError("Failed to establish a new connection")
        with mock.patch("tensorflow_datasets.builder", return_value=builder):
            with self.assertRaisesRegex(
                TaskDataError,
                r"TFDS glue/stsb is not prepared in /data/glue/stsb/2.0.0 and could not be downloaded "
                r"\(ConnectionError: Failed to establish.*tfds build glue/stsb --data_dir=DIR.*--tfds_data_dir",
            ):
                next(glue.iter_tfds_examples("stsb", "train"))

    def test_squad_and_conll_records(self):
        with tfds.testing.mock_data(num_examples=4):
            dataset = squad.tfds_dataset("squad/v2.0", "train")
            qas = [
                qa for article in dataset for paragraph in article["paragraphs"] for qa in paragraph["qas"]
            ]
            self.assertLen(qas, 4)
            self.assertContainsSubset({"id", "question", "answers", "is_impossible"}, set(qas[0]))
            examples, _ = squad.read_examples(dataset, is_training=False)
            self.assertLen(examples, 4)
            # Mock questions carry several answers; training needs exactly one, and says so.
            with self.assertRaisesRegex(TaskDataError, r"training question '.+' has \d+ answers"):
                squad.read_examples(dataset, is_training=True)
            with self.assertRaisesRegex(TaskDataError, "conll2003 train record 0: .* tokens but .* ner tags"):
                list(conll.iter_tfds_sentences("conll2003", "train"))
        with self.assertRaisesRegex(TaskDataError, "no TFDS dataset named 'sqaud'.*squad"):
            squad.tfds_dataset("sqaud/v1.1", "train")


class FlagsTest(tf.test.TestCase):
    def test_a_finetuned_model_folder_predicts_and_evaluates_without_training_data(self):
        root = self.get_temp_dir()
        rng = np.random.default_rng(3)

        def write(name, n):
            path = os.path.join(root, name)
            with open(path, "w") as handle:
                handle.write("text,label\n")
                for i in range(n):
                    handle.write(" ".join(rng.choice(WORDS, size=5)) + f",{['yes', 'no'][i % 2]}\n")
            return path

        common = dict(task="classification", max_seq_length=16, verbose=0, eval_batch_size=4)
        first = FinetuneSettings.of(
            output_dir=os.path.join(root, "first"),
            train_file=write("train.csv", 16),
            eval_file=write("dev.csv", 6),
            vocab_file=write_vocab(root),
            bert_config=write_config(root),
            train_batch_size=4,
            num_train_epochs=1.0,
            **common,
        )
        # The baseline is fitted on training data: a run with none scores the model alone.
        trained = {k: v for k, v in run(first).items() if not k.startswith("bag_of_words")}
        model_dir = os.path.join(first.output_dir, "model")
        # Evaluate and predict from the fine-tuned folder alone: no training file for the
        # labels, no vocab or config flags.
        second = FinetuneSettings.of(
            output_dir=os.path.join(root, "second"),
            init_checkpoint=model_dir,
            eval_file=first.eval_file,
            predict_file=first.eval_file,
            **common,
        )
        self.assertAllClose(run(second), trained)
        self.assertFalse(os.path.exists(os.path.join(second.output_dir, "model")))  # nothing trained
        # Another task starts a new head on the fine-tuned encoder, as on a pretrained one: here
        # MRPC, whose files this CSV is not.
        with self.assertRaisesRegex(TaskDataError, "mrpc needs at least 5; is this the mrpc train/dev file"):
            run(dataclasses.replace(second, task="mrpc", output_dir=os.path.join(root, "third")))
        # A finished result is kept unless --overwrite.
        with self.assertRaisesRegex(UsageError, "second holds a finished result .*pass --overwrite"):
            run(second)
        self.assertAllClose(run(dataclasses.replace(second, overwrite=True)), trained)

    def test_flags_map_onto_settings(self):
        from absl import flags

        from bert_tf import finetune

        argv = [
            "finetune",
            "--task=squad_v2",
            "--output_dir=/tmp/o",
            "--bert_config_file=bert_tiny",
            "--vocab_file=v.txt",
            "--nodo_lower_case",
            "--train_file=t.json",
            "--learning_rate=3e-5",
            "--num_train_epochs=2.5",
            "--null_score_diff_threshold=-1.5",
            "--strategy=mirrored",
        ]
        flag_values = flags.FlagValues()
        finetune.define_flags(flag_values)
        flag_values(argv)
        settings = finetune.settings_from_flags(flag_values)
        self.assertEqual(settings.task, "squad_v2")
        self.assertEqual(
            (settings.bert_config, settings.vocab_file, settings.lower_case), ("bert_tiny", "v.txt", False)
        )
        self.assertEqual((settings.learning_rate, settings.num_train_epochs), (3e-5, 2.5))
        # The task family's options: those the command line gives (the rest are the family's defaults).
        self.assertEqual(settings.options, {"null_score_diff_threshold": -1.5})
        self.assertEqual(families.make_family(settings, None).settings.max_seq_length, 384)
        self.assertEqual(settings.strategy, "mirrored")


if __name__ == "__main__":
    tf.test.main()
