"""The progress display of long steps: its line (share, rate, ETA), in place on a terminal and
plain lines otherwise; and what each program shows, run on a terminal (a pty) and piped."""

import io
import os
import pty
import re
import subprocess
import sys
import tty
from unittest import mock

import tensorflow as tf

from bert_tf import progress_display as progress
from pipelines import corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_FILE = os.path.join(ROOT, "tests", "fixtures", "bert_uncased_vocab.txt")
# A line of the display: "LABEL: DONE/TOTAL UNIT (PCT%)  RATE UNIT/s  ETA DURATION".
SHARE_RATE_ETA = r"[\d,.]+/[\d,.]+ {unit} \(\d+%\)  [\d,.]+ {unit}/s  ETA \d"
BYTES = "[kMG]?B"  # a size's unit: the one that suits it


class Terminal(io.StringIO):
    def isatty(self):
        return True


class Clock:
    """time.perf_counter, moved on by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class ProgressTest(tf.test.TestCase):
    def test_plain_lines_when_not_on_a_terminal(self):
        clock, stream = Clock(), io.StringIO()
        with mock.patch.object(progress.time, "perf_counter", clock):
            display = progress.Progress("reading", total=200, unit="lines", stream=stream, interval=10)
            clock.now += 2
            display.update(50, note="3 files")  # before the first 10 s: nothing
            clock.now += 8
            display.update(80, note="3 files")  # 80 in 10 s: 8/s, 120 left: 15 s
            clock.now += 5
            display.update(120)  # 5 s after the last line: none
            clock.now += 5
            display.close()
        self.assertEqual(
            stream.getvalue(),
            "reading: 80/200 lines (40%)  8 lines/s  ETA 15s  3 files\n"
            "reading: 120 lines in 20.0s (6 lines/s)\n",
        )

    def test_one_line_redrawn_in_place_on_a_terminal(self):
        clock, stream = Clock(), Terminal()
        with mock.patch.object(progress.time, "perf_counter", clock):
            with progress.Progress("reading", total=2e6, unit="bytes", stream=stream, interval=10) as display:
                for _ in range(4):
                    clock.now += 0.5  # past the terminal's interval (0.2 s): every update drawn
                    display.update(display.done + 250_000)
        lines = stream.getvalue().split("\r")[1:]
        self.assertLen(lines, 5)
        # Bytes in the unit that suits the total; the rate in its own.
        self.assertEqual(lines[1], "reading: 0.5/2.0 MB (25%)  500.0 kB/s  ETA 3s\x1b[K")
        self.assertEqual(lines[-1], "reading: 1.0 MB in 2.0s (500.0 kB/s)\x1b[K\n")  # ended
        self.assertNotIn("\n", "".join(lines[:-1]))

    def test_an_error_ends_the_line_in_place_before_its_message(self):
        stream = Terminal()
        with self.assertRaises(ValueError):
            with progress.Progress("reading", stream=stream, interval=0) as display:
                display.update(10)
                raise ValueError("bad input")
        self.assertEndsWith(stream.getvalue(), "\x1b[K\n")
        self.assertNotIn("in ", stream.getvalue())  # no closing line of a step that failed

    def test_a_phase_says_when_it_is_done(self):
        for stream, ends in ((io.StringIO(), "\n"), (Terminal(), "\r")):
            with progress.TimedStep("learning", stream=stream) as phase:
                phase.note = "7 tokens"
            self.assertRegex(stream.getvalue(), rf"^learning \.\.\.{ends}learning: done in \d\.\ds  7 tokens")

    def test_disabled_shows_nothing(self):
        stream = io.StringIO()
        with progress.Progress("reading", total=10, stream=stream, interval=0, enabled=False) as display:
            display.update(5)
        with progress.TimedStep("learning", stream=stream, enabled=False):
            pass
        self.assertEqual(stream.getvalue(), "")


def run_program(args_for) -> dict[bool, str]:
    """{on a terminal: stderr} of `python -m ARGS`, run at once on a pseudo-terminal (raw: no
    newline translation) and with stderr piped; `args_for(terminal)` gives each its ARGS.

    Progress lines are drawn at every update (BERT_TF_PROGRESS_SECONDS=0), so even a
    second's run shows some."""
    env = {**os.environ, "BERT_TF_PROGRESS_SECONDS": "0"}

    def start(terminal, stderr):
        command = [sys.executable, "-m", *args_for(terminal)]
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)

    piped = start(False, subprocess.PIPE)  # blocks on a full pipe until read below: no deadlock
    parent, child = pty.openpty()
    tty.setraw(child)
    on_terminal = start(True, child)
    os.close(child)
    output = b""
    while True:
        try:
            data = os.read(parent, 1 << 16)
        except OSError:  # the program's end closed the terminal
            break
        if not data:
            break
        output += data
    os.close(parent)
    outputs = {True: output.decode(), False: piped.communicate(timeout=600)[1].decode()}
    assert on_terminal.wait(timeout=600) == 0, outputs[True]
    assert piped.returncode == 0, outputs[False]
    return outputs


