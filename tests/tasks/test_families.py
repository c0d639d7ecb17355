"""The task-family registry: every task the command line offers and every kind a saved
model can have resolves to one family, the lookups agree with each other, and a family
named by its import path (MODULE:CLASS) is found, or refused in one line that says why."""

import dataclasses
import os
import sys
import tempfile

import tensorflow as tf
from absl import flags

from bert_tf import finetune
from bert_tf.cli import setting
from bert_tf.errors import UsageError
from bert_tf.tasks import registry
from bert_tf.tasks.family import TaskFamily
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
    "task_info",
)


def cli_flags() -> flags.FlagValues:
    """The flags of `python -m bert_tf.finetune`."""
    flag_values = flags.FlagValues()
    finetune.define_flags(flag_values)
    return flag_values


class RegistryTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp()
        vocab = os.path.join(cls.root, "vocab.txt")
        with open(vocab, "w") as handle:
            handle.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))
        cls.tokenizer = BertTokenizer(vocab)

    def test_every_task_has_a_family_whose_instances_are_of_its_kinds(self):
        tasks = registry.tasks()
        self.assertContainsSubset(["mrpc", "stsb", "classification", "squad_v2", "ner", "swag"], tasks)
        for task in tasks:
            family = registry.family_for_task(task)
            self.assertIn(task, family.tasks)
            # The kind a run of the task saves leads back to the same family, as does its name.
            built = family(FinetuneSettings.of(task=task, output_dir=self.root), self.tokenizer)
            self.assertIn(built.kind, family.kinds, task)
            self.assertIs(registry.family_for_kind(built.kind), family, task)
            self.assertIs(registry.family_named(built.task_info().family), family, task)
            for name in PUBLIC:
                self.assertTrue(callable(getattr(built, name, None)), f"{family.__name__}.{name}")
            if task in ("stsb", "regression"):
                self.assertEqual(built.kind, "regression")

    def test_every_kind_has_one_family_and_every_option_a_flag(self):
        kinds = [kind for family in registry.families() for kind in family.kinds]
        self.assertEqual(len(kinds), len(set(kinds)))
        self.assertContainsSubset(
            ["classification", "regression", "multi_label", "span", "token", "multiple_choice"], kinds
        )
        flag_values = cli_flags()
        for family in registry.families():
            for field in dataclasses.fields(family.Options):
                self.assertIn(field.name, flag_values, family.__name__)
                self.assertIsNone(flag_values[field.name].default)  # the family's own default applies

    def test_names_are_read_in_any_case_and_with_glues_spellings(self):
        self.assertEqual(registry.family_for_task("MRPC").name, "classification")
        self.assertEqual(registry.family_for_task("STS-B").name, "classification")
        self.assertEqual(registry.family_for_task("Squad_V2").name, "span")

    def test_an_unknown_task_names_every_known_one(self):
        with self.assertRaises(UsageError) as raised:
            registry.family_for_task("imdb")
        message = str(raised.exception)
        self.assertStartsWith(message, "unknown task 'imdb'; use one of ")
        listed = message.split("use one of ")[1].split(" or MODULE:CLASS")[0].split(", ")
        self.assertEqual(listed, list(registry.tasks()))
        with self.assertRaisesRegex(UsageError, "unknown task kind 'ranking'; use one of classification, "):
            registry.family_for_kind("ranking")

    def test_a_family_cannot_take_a_name_or_kind_another_holds(self):
        class Again(TaskFamily):
            kinds = ("span",)
            tasks = ("squad_v3",)

        with self.assertRaisesRegex(UsageError, "Again needs task names and kinds of its own.*span"):
            registry.register(Again)
        self.assertNotIn("squad_v3", registry.tasks())

    def test_options_of_another_family_are_refused_with_its_own_listed(self):
        with self.assertRaisesRegex(
            UsageError,
            r"--max_query_length is not an option of the classification family's tasks .*--doc_stride",
        ):
            registry.make_family(
                FinetuneSettings.of(task="mrpc", output_dir=self.root, options={"max_query_length": 32}),
                self.tokenizer,
            )


@dataclasses.dataclass(frozen=True)
class ClashingOptions:
    learning_rate: float = setting(1.0, "Clashes with the shared --learning_rate.")


class Clashing(TaskFamily):
    tasks = ("clashing_task",)
    kinds = ("clashing",)
    Options = ClashingOptions


class NotAFamily:
    pass


class ImportPathTest(tf.test.TestCase):
    def test_what_cannot_be_a_family_is_one_line_naming_the_fix(self):
        here = __name__
        cases = {
            "no_such_module_anywhere:Family": "no module named 'no_such_module_anywhere'; install it, or put its folder on PYTHONPATH",
            f"{here}:Missing": f"module {here} has no 'Missing'",
            f"{here}:NotAFamily": "NotAFamily is not a task family (a subclass of bert_tf.tasks.family.TaskFamily)",
            f"{here}:Clashing": "its option 'learning_rate' clashes with the shared setting --learning_rate; rename the option",
            "just_a_name_without_a_colon": "unknown task",
        }
        for reference, message in cases.items():
            with self.subTest(reference=reference):
                with self.assertRaises(UsageError) as raised:
                    registry.family_for_task(reference)
                self.assertIn(message, str(raised.exception))
                self.assertNotIn("\n", str(raised.exception))
        self.assertNotIn("clashing_task", registry.tasks())
        self.assertIn(here, sys.modules)


if __name__ == "__main__":
    tf.test.main()
