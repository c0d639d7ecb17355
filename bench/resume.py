"""Resuming pretraining and fine-tuning early and late: time from process start to the first new step.

For raw-text and TFRecord input, `bert_tiny` is pretrained to step `--early_step` (100),
then a copy of that model_dir is moved to step `--late_step` (100,000) without training
100,000 steps: the checkpoint's step counters are rewritten, and the input position is
the real one, reached by running the same input pipeline through `--late_step` batches
(minutes for raw text; done once and kept in --work_dir). Each model_dir is then resumed
by `python -m bert_tf.pretrain` for one more step, in a fresh process, and the time from
starting the process to its first progress line is measured. Prints the times and the
late/early ratio per input (target: at most 1.2).

    python bench/resume.py [--late_step=100000] [--work_dir=/tmp/bert_tf_bench_resume]

Fine-tuning (`--only=finetune`): a tiny classifier on a CSV of `--finetune_rows` (20,000)
rows, batch 32, is trained by `python -m bert_tf.finetune` until its backup reaches
`--finetune_early_step` (20) and, in another output folder, `--finetune_late_step` (2,000:
3.2 passes over the file), then stopped by SIGTERM (which backs up at the step reached).
Each is resumed in a fresh process and the time to its first new update is measured; the
late one also with the input position removed from its backup, which makes the resume skip
the batches already seen (the way every resume went before): the peer in the same invocation.

Smoke run (seconds of building, not a measurement): `--early_step=4 --late_step=40
--finetune_early_step=4 --finetune_late_step=40 --finetune_rows=500`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
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


# --- fine-tuning -----------------------------------------------------------------------------

FINETUNE_BATCH = 32
FINETUNE_WORDS = ["good", "great", "fine", "bad", "awful", "poor", "the", "film", "was", "very", "a", "plot"]


def prepare_finetune(work: Path, rows: int) -> dict:
    import random

    paths = {name: work / f"finetune_{name}" for name in ("train.csv", "vocab.txt", "config.json")}
    if not paths["train.csv"].exists():
        rng = random.Random(0)
        lines = ["text,label"]
        for index in range(rows):
            words = rng.choices(FINETUNE_WORDS, k=rng.randint(4, 40))
            lines.append(f"{' '.join(words)},{'pos' if index % 2 else 'neg'}")
        paths["train.csv"].write_text("\n".join(lines) + "\n")
        paths["vocab.txt"].write_text(
            "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *FINETUNE_WORDS]) + "\n"
        )
        config = {"vocab_size": 5 + len(FINETUNE_WORDS), "hidden_size": 16, "num_hidden_layers": 1,
                  "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 64}  # fmt: skip
        paths["config.json"].write_text(json.dumps(config))
    return paths


def finetune_command(paths: dict, output_dir: Path, save_every: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bert_tf.finetune",
        "--task=classification",
        f"--output_dir={output_dir}",
        f"--train_file={paths['train.csv']}",
        f"--vocab_file={paths['vocab.txt']}",
        f"--bert_config_file={paths['config.json']}",
        "--max_seq_length=64",
        f"--train_batch_size={FINETUNE_BATCH}",
        "--num_train_epochs=100",
        f"--save_checkpoints_steps={save_every}",
        "--log_every_steps=1",
    ]


def finetune_backup_step(output_dir: Path) -> int:
    backup = output_dir / "backup"
    steps = (
        [int(p.name[5:]) for p in backup.glob("step-*") if (p / "state.json").exists()]
        if backup.is_dir()
        else []
    )
    return max(steps, default=0)


def build_finetune(paths: dict, work: Path, step: int) -> Path:
    """An unfinished fine-tuning run backed up at about `step` (SIGTERM once it passed it)."""
    output_dir = work / f"finetune_{step}"
    if finetune_backup_step(output_dir) >= step:
        return output_dir
    shutil.rmtree(output_dir, ignore_errors=True)
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        finetune_command(paths, output_dir, step), cwd=REPO, env=environment,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    while finetune_backup_step(output_dir) < step and process.poll() is None:
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    process.wait()
    if finetune_backup_step(output_dir) < step:
        raise RuntimeError(f"the fine-tuning run in {output_dir} stopped before step {step}")
    return output_dir


def finetune_time_to_first_update(paths: dict, output_dir: Path, restore_input: bool) -> tuple[int, float]:
    """(step resumed from, seconds from process start to its first new update) of a copy of output_dir."""
    step = finetune_backup_step(output_dir)
    trial = output_dir.parent / (output_dir.name + "_trial")
    shutil.rmtree(trial, ignore_errors=True)
    shutil.copytree(output_dir, trial)
    if not restore_input:  # a backup without the input position: the resume skips instead
        backup = trial / "backup" / f"step-{step}"
        for path in backup.glob("input.*"):
            path.unlink()
        state = json.loads((backup / "state.json").read_text())
        state["input"] = False
        (backup / "state.json").write_text(json.dumps(state))
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    process = subprocess.Popen(
        finetune_command(paths, trial, 10**9), cwd=REPO, env=environment,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    elapsed, lines = None, []
    for line in process.stdout:
        lines.append(line)
        if re.match(rf"step {step + 1}/", line):
            elapsed = time.perf_counter() - started
            break
    process.kill()
    process.wait()
    output = "".join(lines)
    expected = "(input position restored)" if restore_input else f"(skipping {step} batches)"
    if elapsed is None or expected not in output:
        raise RuntimeError(f"resume of {trial} did not go as expected:\n{output[-3000:]}")
    shutil.rmtree(trial)
    return step, elapsed


def finetune_main(args, work: Path) -> None:
    paths = prepare_finetune(work, args.finetune_rows)
    early = build_finetune(paths, work, args.finetune_early_step)
    late = build_finetune(paths, work, args.finetune_late_step)
    cases = {"early, restored": (early, True), "late, restored": (late, True), "late, skipped": (late, False)}
    times: dict[str, list[float]] = {}
    steps: dict[str, int] = {}
    for repeat in range(args.repeats):
        for name, (output_dir, restore) in cases.items():
            steps[name], seconds = finetune_time_to_first_update(paths, output_dir, restore)
            times.setdefault(name, []).append(seconds)
            print(
                f"  run {repeat + 1}: fine-tuning {name} at step {steps[name]}: {seconds:.2f} s", flush=True
            )
    results = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"\nfine-tuning, tiny classifier, {args.finetune_rows} CSV rows, batch {FINETUNE_BATCH}, seq 64: "
        f"seconds from process start to the first new update (medians of {args.repeats})"
    )
    for name, seconds in results.items():
        print(f"{name:16} step {steps[name]:6}  {seconds:7.2f} s")
    restored = results["late, restored"]
    print(f"late/early (restored): {restored / results['early, restored']:.2f}x")
    print(f"late skipped / late restored: {results['late, skipped'] / restored:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--early_step", type=int, default=100)
    parser.add_argument("--late_step", type=int, default=100_000)
    parser.add_argument("--train_batch_size", type=int, default=8)
    parser.add_argument("--work_dir", default="/tmp/bert_tf_bench_resume")
    parser.add_argument("--repeats", type=int, default=3, help="resumes of each, taking turns; medians")
    parser.add_argument("--only", choices=("pretrain", "finetune"), help="one half of the benchmark")
    parser.add_argument("--finetune_early_step", type=int, default=20)
    parser.add_argument("--finetune_late_step", type=int, default=2000)
    parser.add_argument("--finetune_rows", type=int, default=20_000)
    args = parser.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.only != "pretrain":
        finetune_main(args, work)
    if args.only == "finetune":
        return
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
