"""Offline generator benchmark: ours against the original create_pretraining_data.py.

Both run as whole processes on the same corpus (the embedded one, repeated to the
requested sizes) with the same flags (--dupe_factor=1 --max_seq_length=128, the other
flags at their defaults); wall time and peak RSS come from /usr/bin/time -v. The
original runs unchanged under `tf.compat.v1` through a small runner that puts
`tf.compat.v1` where it imports `tensorflow`; its code is read from the checkout given
by --original_repo and never copied here.

  python bench/create_pretraining_data.py --original_repo=/path/to/google-research/bert \
      --sizes_mb=12,35
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from absl import app, flags

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines import corpus  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("original_repo", None, "A checkout of google-research/bert (holds create_pretraining_data.py).")
flags.DEFINE_list("sizes_mb", ["12", "35"], "Corpus sizes to measure, in MB.")
flags.DEFINE_string("vocab_file", str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt"), "Vocab file.")
flags.DEFINE_string("workdir", None, "Where corpora and outputs go (default: a temporary directory).")
flags.DEFINE_bool("skip_original", False, "Measure only ours (e.g. to check memory on a bigger corpus).")

RUNNER = """
import sys
import tensorflow as tf
sys.modules["tensorflow"] = tf.compat.v1  # the original is TF1 code: tf.flags, tf.gfile, tf.logging, tf.app
sys.path.insert(0, {repo!r})
import runpy
runpy.run_path({script!r}, run_name="__main__")
"""


def _measure(command: list[str], log: Path) -> tuple[float, float]:
    """Runs a command under /usr/bin/time -v; returns (wall seconds, peak RSS in MB)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}
    with open(log, "w") as handle:
        result = subprocess.run(["/usr/bin/time", "-v", *command], stdout=handle, stderr=subprocess.STDOUT, env=env)
    text = log.read_text(errors="replace")
    if result.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed (exit {result.returncode}); see {log}:\n{text[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in wall.groups())
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    return hours * 3600 + minutes * 60 + seconds, rss_kb / 1024


def _count_records(path: str) -> int:
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(path))


def main(argv: list[str]) -> None:
    del argv
    if not FLAGS.skip_original:
        if not FLAGS.original_repo:
            raise app.UsageError("--original_repo is required (a checkout of google-research/bert)")
        script = Path(FLAGS.original_repo) / "create_pretraining_data.py"
        if not script.exists():
            raise app.UsageError(f"{script} does not exist; --original_repo must be a google-research/bert checkout")
    workdir = Path(FLAGS.workdir or tempfile.mkdtemp(prefix="bench_cpd_"))
    workdir.mkdir(parents=True, exist_ok=True)
    unit = len(corpus.corpus_text().encode("utf-8")) + 1
    common = [f"--vocab_file={FLAGS.vocab_file}", "--do_lower_case=True", "--dupe_factor=1", "--max_seq_length=128"]
    rows = []
    for size in (float(s) for s in FLAGS.sizes_mb):
        repeat = max(1, round(size * 1e6 / unit))
        text_file = corpus.write_corpus(workdir / f"corpus_{size:g}mb.txt", repeat=repeat)
        megabytes = os.path.getsize(text_file) / 1e6
        ours_out = str(workdir / f"ours_{size:g}mb.tfrecord")
        ours = _measure(
            [sys.executable, "-m", "pipelines.create_pretraining_data", f"--input_file={text_file}",
             f"--output_file={ours_out}", *common],
            workdir / f"ours_{size:g}mb.log",
        )  # fmt: skip
        row = {"mb": megabytes, "ours": ours, "ours_n": _count_records(ours_out)}
        print(f"{megabytes:.1f} MB  ours: {ours[0]:.1f} s, peak RSS {ours[1]:.0f} MB, {row['ours_n']} instances", flush=True)
        if not FLAGS.skip_original:
            runner = workdir / "run_original.py"
            runner.write_text(RUNNER.format(repo=str(Path(FLAGS.original_repo).resolve()), script=str(script.resolve())))
            original_out = str(workdir / f"original_{size:g}mb.tfrecord")
            original = _measure(
                [sys.executable, str(runner), f"--input_file={text_file}", f"--output_file={original_out}",
                 "--random_seed=12345", *common],
                workdir / f"original_{size:g}mb.log",
            )  # fmt: skip
            row.update(original=original, original_n=_count_records(original_out))
            print(
                f"{megabytes:.1f} MB  original: {original[0]:.1f} s, peak RSS {original[1]:.0f} MB, "
                f"{row['original_n']} instances; ours is {original[0] / ours[0]:.1f}x faster, "
                f"{original[1] / ours[1]:.1f}x less memory",
                flush=True,
            )
        rows.append(row)
    print("\nsize_mb  ours_s  ours_rss_mb  original_s  original_rss_mb  speedup  memory_ratio")
    for row in rows:
        line = f"{row['mb']:7.1f} {row['ours'][0]:7.1f} {row['ours'][1]:12.0f}"
        if "original" in row:
            line += (
                f" {row['original'][0]:11.1f} {row['original'][1]:16.0f} {row['original'][0] / row['ours'][0]:8.1f}"
                f" {row['original'][1] / row['ours'][1]:13.1f}"
            )
        print(line)


if __name__ == "__main__":
    app.run(main)
