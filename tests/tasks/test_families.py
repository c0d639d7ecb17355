"""The task-family registry: every task the command line offers and every kind a saved
model can have resolves to one family, and the lookups agree with each other."""

import os
import tempfile

import tensorflow as tf
from absl import flags

from bert_tf import finetune
from bert_tf.tasks import families
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.kinds import TaskKind
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.tokenization import BertTokenizer

# What the runner, the saved-model folder and the Python task-model API call on a family.
PUBLIC = (
    "load",
    "dataset",
    "batches",
    "count",
    "predict",
    "evaluate",
    "build_model",
    "score",
    "write",
    "gather",
    "preprocessor",
    "signature",
    "record",
    "compile_args",
    "serving_preprocessor",
    "serving_signatures",
    "export_info",
    "task_json_values",
)


def cli_tasks() -> list[str]:
    """The --task choices of `python -m bert_tf.finetune`."""
    flag_values = flags.FlagValues()
    finetune.define_flags(flag_values)
    return list(flag_values["task"].parser.enum_values)


class RegistryTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp()
        vocab = os.path.join(cls.root, "vocab.txt")
        with open(vocab, "w") as handle:
            handle.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))
        cls.tokenizer = BertTokenizer(vocab)

    def test_every_cli_task_has_a_family_whose_instances_are_of_its_kinds(self):
        tasks = cli_tasks()
        self.assertContainsSubset(["mrpc", "stsb", "classification", "squad_v2", "ner", "swag"], tasks)
        for task in tasks:
            family = families.family_for_task(task)
            self.assertIn(task, family.tasks)
            # The kind a run of the task saves leads back to the same family.
            built = family(FinetuneSettings(task=task, output_dir=self.root), self.tokenizer)
            self.assertIn(built.kind, family.kinds, task)
            self.assertIs(families.family_for_kind(built.kind), family, task)
            for name in PUBLIC:
                self.assertTrue(callable(getattr(built, name, None)), f"{family.__name__}.{name}")
            if task in ("stsb", "regression"):
                self.assertEqual(built.kind, TaskKind.REGRESSION)

    def test_every_kind_has_one_family(self):
        for kind in TaskKind:
            family = families.family_for_kind(kind)
            self.assertIn(kind, family.kinds)
            self.assertIs(families.family_for_kind(kind.value), family)  # task.json's string
        owners = [kind for family in {families.family_for_kind(k) for k in TaskKind} for kind in family.kinds]
        self.assertCountEqual(owners, list(TaskKind))

    def test_names_are_read_in_any_case_and_with_glues_spellings(self):
        self.assertIs(families.family_for_task("MRPC"), families.ClassificationFamily)
        self.assertIs(families.family_for_task("STS-B"), families.ClassificationFamily)
        self.assertIs(families.family_for_task("Squad_V2"), families.SpanFamily)

    def test_an_unknown_task_names_every_known_one(self):
        with self.assertRaises(TaskDataError) as raised:
            families.family_for_task("imdb")
        message = str(raised.exception)
        self.assertStartsWith(message, "unknown task 'imdb'; use one of ")
        self.assertEqual(message.split("use one of ")[1].split(", "), cli_tasks())
        with self.assertRaisesRegex(ValueError, "unknown task kind 'ranking'; use one of classification, "):
            families.family_for_kind("ranking")

    def test_a_family_cannot_take_a_name_or_kind_another_holds(self):
        class Again(families.TaskFamily):
            kinds = (TaskKind.SPAN,)
            tasks = ("squad_v3",)

        with self.assertRaisesRegex(ValueError, "Again needs task names and kinds of its own.*span"):
            families.register(Again)
        self.assertNotIn("squad_v3", families.TASKS)
