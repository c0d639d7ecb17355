"""The programs' shared command-line conventions: flag names, old names, --helpshort,
--verbosity, --flagfile, the cache folder and the console entry points."""

import ast
import contextlib
import importlib
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from unittest import mock

import pytest
import tensorflow as tf
from absl import flags

from bert_tf import cli
from bert_tf.backend import backend_from_argv, select_backend
from bert_tf.cache import cache_dir
from bert_tf.errors import UsageError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every command-line module and a flag it must offer. Several share names
# (--init_checkpoint, --vocab_file, --input_file, ...), so none may define flags on import.
COMMANDS = {
    "bert_tf.pretrain": "train_batch_size",
    "bert_tf.finetune": "task",
    "bert_tf.export": "kind",
    "bert_tf.extract_features": "layers",
    "bert_tf.fill_mask": "top_k",
    "pipelines.create_pretraining_data": "dupe_factor",
    "pipelines.build_vocab": "vocab_size",
    "pipelines.data_service": "dispatcher_port",
    "bert_tf.plot": "metrics",
}


def program_flags(module: str) -> dict[str, flags.Flag]:
    """The flags `module` defines, its old names left out."""
    flag_values = flags.FlagValues()
    importlib.import_module(module).define_flags(flag_values)
    return {
        name: flag_values[name] for name in flag_values if not getattr(flag_values[name], "renamed_to", None)
    }


