"""The import graph of bert_tf and pipelines: every module imports, there is no cycle, and
dependencies point one way (tokenizer -> pipelines -> models -> checkpoints -> training /
tasks -> serving -> command-line programs).

Imports are read with `ast`, those inside functions and under `if TYPE_CHECKING:` included
(an import deferred into a function is still a dependency, and a type-only one still couples
two modules). The built-in task families are found by the registry from its list of import
paths, as a family of a user's is: no module outside a family's package tests a family's
task name or kind.
"""

import ast
import json
import os
import subprocess
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("bert_tf", "pipelines")

# (modules, modules they must not import): a prefix covers the package and everything in it.
LAYERS = [
    (
        ("bert_tf.basic_tokenizer", "bert_tf.tokenization", "pipelines"),
        ("bert_tf.models", "bert_tf.checkpoints", "bert_tf.training", "bert_tf.tasks", "bert_tf.serving"),
    ),
    (
        ("bert_tf.layers", "bert_tf.models"),
        ("bert_tf.checkpoints", "bert_tf.training", "bert_tf.tasks", "bert_tf.serving"),
    ),
    (("bert_tf.checkpoints",), ("bert_tf.training", "bert_tf.tasks", "bert_tf.serving")),
    (("bert_tf.serving",), ("bert_tf.tasks.runner",)),
]
# The thin command-line modules (pipelines.build_vocab is also the library's build_vocab()).
PROGRAMS = (
    "bert_tf.pretrain",
    "bert_tf.finetune",
    "bert_tf.export",
    "bert_tf.fill_mask",
    "bert_tf.extract_features",
    "pipelines.create_pretraining_data",
)


