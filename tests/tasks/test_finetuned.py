"""task.json (`FinetunedModelInfo`): round trips, old files, and the refusals."""

import json
import os
import tempfile

import numpy as np
import tensorflow as tf

from bert_tf.config import load_config
from bert_tf.errors import DamagedFileError
from bert_tf.models import BertEncoder
from bert_tf.serving.exporter import export_saved_model
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.finetuned import FORMAT_VERSION, TASK_FILE, FinetunedModelInfo, read_info, save_finetuned
from bert_tf.tasks.preprocessor import TaskPreprocessor
from bert_tf.tasks.registry import make_family
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.tasks.span.family import SpanFamily
from bert_tf.tokenization import BertTokenizer

# What save_finetuned wrote before task.json had a format_version (a SQuAD model).
OLD_SQUAD = {
    "task": "squad",
    "kind": "span",
    "label_list": None,
    "lower_case": True,
    "max_seq_length": 384,
    "max_query_length": 64,
}


class FinetunedModelInfoTest(tf.test.TestCase):
    def write(self, content) -> str:
        directory = tempfile.mkdtemp()
        with open(os.path.join(directory, TASK_FILE), "w") as handle:
            handle.write(content if isinstance(content, str) else json.dumps(content))
        return directory

    def test_round_trip_through_the_file(self):
        for info in (
            FinetunedModelInfo("mrpc", "classification", ["0", "1"], True, 128),
            FinetunedModelInfo(
                "classification", "classification", ["a", "b"], False, 64, {"text_b_column": "text_b"}
            ),
            FinetunedModelInfo(
                "squad_v2",
                "span",
                None,
                True,
                384,
                {"doc_stride": 5, "null_score_diff_threshold": -1.5},
                "span",
            ),
            FinetunedModelInfo("ner", "token", ["O", "B-PER", "I-PER"], False, 128),
        ):
            self.assertEqual(read_info(self.write(info.to_json())), info)

    def test_only_the_fields_of_the_kind_are_written(self):
        written = FinetunedModelInfo("sts-b", "regression", None, True, 128).to_json()
        self.assertEqual(
            written,
            {
                "task": "sts-b",
                "kind": "regression",
                "label_list": None,
                "lower_case": True,
                "max_seq_length": 128,
                "format_version": FORMAT_VERSION,
            },
        )
        # A span model's task.json holds its SQuAD settings, the defaults included.
        span = make_family(FinetuneSettings.of(task="squad", output_dir="-"), None).task_json_values()
        self.assertEqual(span["doc_stride"], 128)
        self.assertNotIn("text_b_column", span)

    def test_a_file_without_format_version_is_version_1_with_the_old_defaults(self):
        info = read_info(self.write(OLD_SQUAD))
        self.assertEqual(info.format_version, 1)
        self.assertEqual(info.kind, "span")
        self.assertIsNone(info.family)  # read by its kind
        settings = SpanFamily.squad_settings(info)
        self.assertEqual(
            (settings["doc_stride"], settings["max_answer_length"], settings["null_score_diff_threshold"]),
            (128, 30, 0.0),
        )

    def test_damaged_or_unknown_files_are_refused_with_the_path(self):
        cases = [
            ('{"task": "mrpc", "kind": ', "not valid JSON"),
            ("[1, 2]", "not a task description"),
            (
                {**OLD_SQUAD, "format_version": FORMAT_VERSION + 1},
                f"format_version {FORMAT_VERSION + 1}.*update bert_tf",
            ),
            ({**OLD_SQUAD, "format_version": "1"}, "format_version '1'"),
            ({**OLD_SQUAD, "kind": "summarization"}, "unknown kind 'summarization'.*save the model again"),
            ({key: value for key, value in OLD_SQUAD.items() if key != "lower_case"}, "no lower_case"),
            ({**OLD_SQUAD, "max_seq_length": "384"}, "max_seq_length='384'"),
            ({**OLD_SQUAD, "label_list": "O"}, "label_list='O'"),
        ]
        for content, message in cases:
            directory = self.write(content)
            with self.assertRaisesRegex(
                DamagedFileError, f"{directory}/{TASK_FILE} is truncated or corrupt.*{message}"
            ):
                read_info(directory)


class LabelsAndHeadTest(tf.test.TestCase):
    def test_a_classifier_whose_task_json_names_no_labels_or_too_few_is_refused_at_export(self):
        # Such a folder used to export, and the served graph then failed on its first request
        # (`indices[0] = 2 is not in [0, 1)`: a class id without a name).
        root = self.get_temp_dir()
        vocab = os.path.join(root, "vocab.txt")
        with open(vocab, "w") as handle:
            handle.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]) + "\n")
        config = load_config("bert_tiny").replace(
            vocab_size=7, hidden_size=16, intermediate_size=32, max_position_embeddings=16
        )
        model = BertClassifier(BertEncoder(config), num_classes=3)
        ids = np.ones((1, 8), np.int32)
        model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})
        tokenizer = BertTokenizer(vocab, lower_case=True)
        for name, labels, message in (
            ("none", None, "names no labels \\(label_list\\) for the model's 3 classes"),
            ("two", ["a", "b"], "names 2 labels \\(label_list\\) for the model's 3 classes"),
        ):
            model.preprocessor = TaskPreprocessor(
                FinetunedModelInfo("classification", "classification", labels, True, 8), tokenizer
            )
            directory = save_finetuned(os.path.join(root, f"model_{name}"), model)
            export_dir = os.path.join(root, f"export_{name}")
            with self.assertRaisesRegex(
                TaskDataError, f"{directory}/{TASK_FILE} {message}; .*label_list.*or fine-tune"
            ):
                export_saved_model("task", directory, export_dir)
            self.assertFalse(os.path.exists(export_dir))
            if labels is None:  # the same without the key at all (it used to fail with a TypeError)
                with open(os.path.join(directory, TASK_FILE)) as handle:
                    values = json.load(handle)
                del values["label_list"]
                with open(os.path.join(directory, TASK_FILE), "w") as handle:
                    json.dump(values, handle)
                with self.assertRaisesRegex(TaskDataError, f"{directory}/{TASK_FILE} {message}"):
                    export_saved_model("task", directory, export_dir)