def run_python(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(PYTHONPATH=REPO, **(env or {}))
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


class CommandFlagsTest(tf.test.TestCase):
    def test_commands_import_side_by_side_and_define_their_own_flags(self):
        modules = {name: importlib.import_module(name) for name in COMMANDS}
        for name, flag in COMMANDS.items():
            with self.subTest(command=name):
                self.assertNotIn(flag, flags.FLAGS)  # nothing defined at import
                flag_values = flags.FlagValues()
                modules[name].define_flags(flag_values)
                self.assertIn(flag, flag_values)

    def test_strategy_flags_are_shared(self):
        required = {"bert_tf.pretrain": [], "bert_tf.finetune": ["--task=sst2", "--output_dir=/tmp/o"]}
        for name, argv in required.items():
            flag_values = flags.FlagValues()
            importlib.import_module(name).define_flags(flag_values)
            flag_values(["prog", "--tpu=my-tpu", "--strategy=tpu", *argv])
            self.assertEqual(
                (flag_values.tpu, flag_values.strategy, flag_values.num_gpus), ("my-tpu", "tpu", 0)
            )


class FlagNamesTest(tf.test.TestCase):
    # A renamed flag: (program, the required flags, the old spelling, the new name, its value).
    RENAMED = [
        ("bert_tf.export", ["--kind=encoder", "--init_checkpoint=c", "--export_dir=e"], "--seq_length=32",
         "max_seq_length", 32),
        ("pipelines.build_vocab", ["--input_file=i", "--output_file=o"], "--nolower_case", "do_lower_case", False),
        ("pipelines.build_vocab", ["--input_file=i", "--output_file=o"], "--lower_case", "do_lower_case", True),
        ("bert_tf.pretrain", [], "--whole_word_mask", "do_whole_word_mask", True),
    ]  # fmt: skip

    def test_the_same_setting_has_the_same_flag_name_in_every_program(self):
        for module in COMMANDS:
            names = set(program_flags(module))
            with self.subTest(program=module):
                self.assertFalse(names & {"lower_case", "seq_length", "whole_word_mask"})

    def test_old_names_still_work_and_say_the_new_one(self):
        def notes(module: str, args: list[str]) -> tuple[object, list[str]]:
            flag_values = flags.FlagValues()
            importlib.import_module(module).define_flags(flag_values)
            flag_values(["prog", *args])
            with contextlib.redirect_stderr(stderr := io.StringIO()):
                cli.note_old_flag_names(flag_values)
            return flag_values[new].value, stderr.getvalue().splitlines()

        for module, required, old, new, value in self.RENAMED:
            with self.subTest(program=module, flag=old):
                old_name = re.match(r"--(?:no)?(\w+)", old).group(1)
                self.assertEqual(
                    notes(module, [*required, old]),
                    (value, [f"{cli._program_name()}: note: --{old_name} is now --{new}; the old name works until "
                             "the next release"]),
                )  # fmt: skip
                self.assertEqual(notes(module, [*required, f"--{new}={value}"]), (value, []))

    def test_an_old_name_on_the_command_line(self):
        result = run_python(
            "import runpy; runpy.run_module('bert_tf.export', run_name='__main__', alter_sys=True)",
            "--kind=encoder", "--init_checkpoint=c", "--export_dir=e", "--seq_length=0",
        )  # fmt: skip
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(
            result.stderr.splitlines(),
            [
                "bert_tf.export: note: --seq_length is now --max_seq_length; the old name works until the next release",
                "bert_tf.export: error: --max_seq_length must be a positive integer, got 0",
            ],
        )


class HelpShortTest(tf.test.TestCase):
    def test_helpshort_lists_the_programs_flags_only(self):
        # bert_tf.pretrain imports TensorFlow to define its flags, and TensorFlow defines
        # flags of its own on import (--hbm_oom_exit, absl's --test_srcdir, ...).
        # TensorFlow's start-up logging left on, so that a quiet stderr means something.
        environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
        result = subprocess.run(
            [sys.executable, "-m", "bert_tf.pretrain", "--helpshort"],
            cwd=REPO, env={**environment, "PYTHONPATH": REPO}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr.strip(), "")
        listed = set(re.findall(r"^  --(?:\[no\])?(\w+)", result.stdout, re.MULTILINE))
        self.assertEqual(listed, set(program_flags("bert_tf.pretrain")) | {"verbose"})


VERBOSITY_SCRIPT = """
import logging, sys
from absl import logging as absl_logging
from bert_tf import cli

def main(flag_values, args):
    absl_logging.info("absl info line")
    logging.getLogger("bert_tf.example").info("library info line")
    logging.getLogger("bert_tf.example").debug("library debug line")

cli.run(main, lambda flag_values: None, argv=["prog", *sys.argv[1:]])
"""


class VerbosityTest(tf.test.TestCase):
    def test_verbosity_sets_the_log_level(self):
        cases = {
            (): ["library info line"],  # the default: the library's INFO, not absl's (TensorFlow's)
            ("--verbosity=1",): ["absl info line", "library info line", "library debug line"],
            ("--verbosity=0",): ["absl info line", "library info line"],
            ("-v", "-1"): [],
        }
        for args, shown in cases.items():
            with self.subTest(args=args):
                # TF_CPP_MIN_LOG_LEVEL=0: no quiet start, so no TensorFlow import to wait for.
                result = run_python(VERBOSITY_SCRIPT, *args, env={"TF_CPP_MIN_LOG_LEVEL": "0"})
                self.assertEqual(result.returncode, 0, result.stderr)
                said = [line for line in ("absl info line", "library info line", "library debug line")
                        if line in result.stderr]  # fmt: skip
                self.assertEqual(said, shown, result.stderr)


READER_ERROR_SCRIPT = """
import sys
import time
from bert_tf import cli
from bert_tf.tasks.features import TaskDataError

def read(index):
    if index == 0:
        raise TaskDataError("data.csv line 3: the second text is empty; remove the row or fill it in")
    time.sleep(2)  # the next rows: still being read when the error ends the program
    return index

def main(flag_values, args):
    import tensorflow as tf  # after cli.run's quiet start, as the programs import it

    def parse(index):
        return tf.numpy_function(read, [index], tf.int64)

    for _ in tf.data.Dataset.range(100).map(parse, num_parallel_calls=2):
        pass

cli.run(main, lambda flag_values: None, argv=["prog", *sys.argv[1:]])
"""


class ReaderErrorTest(tf.test.TestCase):
    def test_a_data_error_raised_inside_tf_data_is_one_line(self):
        """A reader's refusal of a row, raised in a tf.data pipeline while a program runs,
        reaches the user as its own line and exit status, not TensorFlow's error text; and the
        program ends, though the pipeline is still reading its next rows in Python (the
        interpreter's shutdown waited for them for ever, and they for its lock)."""
        started = time.monotonic()
        result = run_python(READER_ERROR_SCRIPT)
        self.assertLess(time.monotonic() - started, 120)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertLen(lines, 1, result.stderr)
        self.assertEndsWith(
            lines[0], ": error: data.csv line 3: the second text is empty; remove the row or fill it in"
        )


BACKEND_SCRIPT = """
import sys
from bert_tf import cli, pretrain

def main(flag_values, args):
    import keras
    cli.result(f"backend {keras.backend.backend()} {flag_values.backend}")

pretrain.main = main
sys.argv = ["bert-tf-pretrain", *sys.argv[1:]]
pretrain.command()
"""


class BackendTest(tf.test.TestCase):
    def test_flagfile_selects_the_backend(self):
        flagfile = os.path.join(self.get_temp_dir(), "jax.flags")
        with open(flagfile, "w") as file:
            file.write("--backend=jax\n--num_train_steps=10\n")
        self.assertEqual(backend_from_argv(["prog", f"--flagfile={flagfile}"]), {"KERAS_BACKEND": "jax"})
        # The last one wins, as when the flags are parsed.
        self.assertEqual(
            backend_from_argv(["prog", f"--flagfile={flagfile}", "--backend", "tensorflow"]),
            {"KERAS_BACKEND": "tensorflow"},
        )
        environment = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
        with mock.patch.dict(os.environ, environment, clear=True):
            result = run_python(BACKEND_SCRIPT, f"--flagfile={flagfile}")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(result.stdout.strip().splitlines()[-1], "backend jax jax")

    def test_a_missing_jax_names_the_extra(self):
        with mock.patch.dict(os.environ), mock.patch.object(importlib.util, "find_spec", return_value=None):
            with self.assertRaisesRegex(UsageError, re.escape('pip install "bert_tf[jax]"')):
                select_backend(["prog", "--backend=jax"])
            select_backend(["prog", "--backend=tensorflow"])  # TensorFlow needs no JAX


class CacheDirTest(tf.test.TestCase):
    def test_bert_tf_cache_then_xdg_cache_home_then_home(self):
        root = tempfile.mkdtemp(dir=self.get_temp_dir())
        home, xdg, own = (os.path.join(root, name) for name in ("home", "xdg", "own"))
        cases = [
            ({"HOME": home, "XDG_CACHE_HOME": xdg, "BERT_TF_CACHE": own}, own),
            ({"HOME": home, "XDG_CACHE_HOME": xdg, "BERT_TF_CACHE": ""}, os.path.join(xdg, "bert_tf")),
            ({"HOME": home, "XDG_CACHE_HOME": ""}, os.path.join(home, ".cache", "bert_tf")),
        ]
        for variables, expected in cases:
            with self.subTest(variables=variables), mock.patch.dict(os.environ, variables):
                if "BERT_TF_CACHE" not in variables:
                    os.environ.pop("BERT_TF_CACHE", None)
                self.assertEqual(str(cache_dir()), expected)
                self.assertTrue(os.path.isdir(expected))


class EntryPointsTest(tf.test.TestCase):
    @staticmethod
    def console_scripts() -> dict[str, str]:
        with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as file:
            tree = ast.parse(file.read())
        setup = next(
            node for node in ast.walk(tree) if isinstance(node, ast.Call) and node.func.id == "setup"
        )
        entry_points = ast.literal_eval(next(k.value for k in setup.keywords if k.arg == "entry_points"))
        return dict(line.replace(" ", "").split("=") for line in entry_points["console_scripts"])

    def test_every_program_has_a_command(self):
        scripts = self.console_scripts()
        self.assertCountEqual([target.split(":")[0] for target in scripts.values()], COMMANDS)
        for script, target in scripts.items():
            with self.subTest(script=script):
                module, function = target.split(":")
                self.assertEqual(script, "bert-tf-" + module.split(".")[-1].replace("_", "-"))
                self.assertTrue(callable(getattr(importlib.import_module(module), function)))

    def test_a_command_runs(self):
        result = run_python(
            "import sys; from bert_tf.export import command; sys.argv = ['bert-tf-export', '--helpshort']; command()"
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(
            "--kind: What to export: preprocessor, encoder, mlm, task, huggingface, google, tflite, "
            "keras_hub, or an export kind a task family adds",
            " ".join(result.stdout.split()),
        )


class OutputNamedTest(tf.test.TestCase):
    """A run names its output first (on stderr, with its progress) and last (on stdout, with
    its results alone); the export and the data generation are checked in their own tests."""

    @pytest.mark.slow  # a minute on a loaded 2-core machine; the export and data generation are checked by default
    def test_finetune(self):
        from tests.harness.data import write_one_word_task as write_task
        from tests.harness.processes import finetune_command

        root = self.get_temp_dir()
        output_dir = os.path.join(root, "run")
        command = finetune_command(write_task(root, n_train=8, n_eval=4), output_dir)
        command = [arg for arg in command if not arg.startswith("--num_train_epochs")] + [
            "--num_train_epochs=1"
        ]
        env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
        result = subprocess.run(
            command, cwd=REPO, env={**env, "PYTHONPATH": REPO}, capture_output=True, text=True
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(result.stderr.splitlines()[0], f"output_dir: {output_dir}")
        *scores, last = result.stdout.splitlines()
        self.assertEqual(last, f"the run is in {output_dir}")
        self.assertIn("eval_loss", [line.split(" = ")[0] for line in scores])

    def test_build_vocab(self):
        corpus, output = (os.path.join(self.get_temp_dir(), name) for name in ("corpus.txt", "vocab.txt"))
        with open(corpus, "w") as file:
            file.write("the cat sat on the mat\nthe dog sat on the log\n" * 50)
        result = run_python(
            "import runpy; runpy.run_module('pipelines.build_vocab', run_name='__main__', alter_sys=True)",
            f"--input_file={corpus}", f"--output_file={output}", "--vocab_size=60",
        )  # fmt: skip
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(result.stderr.splitlines()[0], f"output_file: {output}")
        self.assertEqual(result.stdout, f"wrote {output}\n")
        self.assertTrue(os.path.exists(output))


if __name__ == "__main__":
    tf.test.main()
