"""Beam's options on the programs' command lines: passed through, and refused in one line
before anything runs when Beam is missing or the runner cannot use them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import tensorflow as tf

from bert_tf.errors import UsageError
from pipelines import beam as beam_package
from pipelines.beam import runner

ROOT = Path(__file__).resolve().parents[3]
VOCAB_FILE = str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt")

# A process where `import apache_beam` fails, as where it is not installed, running a program.
WITHOUT_BEAM = (
    "import sys\n"
    "sys.modules['apache_beam'] = None\n"
    "sys.argv = sys.argv[1:]\n"
    "import runpy\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


# A process running a program with --runner whose pipeline is built and handed to `runner.run`
# but not run (its steps are the workers'): it prints the TensorFlow modules this launcher
# process has loaded (of tensorflow, tensorflow_text) when the pipeline is submitted and when the program ends.
LAUNCHER = (
    "import atexit, json, sys\n"
    "from pipelines.beam import runner\n"
    "def tensorflow_modules():\n"
    "    return sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'tensorflow_text'})\n"
    "def submit(pipeline):\n"
    "    assert pipeline.transforms_stack, 'no pipeline'\n"
    "    print('submitted:', json.dumps(tensorflow_modules()))\n"
    "    return {'instances': 1, 'documents': 2}\n"
    "runner.run = submit\n"
    "atexit.register(lambda: print('ended:', json.dumps(tensorflow_modules())))\n"
    "sys.argv = sys.argv[1:]\n"
    "import runpy\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"},
    )


class PipelineOptionsTest(tf.test.TestCase):
    def test_options_pass_through_to_the_runner(self):
        _, options = runner.pipeline_options(
            "DirectRunner", ["--direct_num_workers", "2", "--direct_running_mode=multi_processing"]
        )
        everything = options.get_all_options()
        self.assertEqual(everything["direct_num_workers"], 2)
        self.assertEqual(everything["direct_running_mode"], "multi_processing")
        self.assertEqual(everything["runner"], "DirectRunner")

    def test_what_beam_or_the_runner_refuses_is_one_usage_error(self):
        cases = [
            ("NoSuchRunner", [], "--runner=NoSuchRunner is not a Beam runner; use one of .*DataflowRunner"),
            ("DirectRunner", ["--direct_num_worker=2"], "unknown flag\\(s\\) --direct_num_worker: "),
            ("DirectRunner", ["--direct_running_mode=fast"], "invalid choice: 'fast'"),
            ("DirectRunner", ["--direct_num_workers=two"], "invalid int value: 'two'"),
            ("DataflowRunner", [], "--runner=DataflowRunner rejects these Beam options: .*project"),
        ]
        for runner_name, args, message in cases:
            with self.subTest(runner=runner_name, args=args):
                with self.assertRaisesRegex(UsageError, message) as raised:
                    runner.pipeline_options(runner_name, args)
                self.assertNotIn("\n", str(raised.exception))

    def test_without_beam_installed_the_error_says_how_to_install_it(self):
        with mock.patch.dict(sys.modules, {"apache_beam": None}):
            with self.assertRaisesRegex(UsageError, 'not installed: pip install "bert_tf\\[beam\\]"$'):
                beam_package.require_beam()


class BuildVocabOptionsTest(tf.test.TestCase):
    def test_max_lines_has_no_meaning_on_beam(self):
        from pipelines.build_vocab import build_vocab

        with self.assertRaisesRegex(UsageError, "--max_lines .* no meaning with --runner"):
            build_vocab(
                VOCAB_FILE,
                100,
                os.path.join(tempfile.mkdtemp(), "v.txt"),
                max_lines=10,
                runner="DirectRunner",
            )


class CommandLineTest(tf.test.TestCase):
    def test_the_one_process_program_imports_no_beam_and_runner_asks_for_it(self):
        directory = tempfile.mkdtemp()
        text = os.path.join(directory, "corpus.txt")
        Path(text).write_text("the cat sat.\nit was warm.\nthen it left.\n\nthe dog ran.\nit came back.\n")
        common = [f"--input_file={text}", f"--vocab_file={VOCAB_FILE}", "--dupe_factor=1"]
        output = os.path.join(directory, "one.tfrecord")
        result = _run(
            "-c", WITHOUT_BEAM, "pipelines.create_pretraining_data", *common, f"--output_file={output}"
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertTrue(os.path.exists(output))
        result = _run(
            "-c", WITHOUT_BEAM, "pipelines.create_pretraining_data", *common, "--runner=DirectRunner",
            f"--output_file={output}.beam",
        )  # fmt: skip
        self.assertEqual(result.returncode, 2)
        self.assertEqual(
            result.stderr.strip().splitlines()[-1],
            "pipelines.create_pretraining_data: error: --runner runs the program on Apache Beam, which is not "
            'installed: pip install "bert_tf[beam]"',
        )

    def test_the_launcher_imports_no_tensorflow(self):
        # Importing TensorFlow takes seconds; the workers import it for the steps that use it,
        # the process that checks the flags and files and submits the pipeline does not.
        # (build_vocab then learns the vocab from the counts here, with tensorflow-text's
        # learner, whose package loads TensorFlow.)
        directory = tempfile.mkdtemp()
        text = os.path.join(directory, "corpus.txt")
        Path(text).write_text("the cat sat.\nit was warm.\n\nthe dog ran.\nit came back.\n")
        programs = {
            "pipelines.create_pretraining_data": [
                f"--vocab_file={VOCAB_FILE}",
                "--output_file=" + text + ".out",
                "--do_whole_word_mask",
                "--word_segmenter=jieba",  # checked in the launcher too
            ],
            "pipelines.build_vocab": [f"--output_file={directory}/vocab.txt"],
        }
        for program, flags in programs.items():
            with self.subTest(program=program):
                result = _run(
                    "-c", LAUNCHER, program, f"--input_file={text}", "--runner=DirectRunner", *flags
                )
                lines = (result.stdout + result.stderr).splitlines()  # cli.run prints on stderr
                printed = dict(
                    line.split(": ", 1) for line in lines if line.startswith(("submitted: [", "ended: ["))
                )
                self.assertEqual(printed.get("submitted"), "[]", result.stdout + result.stderr[-2000:])
                if program == "pipelines.create_pretraining_data":
                    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
                    self.assertEqual(printed.get("ended"), "[]")

    def test_unknown_flags_are_errors_without_runner_and_beams_with_it(self):
        cases = [
            ("pipelines.create_pretraining_data", [f"--vocab_file={VOCAB_FILE}", "--direct_num_workers=2"],
             "unknown flag\\(s\\) or argument\\(s\\) --direct_num_workers=2: see --helpshort"),
            ("pipelines.build_vocab", ["--runner=DirectRunner", "--no_such_option=1"],
             "unknown flag\\(s\\) --no_such_option: neither"),
        ]  # fmt: skip
        directory = tempfile.mkdtemp()
        for program, flags, message in cases:
            with self.subTest(program=program, flags=flags):
                result = _run(
                    "-m", program, f"--input_file={VOCAB_FILE}", f"--output_file={directory}/out", *flags,
                )  # fmt: skip
                self.assertEqual(result.returncode, 2, result.stderr[-2000:])
                self.assertRegex(result.stderr.strip().splitlines()[-1], f"^{program}: error: {message}")
                self.assertFalse(os.listdir(directory))


if __name__ == "__main__":
    tf.test.main()
