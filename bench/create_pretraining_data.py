"""Offline generator benchmark: ours against the original create_pretraining_data.py.

Both run as whole processes on the same corpus (the embedded one, repeated to the
requested sizes) with the same flags (--dupe_factor=1 --max_seq_length=128, the other
flags at their defaults); wall time and peak RSS come from /usr/bin/time -v. The
original runs unchanged under `tf.compat.v1` through a small runner that puts
`tf.compat.v1` where it imports `tensorflow`; its code is read from the checkout given
by --original_repo and never copied here.

  python bench/create_pretraining_data.py --original_repo=/path/to/google-research/bert \
      --sizes_mb=12,35

Chinese (--chinese_sizes_mb): the Chinese test corpus (tests/fixtures/chinese_corpus.txt)
repeated to the size, with the uncased vocab plus the corpus's characters, all three with
--do_whole_word_mask: ours without a word segmenter, ours with --word_segmenter=jieba
(needs `pip install "bert_tf[chinese]"`), and the original. The segmenter's cost is the
ratio of the first two.

Beam (--beam_workers, default 1,2): the same program with --runner=DirectRunner and that many
worker processes (--direct_running_mode=multi_processing) on the same corpus, against the
one-process run: wall time, CPU time and the peak RSS of the whole process tree (the
launcher and its workers, sampled from /proc). From the Beam run's CPU time per MB it prints
an estimate of a Dataflow run on a larger corpus (--estimate_corpus_gb, --estimate_dupe_factor)
and the assumptions it rests on.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from absl import app, flags  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines import corpus  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "original_repo", None, "A checkout of google-research/bert (holds create_pretraining_data.py)."
)
flags.DEFINE_list("sizes_mb", ["12", "35"], "Corpus sizes to measure, in MB.")
flags.DEFINE_string("vocab_file", str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt"), "Vocab file.")
flags.DEFINE_string("workdir", None, "Where corpora and outputs go (default: a temporary directory).")
flags.DEFINE_bool("skip_original", False, "Measure only ours (e.g. to check memory on a bigger corpus).")
flags.DEFINE_list(
    "chinese_sizes_mb",
    [],
    "Chinese corpus sizes to measure, in MB (empty: none); --sizes_mb= for only these.",
)

flags.DEFINE_list(
    "beam_workers",
    ["1", "2"],
    "DirectRunner worker processes to measure the Beam pipeline with (empty: none).",
)
flags.DEFINE_float("estimate_corpus_gb", 20.0, "Corpus size of the Dataflow estimate, in GB of text.")
flags.DEFINE_integer("estimate_dupe_factor", 10, "--dupe_factor of the Dataflow estimate.")
flags.DEFINE_integer(
    "dataflow_vcpus_per_worker", 4, "vCPUs of a Dataflow worker in the estimate (n2-standard-4)."
)
flags.DEFINE_float("target_hours", 1.0, "Wall time the estimate sizes the Dataflow worker count for.")

CHINESE_CORPUS = ROOT / "tests" / "fixtures" / "chinese_corpus.txt"

RUNNER = """
import sys
import tensorflow as tf
sys.modules["tensorflow"] = tf.compat.v1  # the original is TF1 code: tf.flags, tf.gfile, tf.logging, tf.app
sys.path.insert(0, {repo!r})
import runpy
runpy.run_path({script!r}, run_name="__main__")
"""


def _tree_rss_mb(root: int) -> float:
    """The resident memory of `root` and all its descendants, in MB (from /proc)."""
    parents, rss = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    tree, frontier = {root}, [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier and pid not in tree]
        tree.update(children)
        frontier = children
    return sum(rss.get(pid, 0) for pid in tree) / 2**20


def _measure(command: list[str], log: Path) -> tuple[float, float, float]:
    """Runs a command under /usr/bin/time -v; returns (wall s, CPU s (user + system), peak RSS MB).

    The peak RSS is that of the whole process tree (sampled every 0.2 s), or the largest
    single process's if that is more (a peak between samples).
    """
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}
    peak = [0.0]
    with open(log, "w") as handle:
        process = subprocess.Popen(
            ["/usr/bin/time", "-v", *command], stdout=handle, stderr=subprocess.STDOUT, env=env
        )

        def sample() -> None:
            while process.poll() is None:
                peak[0] = max(peak[0], _tree_rss_mb(process.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        returncode = process.wait()
        sampler.join()
    text = log.read_text(errors="replace")
    if returncode != 0:
        raise RuntimeError(f"{command[:3]} failed (exit {returncode}); see {log}:\n{text[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in wall.groups())
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    cpu = sum(
        float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", text).group(1)) for kind in ("User", "System")
    )
    return hours * 3600 + minutes * 60 + seconds, cpu, max(rss_kb / 1024, peak[0])


def _count_records(path: str) -> int:
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(path))


def _chinese_inputs(workdir: Path, size_mb: float) -> tuple[str, str]:
    """The Chinese corpus repeated to about size_mb, and the English vocab plus its characters."""
    text = CHINESE_CORPUS.read_text(encoding="utf-8")
    repeat = max(1, round(size_mb * 1e6 / (len(text.encode("utf-8")) + 1)))
    text_file = workdir / f"chinese_{size_mb:g}mb.txt"
    text_file.write_text("\n".join([text] * repeat), encoding="utf-8")
    vocab = Path(FLAGS.vocab_file).read_text(encoding="utf-8").splitlines()
    characters = sorted({c for c in text if "\u4e00" <= c <= "\u9fff"} - set(vocab))
    vocab_file = workdir / "chinese_vocab.txt"
    vocab_file.write_text("\n".join(vocab + characters) + "\n", encoding="utf-8")
    return str(text_file), str(vocab_file)


def _chinese(workdir: Path, original_runner: Path | None) -> None:
    """Ours with and without the word segmenter, and the original, on Chinese text."""
    for size in (float(s) for s in FLAGS.chinese_sizes_mb):
        text_file, vocab_file = _chinese_inputs(workdir, size)
        megabytes = os.path.getsize(text_file) / 1e6
        common = [f"--input_file={text_file}", f"--vocab_file={vocab_file}", "--do_lower_case=True",
                  "--do_whole_word_mask=True", "--dupe_factor=1", "--max_seq_length=128"]  # fmt: skip
        runs = {
            "ours": [sys.executable, "-m", "pipelines.create_pretraining_data", *common],
            "ours+jieba": [sys.executable, "-m", "pipelines.create_pretraining_data", *common, "--word_segmenter=jieba"],
        }  # fmt: skip
        if original_runner is not None:
            runs["original"] = [sys.executable, str(original_runner), *common, "--random_seed=12345"]
        results = {}
        for name, command in runs.items():
            output = str(workdir / f"chinese_{name}_{size:g}mb.tfrecord")
            results[name] = _measure(
                [*command, f"--output_file={output}"], workdir / f"chinese_{name}_{size:g}mb.log"
            )
            wall, cpu, rss = results[name]
            print(f"{megabytes:.1f} MB Chinese  {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.0f} MB, "
                  f"{_count_records(output)} instances", flush=True)  # fmt: skip
        ours, segmented = results["ours"], results["ours+jieba"]
        line = (f"{megabytes:.1f} MB Chinese: the segmenter costs {segmented[0] / ours[0]:.2f}x wall, "
                f"{segmented[1] / ours[1]:.2f}x CPU")  # fmt: skip
        if "original" in results:
            original = results["original"]
            line += (f"; original / ours with the segmenter: {original[0] / segmented[0]:.2f}x wall, "
                     f"{original[1] / segmented[1]:.2f}x CPU")  # fmt: skip
        print(line, flush=True)


def _shards(prefix: str) -> list[str]:
    directory = Path(prefix).parent
    return sorted(str(path) for path in directory.glob(Path(prefix).name + "-*-of-*"))


def _dataflow_estimate(rows: list[dict]) -> None:
    """Wall time and worker count of a Dataflow run, from the Beam run's CPU time per MB."""
    workers = max(int(w) for w in FLAGS.beam_workers)
    key = f"beam{workers}"
    if len(rows) >= 2:  # start-up (imports, tracing, worker start) paid once: the cost of each further MB
        first, last = rows[0], rows[-1]
        cpu_per_mb = (last[key][1] - first[key][1]) / (last["mb"] - first["mb"])
        basis = f"the CPU time per extra MB from {first['mb']:.0f} to {last['mb']:.0f} MB"
    else:
        cpu_per_mb = rows[0][key][1] / rows[0]["mb"]
        basis = f"the CPU time per MB of the {rows[0]['mb']:.0f} MB run (start-up included: an upper bound)"
    if cpu_per_mb <= 0:
        print("\nDataflow estimate: no CPU cost per MB could be measured (noise); use larger --sizes_mb")
        return
    megabytes = FLAGS.estimate_corpus_gb * 1000
    # Reading and pairing once, then masking and encoding once per pass: the measured runs
    # are one pass, so the whole cost is scaled by the passes (an upper bound).
    cpu_hours = cpu_per_mb * megabytes * FLAGS.estimate_dupe_factor / 3600
    vcpus = FLAGS.dataflow_vcpus_per_worker
    needed = max(1, math.ceil(cpu_hours / (FLAGS.target_hours * vcpus)))
    print(
        f"\nDataflow estimate for {FLAGS.estimate_corpus_gb:g} GB of text at --dupe_factor={FLAGS.estimate_dupe_factor}: "
        f"{cpu_per_mb:.2f} CPU s per MB per pass ({basis}, DirectRunner with {workers} worker(s)) gives "
        f"{cpu_hours:.0f} vCPU-hours: {needed} workers of {vcpus} vCPUs for about {FLAGS.target_hours:g} h of "
        f"processing, plus a few minutes of worker start-up."
    )
    for count in sorted({max(1, needed // 4), needed, needed * 4}):
        print(f"  {count:4d} workers: about {cpu_hours / (count * vcpus):.1f} h")
    print(
        "  Assumptions: a Dataflow vCPU does the work of one core here; the cost per MB is linear in the corpus "
        "(the shuffle of the text once and the write of ~2.4 bytes of records per byte of text per pass are "
        "included in the measured CPU time, not their network or disk time); autoscaling keeps the workers busy."
    )


def _original_runner(workdir: Path) -> Path:
    runner = workdir / "run_original.py"
    script = Path(FLAGS.original_repo) / "create_pretraining_data.py"
    runner.write_text(
        RUNNER.format(repo=str(Path(FLAGS.original_repo).resolve()), script=str(script.resolve()))
    )
    return runner


def main(argv: list[str]) -> None:
    del argv
    if not FLAGS.skip_original:
        if not FLAGS.original_repo:
            raise app.UsageError("--original_repo is required (a checkout of google-research/bert)")
        script = Path(FLAGS.original_repo) / "create_pretraining_data.py"
        if not script.exists():
            raise app.UsageError(
                f"{script} does not exist; --original_repo must be a google-research/bert checkout"
            )
    workdir = Path(FLAGS.workdir or tempfile.mkdtemp(prefix="bench_cpd_"))
    workdir.mkdir(parents=True, exist_ok=True)
    unit = len(corpus.corpus_text().encode("utf-8")) + 1
    common = [
        f"--vocab_file={FLAGS.vocab_file}",
        "--do_lower_case=True",
        "--dupe_factor=1",
        "--max_seq_length=128",
    ]
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
        print(
            f"{megabytes:.1f} MB  ours: {ours[0]:.1f} s wall, {ours[1]:.1f} s CPU, peak RSS {ours[2]:.0f} MB, "
            f"{row['ours_n']} instances",
            flush=True,
        )
        for workers in (int(w) for w in FLAGS.beam_workers):
            prefix = str(workdir / f"beam{workers}_{size:g}mb" / "train")
            beam = _measure(
                [sys.executable, "-m", "pipelines.create_pretraining_data", "--runner=DirectRunner",
                 f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing",
                 f"--input_file={text_file}", f"--output_file={prefix}", "--num_output_shards=4", "--overwrite",
                 *common],
                workdir / f"beam{workers}_{size:g}mb.log",
            )  # fmt: skip
            row[f"beam{workers}"] = beam
            count = sum(_count_records(path) for path in _shards(prefix))
            print(
                f"{megabytes:.1f} MB  Beam DirectRunner, {workers} worker(s): {beam[0]:.1f} s wall, {beam[1]:.1f} s CPU, "
                f"peak RSS {beam[2]:.0f} MB (process tree), {count} instances; {beam[0] / ours[0]:.2f}x the "
                f"one-process wall time, {beam[2] / ours[2]:.1f}x its memory",
                flush=True,
            )
        if not FLAGS.skip_original:
            runner = _original_runner(workdir)
            original_out = str(workdir / f"original_{size:g}mb.tfrecord")
            original = _measure(
                [sys.executable, str(runner), f"--input_file={text_file}", f"--output_file={original_out}",
                 "--random_seed=12345", *common],
                workdir / f"original_{size:g}mb.log",
            )  # fmt: skip
            row.update(original=original, original_n=_count_records(original_out))
            print(
                f"{megabytes:.1f} MB  original: {original[0]:.1f} s wall, {original[1]:.1f} s CPU, peak RSS "
                f"{original[2]:.0f} MB, {row['original_n']} instances; ours is {original[0] / ours[0]:.1f}x faster "
                f"(wall), uses {original[1] / ours[1]:.1f}x less CPU time and {original[2] / ours[2]:.2f}x less memory",
                flush=True,
            )
        rows.append(row)
    if rows:  # --sizes_mb= (empty) measures only the Chinese text
        print(
            "\nsize_mb  ours_wall_s  ours_cpu_s  ours_rss_mb  orig_wall_s  orig_cpu_s  orig_rss_mb  wall_ratio  cpu_ratio"
        )
    for row in rows:
        line = f"{row['mb']:7.1f} {row['ours'][0]:12.1f} {row['ours'][1]:11.1f} {row['ours'][2]:12.0f}"
        if "original" in row:
            original, ours = row["original"], row["ours"]
            line += f" {original[0]:12.1f} {original[1]:11.1f} {original[2]:12.0f}"
            line += f" {original[0] / ours[0]:11.1f} {original[1] / ours[1]:10.1f}"
        print(line)
    if len(rows) >= 2 and all("original" in row for row in rows):
        # Start-up (TensorFlow import, tokenizer tables, tracing) is paid once; the cost of
        # each further megabyte shows the throughput of the two generators.
        first, last = rows[0], rows[-1]
        extra_mb = last["mb"] - first["mb"]
        for index, label in ((0, "wall"), (1, "CPU")):
            ours_per_mb = (last["ours"][index] - first["ours"][index]) / extra_mb
            original_per_mb = (last["original"][index] - first["original"][index]) / extra_mb
            if ours_per_mb <= 0:  # wall time on a loaded machine can be noisier than the difference
                print(
                    f"per extra MB ({label}): ours {ours_per_mb:.2f} s (noise), original {original_per_mb:.2f} s"
                )
                continue
            print(
                f"per extra MB ({label}): ours {ours_per_mb:.2f} s, original {original_per_mb:.2f} s, "
                f"ratio {original_per_mb / ours_per_mb:.1f}x"
            )
        print(
            f"peak RSS growth from {first['mb']:.0f} to {last['mb']:.0f} MB: ours "
            f"{last['ours'][2] - first['ours'][2]:+.0f} MB, original {last['original'][2] - first['original'][2]:+.0f} MB"
        )
    if rows and FLAGS.beam_workers:
        _dataflow_estimate(rows)
    if FLAGS.chinese_sizes_mb:
        _chinese(workdir, None if FLAGS.skip_original else _original_runner(workdir))


if __name__ == "__main__":
    app.run(main)
