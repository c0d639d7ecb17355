"""Every `>>>` example in the package's docstrings runs and prints what it says.

One test per module that has examples, so a failure names the module. Only modules whose source
holds `>>>` are imported: importing every command-line program in one process would define
their absl flags twice. A line that cannot run here (it needs a downloaded checkpoint or runs for
minutes) is marked `# doctest: +SKIP` in its docstring.
"""

import contextlib
import doctest
import importlib
import pathlib

import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("bert_tf", "pipelines")


def modules_with_examples() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>>" not in path.read_text(encoding="utf-8"):
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def run_examples(test: tf.test.TestCase, module_name: str) -> None:
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    reports, examples = [], 0
    # Examples name files by their path in the checkout (tests/fixtures/...), as a reader would.
    with contextlib.chdir(ROOT):
        for docstring_test in finder.find(module, module_name):
            examples += len(docstring_test.examples)
            runner.run(docstring_test, out=reports.append)
    test.assertGreater(examples, 0, f"{module_name} has `>>>` in its source but no docstring example")
    test.assertEqual(runner.failures, 0, "".join(reports))


class DocstringExamplesTest(tf.test.TestCase):
    def test_every_package_module_with_examples_is_collected(self):
        names = modules_with_examples()
        # Guards the walk itself: these hold examples today, in both packages and in subpackages.
        self.assertContainsSubset(
            {"bert_tf.config", "bert_tf.tasks.registry", "bert_tf.models.encoder", "pipelines.masking"}, names
        )


def _add_test(module_name: str) -> None:
    def test(self):
        run_examples(self, module_name)

    setattr(DocstringExamplesTest, "test_" + module_name.replace(".", "_"), test)


for _name in modules_with_examples():
    _add_test(_name)