class ProgramOutputTest(tf.test.TestCase):
    """Each program's progress: rate and ETA on a terminal and piped, no `\\r` when piped."""

    def check(self, output: str, terminal: bool, label: str, unit: str):
        start = "\r" if terminal else "(?m)^"
        self.assertRegex(output, start + re.escape(label) + ": " + SHARE_RATE_ETA.format(unit=unit))
        self.assertRegex(output, start + re.escape(label) + rf": [\d,.]+ {unit} in [\d.]+s \(")
        if terminal:  # the closing line is drawn over the last one, and ends it
            self.assertRegex(output, "\r" + re.escape(label) + rf": [\d,.]+ {unit} in .*\x1b\[K\n")
        else:
            self.assertNotIn("\r", output)

    def test_build_vocab(self):
        directory = self.get_temp_dir()
        text = "\n\n".join("\n".join(document) for document in list(corpus.documents())[:10])
        with open(os.path.join(directory, "corpus.txt"), "w") as handle:
            handle.write(text + "\n")
        outputs = run_program(
            lambda terminal: [
                "pipelines.build_vocab",
                f"--input_file={directory}/corpus.txt",
                f"--output_file={directory}/vocab-{terminal}.txt",
                "--vocab_size=100",
            ]
        )
        for terminal, output in outputs.items():
            with self.subTest(terminal=terminal):
                self.check(output, terminal, "counting words", BYTES)
                # The learner's phase: announced, then its time.
                self.assertRegex(
                    output, r"learning a vocab of up to 100 tokens from [\d,]+ distinct words \.\.\."
                )
                self.assertRegex(output, r"distinct words: done in [\d.]+s  [\d,]+ tokens")

    def test_create_pretraining_data(self):
        directory = self.get_temp_dir()
        text = "\n\n".join("\n".join(document) for document in list(corpus.documents())[:20])
        with open(os.path.join(directory, "corpus.txt"), "w") as handle:
            handle.write(text + "\n")
        size = os.path.getsize(os.path.join(directory, "corpus.txt"))
        self.assertBetween(3 * size, 1e3, 1e6)  # shown in kB
        outputs = run_program(
            lambda terminal: [
                "pipelines.create_pretraining_data",
                f"--input_file={directory}/corpus.txt",
                f"--output_file={directory}/out-{terminal}.tfrecord",
                f"--vocab_file={VOCAB_FILE}",
                "--dupe_factor=3",
                "--max_seq_length=32",
                "--max_predictions_per_seq=5",
            ]
        )
        for terminal, output in outputs.items():
            with self.subTest(terminal=terminal):
                self.check(output, terminal, "generating (3 passes)", BYTES)
                # Over the whole job: the total is every pass's bytes, and all of them are read.
                total = f"{3 * size / 1e3:,.1f} kB"
                self.assertRegex(output, rf"generating \(3 passes\): [\d.]+/{total} \(")
                self.assertRegex(output, rf"generating \(3 passes\): {total} in .* instances written")

    def test_finetune(self):
        from tests.harness.data import write_one_word_task as write_task

        directory = self.get_temp_dir()
        paths = write_task(directory, n_train=8, n_eval=8)
        outputs = run_program(
            lambda terminal: [
                "bert_tf.finetune",
                "--task=classification",
                f"--output_dir={directory}/out-{terminal}",
                f"--train_file={paths['train']}",
                f"--eval_file={paths['dev']}",
                f"--predict_file={paths['dev']}",
                f"--vocab_file={paths['vocab']}",
                f"--bert_config_file={paths['config']}",
                "--max_seq_length=8",
                "--train_batch_size=4",
                "--eval_batch_size=4",
                "--num_train_epochs=1",
                "--eval_every_steps=0",
            ]
        )
        for terminal, output in outputs.items():
            with self.subTest(terminal=terminal):
                # The counting pass cannot know its total: a count and a rate.
                count = ("\r" if terminal else "(?m)^") + "counting the train data"
                self.assertRegex(output, count + r": 8 examples  [\d.]+ examples/s")
                self.assertRegex(output, count + r": 8 examples in [\d.]+s \([\d.]+ examples/s\)")
                self.check(output, terminal, "evaluating the eval data", "examples")
                self.check(output, terminal, "predicting the predict data", "examples")
                if not terminal:
                    self.assertNotIn("\r", output)


if __name__ == "__main__":
    tf.test.main()
