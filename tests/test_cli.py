"""Flags generated from the settings dataclasses, and the settings' own checks."""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys

import tensorflow as tf
from absl import flags

from bert_tf import cli
from bert_tf.errors import BertTfError, UsageError
from bert_tf.serving.settings import ExportSettings, FeatureSettings, FillMaskSettings
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.training.settings import PretrainingConfig
from pipelines.build_vocab import VocabSettings
from pipelines.data_service import DataServiceConfig
from pipelines.settings import GenerationConfig

# Program -> its settings dataclass.
PROGRAMS = {
    "bert_tf.pretrain": PretrainingConfig,
    "bert_tf.finetune": FinetuneSettings,
    "bert_tf.export": ExportSettings,
    "bert_tf.extract_features": FeatureSettings,
    "bert_tf.fill_mask": FillMaskSettings,
    "pipelines.create_pretraining_data": GenerationConfig,
    "pipelines.build_vocab": VocabSettings,
    "pipelines.data_service": DataServiceConfig,
}


class SettingsFlagsTest(tf.test.TestCase):
    def test_every_field_is_a_flag_with_help_and_the_field_default(self):
        for module, settings_class in PROGRAMS.items():
            flag_values = flags.FlagValues()
            importlib.import_module(module).define_flags(flag_values)
            for field in cli.settings_fields(settings_class):
                with self.subTest(program=module, field=field.name):
                    flag = flag_values[cli.flag_name(field)]
                    self.assertTrue(flag.help, "no help text in the field's metadata")
                    if field.default is not dataclasses.MISSING:
                        default = (
                            list(map(str, field.default))
                            if isinstance(field.default, tuple)
                            else field.default
                        )
                        self.assertEqual(flag.default, default)

    def test_a_new_field_becomes_a_flag(self):
        @dataclasses.dataclass
        class Settings:
            path: str = dataclasses.field(metadata={"help": "A path."})
            rate: float = cli.setting(0.5, "A rate.")
            steps: int | None = cli.setting(None, "Steps.", flag="num_steps")
            kind: str = cli.setting("a", "A kind.", choices=("a", "b"))
            hidden: bool = cli.setting(True, "", flag=None)

        flag_values = flags.FlagValues()
        cli.define_settings_flags(Settings, flag_values, required=("path",))
        flag_values(["prog", "--path=x", "--rate=0.25", "--num_steps=3", "--kind=b"])
        self.assertNotIn("hidden", flag_values)
        self.assertEqual(
            cli.settings_from_flags(Settings, flag_values), Settings(path="x", rate=0.25, steps=3, kind="b")
        )
        with self.assertRaises(flags.IllegalFlagValueError):
            flag_values["kind"].parse("c")

    def test_bad_values_are_usage_errors(self):
        cases = [
            (
                lambda: FinetuneSettings.of(task="sst2", output_dir="o", train_batch_size=0),
                "--train_batch_size",
            ),
            (lambda: FinetuneSettings.of(task="sst2", output_dir="o", learning_rate=-1.0), "--learning_rate"),
            (lambda: PretrainingConfig(learning_rate=-1.0), "--learning_rate must be > 0"),
            (
                lambda: PretrainingConfig(max_predictions_per_seq=80, max_seq_length=64),
                "--max_predictions_per_seq",
            ),
            (lambda: ExportSettings(kind="encoder", init_checkpoint="c", export_dir="e", top_k=0), "--top_k"),
            (
                lambda: FeatureSettings(input_file="i", output_file="o", init_checkpoint="c", layers=("x",)),
                "--layers",
            ),
            (lambda: VocabSettings(input_files="i", output_file="o", vocab_size=3), "--vocab_size"),
        ]
        for make, message in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(UsageError, message) as raised:
                    make()
                self.assertEqual(raised.exception.exit_code, 2)

    def test_error_classes_share_the_base(self):
        from bert_tf.checkpoints import CheckpointError
        from bert_tf.config import ConfigError
        from bert_tf.tasks.features import TaskDataError
        from bert_tf.tokenization import VocabError
        from bert_tf.training.inputs import InputError
        from pipelines.text_input import InputFileError

        for error in (CheckpointError, ConfigError, TaskDataError, VocabError, InputError, InputFileError):
            with self.subTest(error=error.__name__):
                self.assertTrue(issubclass(error, BertTfError))
                self.assertTrue(issubclass(error, ValueError))  # as before, for callers catching it


class HelpTest(tf.test.TestCase):
    # A program shows its help without TensorFlow when its settings module loads none.
    LIGHT_PROGRAMS = (
        "bert_tf.export",
        "bert_tf.extract_features",
        "bert_tf.fill_mask",
        "pipelines.create_pretraining_data",
        "pipelines.build_vocab",
        "pipelines.data_service",
    )

    def test_help_loads_no_tensorflow(self):
        script = (
            "import runpy, sys\n"
            "sys.argv = [sys.argv[1], '--helpshort']\n"
            "try:\n"
            "    runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
            "except SystemExit as exit:\n"
            "    print('exit', exit.code, 'tensorflow' in sys.modules)\n"
        )
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for program in self.LIGHT_PROGRAMS:
            with self.subTest(program=program):
                result = subprocess.run(
                    [sys.executable, "-c", script, program],
                    cwd=root,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                self.assertIn("--", result.stdout)  # the flags are listed
                self.assertEqual(result.stdout.strip().splitlines()[-1], "exit 0 False", result.stderr)


class NativeNoiseTest(tf.test.TestCase):
    def test_only_tensorflows_native_noise_is_filtered(self):
        from bert_tf.quiet import NATIVE_NOISE as _NATIVE_NOISE

        noise = [
            b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
            b"I0000 00:00:1796156239.407599    7021 port.cc:153] oneDNN custom operations are on.",
            b"W0000 00:00:1796159727.858515    1154 dataset.h:598] FAILED_PRECONDITION: stateful.",
            b"E0000 00:00:1796155771.117224    4293 cuda_platform.cc:52] failed call to cuInit: INTERNAL",
            b"E0000 00:00:1796155931.549694    5359 util.cc:131] oneDNN supports DT_INT64 only on platforms",
        ]
        kept = [
            b"I1201 21:25:18.123456 140234 generate.py:117] wrote 5 instances",  # absl, from Python
            b"E0000 00:00:1796155931.549694    5359 session.cc:131] a real error",
            b"bert_tf.finetune: error: --train_batch_size must be a positive integer, got 0",
            b"Traceback (most recent call last):",
        ]
        self.assertTrue(all(_NATIVE_NOISE.match(line) for line in noise))
        self.assertFalse(any(_NATIVE_NOISE.match(line) for line in kept))

    def test_a_result_comes_after_what_was_said_before_it(self):
        # stderr passes through the filter's thread, stdout does not: on one terminal (here
        # one pipe) a result line must still come after the log lines written before it.
        script = (
            "import sys\n"
            "from bert_tf import cli\n"
            "cli.quiet_start(import_tensorflow=False)\n"
            "for i in range(50):\n"
            "    print(f'log {i}', file=sys.stderr)\n"
            "    cli.result(f'result {i}')\n"
            "print('partial', end='', file=sys.stderr)\n"
            "cli.result(' line')\n"
        )
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=root,
            env={**env, "PYTHONPATH": root},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        self.assertEqual(result.returncode, 0, result.stdout)
        expected = "".join(f"log {i}\nresult {i}\n" for i in range(50)) + "partial line\n"
        self.assertEqual(result.stdout.decode(), expected)


if __name__ == "__main__":
    tf.test.main()
