"""Resuming pretraining early and late: time from process start to the first new step.

For raw-text and TFRecord input, `bert_tiny` is pretrained to step `--early_step` (100),
then a copy of that model_dir is moved to step `--late_step` (100,000) without training
100,000 steps: the checkpoint's step counters are rewritten, and the input position is
the real one, reached by running the same input pipeline through `--late_step` batches
(minutes for raw text; done once and kept in --work_dir). Each model_dir is then resumed
by `python -m bert_tf.pretrain` for one more step, in a fresh process, and the time from
starting the process to its first progress line is measured. Prints the times and the
late/early ratio per input (target: at most 1.2).

    python bench/resume.py [--late_step=100000] [--work_dir=/tmp/bert_tf_bench_resume]

Smoke run (seconds of building, not a measurement): `--early_step=4 --late_step=40`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
VOCAB = REPO / "tests" / "fixtures" / "bert_uncased_vocab.txt"  # bert_tiny's 30,522 tokens
SEQ, PREDICTIONS = 128, 20


def _settings(kind: str, work: Path, model_dir: Path, steps: int, batch: int):
    from bert_tf.training.settings import PretrainingConfig

    inputs = {
        "text": {"corpus": str(work / "corpus.txt")},
        "records": {"train_files": str(work / "data.tfrecord")},
    }
    return PretrainingConfig(
        model_dir=str(model_dir),
        config="bert_tiny",
        vocab_file=str(VOCAB),
        train_batch_size=batch,
        num_train_steps=steps,
        num_warmup_steps=0,
        max_seq_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        save_checkpoints_steps=steps,
        steps_per_loop=min(steps, 100),
        fill_mask_demo=False,
        **inputs[kind],
    )


def _cli_args(settings) -> list[str]:
    args = []
    for name in (
        "model_dir",
        "config",
        "vocab_file",
        "corpus",
        "train_files",
        "train_batch_size",
        "max_seq_length",
        "max_predictions_per_seq",
    ):
        value = getattr(settings, name)
        if value is not None:
            args.append(f"--{name}={value}")
    return args


def prepare_data(work: Path) -> None:
    from pipelines import corpus
    from pipelines.generate import GenerationConfig, create_pretraining_data

    if not (work / "corpus.txt").exists():
        corpus.write_corpus(str(work / "corpus.txt"), repeat=4)
    if not (work / "data.tfrecord").exists():
        create_pretraining_data(
            GenerationConfig(
                input_file=str(work / "corpus.txt"),
                output_file=str(work / "data.tfrecord"),
                vocab_file=str(VOCAB),
                max_seq_length=SEQ,
                max_predictions_per_seq=PREDICTIONS,
                dupe_factor=1,
            ),
            progress=False,
        )


def move_checkpoint_to_step(model_dir: Path, step: int) -> None:
    """Rewrites the latest checkpoint's step counters (global_step, optimizer iterations) to `step`."""
    import numpy as np
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(str(model_dir))
    reader = tf.compat.v1.train.NewCheckpointReader(latest)
    names = sorted(reader.get_variable_to_shape_map())
    tensors = []
    for name in names:
        value = reader.get_tensor(name)
        if name.startswith(("global_step/", "optimizer/iterations/")) and np.ndim(value) == 0:
            value = np.asarray(step, dtype=value.dtype)
        tensors.append(tf.constant(value))
    prefix = str(model_dir / f"ckpt-{step}")
    with tf.device("/cpu:0"):
        tf.raw_ops.SaveV2(
            prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors
        )
    for path in model_dir.glob(Path(latest).name + ".*"):
        path.unlink()
    (model_dir / "checkpoint").write_text(
        f'model_checkpoint_path: "ckpt-{step}"\nall_model_checkpoint_paths: "ckpt-{step}"\n'
    )


def advance_input(settings, files: list[str], step: int) -> None:
    """Runs the run's own input pipeline through `step` batches and saves that position."""
    import tensorflow as tf

    from bert_tf.training.input_feed import InputFeed
    from bert_tf.training.inputs import pretraining_dataset_fn

    dataset_fn = pretraining_dataset_fn(settings, files, settings.vocab_file, SEQ, PREDICTIONS, settings.seed)
    feed = InputFeed(tf.distribute.get_strategy(), dataset_fn, settings.model_dir, phase_index=0)
    feed.start(0, 0)

    @tf.function
    def consume(iterator, count):
        for _ in tf.range(count):
            next(iterator)

    consume(feed.iterator, tf.constant(step, tf.int64))
    for old in Path(feed.state_dir).glob("*"):
        old.unlink()
    feed.save(step)