def _modules() -> dict[str, str]:
    """Module name -> file path, for every module of PACKAGES."""
    found = {}
    for package in PACKAGES:
        for directory, subdirectories, files in os.walk(os.path.join(ROOT, package)):
            subdirectories[:] = [name for name in subdirectories if name != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    module = os.path.relpath(path, ROOT)[: -len(".py")].replace(os.sep, ".")
                    found[module.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _project_module(name: str) -> str | None:
    """The longest prefix of `name` that is a module of ours (a name imported from a module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {found for alias in node.names if (found := _project_module(alias.name))}
    base = node.module or ""
    if node.level:  # relative: from the package of `module`
        parts = module.split(".")
        if not MODULES[module].endswith("__init__.py"):
            parts = parts[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    if base.split(".")[0] not in PACKAGES:
        return set()
    return {found for alias in node.names if (found := _project_module(f"{base}.{alias.name}"))}


def _graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (module level and inside functions)."""
    graph = {}
    for module, path in MODULES.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        edges: set[str] = set()

        def visit(node):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Import | ast.ImportFrom):
                    edges.update(_imported(module, child))  # noqa: B023 (visit runs at once)
                visit(child)

        visit(tree)
        edges.discard(module)
        graph[module] = edges
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path [a, b, ..., a], or None."""
    done, on_path, path = set(), set(), []

    def search(module):
        path.append(module)
        on_path.add(module)
        for target in sorted(graph[module]):
            if target in on_path:
                return [*path[path.index(target) :], target]
            if target not in done and (cycle := search(target)):
                return cycle
        on_path.discard(module)
        done.add(module)
        path.pop()
        return None

    for module in sorted(graph):
        if module not in done and (cycle := search(module)):
            return cycle
    return None


def _within(module: str, prefixes) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


# Apache Beam is an extra ("bert_tf[beam]"): only these modules import it at module level;
# the rest of the project, the one-process programs included, imports them (and Beam) only
# inside the functions that run a Beam pipeline.
BEAM_MODULES = (
    "pipelines.beam.files",
    "pipelines.beam.generate",
    "pipelines.beam.runner",
    "pipelines.beam.vocab",
)


def _module_level_imports(path: str) -> set[str]:
    """Every name imported by a module outside function bodies (absolute, as written)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    names = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(child, ast.Import):
                names.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and not child.level:
                names.update(f"{child.module}.{alias.name}" for alias in child.names)
                names.add(child.module)
            visit(child)

    visit(tree)
    return names


class ImportGraphTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.graph = _graph()

    def test_every_module_imports(self):
        script = (
            "import importlib, json, sys\n"
            "failed = {}\n"
            "for name in json.loads(sys.argv[1]):\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception as error:\n"
            "        failed[name] = repr(error)\n"
            "print(json.dumps(failed))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", script, json.dumps(sorted(MODULES))],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(json.loads(result.stdout.strip().splitlines()[-1]), {})

    def test_graph_is_read(self):
        # The parser does see imports, at module level and inside functions.
        self.assertIn("bert_tf.config", self.graph["bert_tf.models.encoder"])
        self.assertIn("bert_tf.serving.exporter", self.graph["bert_tf.export"])  # a lazy one

    def test_no_import_cycle(self):
        cycle = _find_cycle(self.graph)
        self.assertIsNone(cycle, "import cycle: " + " -> ".join(cycle or []))

    def test_lower_layers_do_not_import_higher_ones(self):
        wrong = [
            f"{module} imports {target}"
            for modules, forbidden in LAYERS
            for module, targets in sorted(self.graph.items())
            if _within(module, modules)
            for target in sorted(targets)
            if _within(target, forbidden)
        ]
        self.assertEqual(wrong, [])

    def test_beam_is_imported_only_by_the_beam_modules_or_lazily(self):
        self.assertIn("apache_beam", _module_level_imports(MODULES["pipelines.beam.runner"]))  # it sees them
        wrong = [
            f"{module} imports {name} at module level"
            for module, path in sorted(MODULES.items())
            if module not in BEAM_MODULES
            for name in sorted(_module_level_imports(path))
            if name.split(".")[0] == "apache_beam" or _within(name, BEAM_MODULES)
        ]
        self.assertEqual(wrong, [])

    def test_the_library_does_not_import_the_programs(self):
        wrong = [
            f"{module} imports {target}"
            for module, targets in sorted(self.graph.items())
            for target in sorted(targets & set(PROGRAMS))
        ]
        self.assertEqual(wrong, [])

    def test_no_family_is_named_outside_its_package(self):
        # What the families are called (their tasks, aliases and kinds) is compared or tested
        # only inside their packages: the driver, the saved folder, the Keras models and the
        # exports ask the family instead.
        from bert_tf.tasks import registry

        names = {
            name.lower()
            for family in registry.families()
            for name in (*family.tasks, *family.aliases, *family.kinds)
        }
        self.assertEqual(
            _family_tests('if info.kind == "span" or task.startswith("squad"): pass', names), [1, 1]
        )
        wrong = [
            f"{module}: {len(found)} test(s) of a family's name"
            for module, path in sorted(MODULES.items())
            if not _within(module, FAMILY_PACKAGES)
            for found in [_family_tests(open(path, encoding="utf-8").read(), names)]
            if found
        ]
        self.assertEqual(wrong, [])


def _built_in_packages() -> tuple[str, ...]:
    """The built-in families' packages, from the registry's list (`MODULE:CLASS`, the module
    `bert_tf.tasks.<package>.family`): a new built-in family is one line there."""
    from bert_tf.tasks.registry import BUILT_IN

    return tuple(reference.partition(":")[0].rpartition(".")[0] for reference in BUILT_IN)


FAMILY_PACKAGES = _built_in_packages()


def _family_tests(source: str, names: set[str]) -> list[int]:
    """The lines of `source` that compare with, or test a prefix of, one of `names`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        tested = isinstance(node, ast.Compare) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
        )
        if tested and any(
            isinstance(leaf, ast.Constant) and isinstance(leaf.value, str) and leaf.value.lower() in names
            for leaf in ast.walk(node)
        ):
            lines.append(node.lineno)
    return lines


if __name__ == "__main__":
    tf.test.main()
