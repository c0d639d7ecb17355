"""GLUE TSV layouts, TFDS glue/* (mocked, offline) and submission files."""

import os

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from bert_tf.tasks import tfds_sources
from bert_tf.tasks.classification import glue
from bert_tf.tasks.features import TaskDataError


def write(directory, name, rows):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write("\t".join(row) + "\n")
    return path


class GlueTsvTest(tf.test.TestCase):
    def test_cola_train_has_no_header_and_test_has_one(self):
        d = self.get_temp_dir()
        train = write(
            d,
            "train.tsv",
            [
                ["gj04", "1", "", "Our friends won't buy this analysis."],
                ["gj04", "0", "*", "They drank the pub."],
            ],
        )
        test = write(d, "test.tsv", [["index", "sentence"], ["0", "Bill whistled past the house."]])
        examples = glue.read_examples("cola", train)
        self.assertLen(examples, 2)
        self.assertEqual((examples[1].text_a, examples[1].label), ("They drank the pub.", "0"))
        self.assertEqual(examples[0].guid, "train.tsv line 1")
        test_examples = glue.read_examples("CoLA", test, labelled=False)
        self.assertEqual(
            [(e.guid, e.text_a, e.label) for e in test_examples],
            [("0", "Bill whistled past the house.", None)],
        )

    def test_pair_tasks_columns(self):
        d = self.get_temp_dir()
        mrpc = write(
            d,
            "mrpc.tsv",
            [
                ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                ["1", "702876", "702977", "He said.", "He says."],
            ],
        )
        [example] = glue.read_examples("mrpc", mrpc)
        self.assertEqual((example.text_a, example.text_b, example.label), ("He said.", "He says.", "1"))

        header = [
            "index",
            "genre",
            "filename",
            "year",
            "old_index",
            "source1",
            "source2",
            "sentence1",
            "sentence2",
            "score",
        ]
        stsb = write(
            d, "stsb.tsv", [header, ["0", "g", "f", "2012", "1", "s", "s", "A man.", "A guy.", "4.2"]]
        )
        [example] = glue.read_examples("sts-b", stsb)
        self.assertEqual((example.text_a, example.text_b, example.label), ("A man.", "A guy.", "4.2"))

        mnli_header = [
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
            "label1",
            "gold_label",
        ]
        mnli = write(
            d,
            "dev_matched.tsv",
            [mnli_header, ["0", "1", "2", "g", "", "", "", "", "P.", "H.", "neutral", "entailment"]],
        )
        [example] = glue.read_examples("mnli", mnli)
        self.assertEqual((example.text_a, example.text_b, example.label), ("P.", "H.", "entailment"))

        qqp = write(
            d,
            "qqp.tsv",
            [
                ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                ["5", "1", "2", "Why?", "How?", "0"],
                ["6", "broken row"],
            ],
        )
        examples = glue.read_examples("qqp", qqp)  # QQP's broken rows are skipped
        self.assertEqual([(e.text_a, e.text_b, e.label) for e in examples], [("Why?", "How?", "0")])

        for task in ("qnli", "rte", "wnli"):
            path = write(d, f"{task}.tsv", [["index", "a", "b", "label"], ["3", "Q?", "S.", "x"]])
            [example] = glue.read_examples(task, path)
            self.assertEqual((example.text_a, example.text_b, example.label), ("Q?", "S.", "x"))

        sst = write(d, "sst.tsv", [["sentence", "label"], ["a gem ", "1"]])
        self.assertEqual(glue.read_examples("sst2", sst)[0].text_a, "a gem ")

    def test_short_row_is_an_error_with_its_line(self):
        path = write(self.get_temp_dir(), "rte.tsv", [["index", "a", "b", "label"], ["0", "only two"]])
        with self.assertRaisesRegex(TaskDataError, "rte.tsv line 2: 2 columns"):
            glue.read_examples("rte", path)

    def test_unknown_task(self):
        with self.assertRaisesRegex(TaskDataError, "unknown GLUE task 'mrcp'.*mrpc"):
            glue.get_task("mrcp")

    def test_split_files(self):
        files = glue.split_files("mnli", "/data/MNLI")
        self.assertEqual(files["dev_mismatched"], "/data/MNLI/dev_mismatched.tsv")
        self.assertIn("test_matched", files)

    def test_submission_format(self):
        path = os.path.join(self.get_temp_dir(), "RTE.tsv")
        examples = [glue.InputExample("7", "a", "b"), glue.InputExample("9", "c", "d")]
        glue.write_submission(path, "rte", examples, np.array([1, 0]))
        with open(path) as handle:
            self.assertEqual(handle.read(), "index\tprediction\n7\tnot_entailment\n9\tentailment\n")
        glue.write_submission(path, "stsb", examples, np.array([5.7, 2.25]))
        with open(path) as handle:
            self.assertEqual(handle.read(), "index\tprediction\n7\t5.000\n9\t2.250\n")


class GlueTfdsTest(tf.test.TestCase):
    def test_mocked_tfds_splits_become_examples(self):
        with tfds.testing.mock_data(num_examples=5):
            mrpc = glue.tfds_examples("mrpc", "train")
            self.assertLen(mrpc, 5)
            self.assertIn(mrpc[0].label, ("0", "1"))
            self.assertIsNotNone(mrpc[0].text_b)
            mnli = glue.tfds_examples("mnli", "validation_mismatched")
            self.assertIn(mnli[0].label, glue.GLUE_TASKS["mnli"].label_list)
            stsb = glue.tfds_examples("stsb", "train")
            float(stsb[0].label)
            cola = glue.tfds_examples("cola", "train")
            self.assertIsNone(cola[0].text_b)

    def test_unknown_names_list_close_ones(self):
        with self.assertRaisesRegex(TaskDataError, "no TFDS dataset named 'gleu'.*glue"):
            tfds_sources.check_tfds_name("gleu/mrpc")
        with self.assertRaisesRegex(TaskDataError, "no config 'mrcp'.*glue/mrpc"):
            tfds_sources.check_tfds_name("glue/mrcp")


if __name__ == "__main__":
    tf.test.main()