def build(kind: str, work: Path, early: int, late: int, batch: int) -> dict[int, Path]:
    from bert_tf.training.pretraining import run_pretraining

    early_dir, late_dir = work / f"{kind}_{early}", work / f"{kind}_{late}"
    if not (early_dir / "checkpoint").exists():
        shutil.rmtree(early_dir, ignore_errors=True)
        run_pretraining(_settings(kind, work, early_dir, early, batch))
    if not (late_dir / "checkpoint").exists():
        shutil.rmtree(late_dir, ignore_errors=True)
        shutil.copytree(early_dir, late_dir)
        shutil.rmtree(late_dir / "export", ignore_errors=True)
        started = time.perf_counter()
        settings = _settings(kind, work, late_dir, late, batch)
        files = [settings.corpus or settings.train_files]
        advance_input(settings, files, late)
        move_checkpoint_to_step(late_dir, late)
        print(
            f"built {late_dir} (input advanced {late} batches in {time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    return {early: early_dir, late: late_dir}


def time_to_first_step(kind: str, work: Path, model_dir: Path, step: int, batch: int) -> float:
    settings = _settings(kind, work, model_dir, step + 1, batch)
    args = [
        *_cli_args(settings),
        f"--num_train_steps={step + 1}",
        "--num_warmup_steps=0",
        "--steps_per_loop=1",
        f"--save_checkpoints_steps={step + 10}",
    ]
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "bert_tf.pretrain", *args],
        cwd=REPO,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    elapsed, lines = None, []
    for line in process.stdout:
        lines.append(line)
        if elapsed is None and re.match(rf"step {step + 1}/", line):
            elapsed = time.perf_counter() - started
    process.wait()
    output = "".join(lines)
    if elapsed is None or "input position restored" not in output:
        raise RuntimeError(f"resume of {model_dir} did not go as expected:\n{output[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--early_step", type=int, default=100)
    parser.add_argument("--late_step", type=int, default=100_000)
    parser.add_argument("--train_batch_size", type=int, default=8)
    parser.add_argument("--work_dir", default="/tmp/bert_tf_bench_resume")
    parser.add_argument("--repeats", type=int, default=3, help="resumes of each, taking turns; medians")
    args = parser.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    prepare_data(work)
    dirs = {
        kind: build(kind, work, args.early_step, args.late_step, args.train_batch_size)
        for kind in ("text", "records")
    }
    times: dict[tuple[str, int], list[float]] = {}
    for repeat in range(args.repeats):  # taking turns: a burst of other load hits all cases
        for kind, model_dirs in dirs.items():
            for step, model_dir in model_dirs.items():
                # A resume writes a checkpoint at the end: resume a copy, keep the built one.
                trial = work / f"trial_{kind}_{step}"
                shutil.rmtree(trial, ignore_errors=True)
                shutil.copytree(model_dir, trial)
                seconds = time_to_first_step(kind, work, trial, step, args.train_batch_size)
                times.setdefault((kind, step), []).append(seconds)
                print(f"  run {repeat + 1}: {kind} resumed at step {step}: {seconds:.2f} s", flush=True)
                shutil.rmtree(trial)
    results = {key: statistics.median(values) for key, values in times.items()}
    print(f"\nmedians of {args.repeats} run(s):")
    print(
        f"\nbert_tiny, batch {args.train_batch_size}, seq {SEQ}: seconds from process start to the first new step"
    )
    print(
        f"{'input':8} {'step ' + str(args.early_step):>12} {'step ' + str(args.late_step):>14} {'late/early':>11}"
    )
    for kind in ("text", "records"):
        early, late = results[kind, args.early_step], results[kind, args.late_step]
        print(f"{kind:8} {early:12.2f} {late:14.2f} {late / early:10.2f}x")


if __name__ == "__main__":
    main()
