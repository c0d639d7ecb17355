r"""Draws the curves of one or several runs to a PNG: loss, learning rate, evaluation metrics.

    python -m bert_tf.plot runs/demo                          # pretraining: runs/demo/metrics.png
    python -m bert_tf.plot out/mrpc_lr2e-5 out/mrpc_lr5e-5 --output=mrpc.png   # runs side by side

A run folder is a pretraining --model_dir or a fine-tuning --output_dir: both keep every
report of the run in `metrics.jsonl` (the scalars TensorBoard shows under `logs/`). Each
training scalar (loss, learning rate, ...) and each evaluation metric gets a panel, with a
line per run named by its folder; throughput and padding figures are left out unless
named with --metrics. A fine-tuning run's baseline (the bag-of-words model it should beat)
is a dashed line on its eval panels. Without --output the picture is written into the first run folder.
Its title names each run: the program that trained it (the command line's `bert_tf.finetune`
or `bert_tf.pretrain`, or a Python `fit(output_dir=...)`), when it started, and its updates.
"""

from __future__ import annotations

import io
import math

from absl import flags

# fileio (TensorFlow's file systems) is imported where used: TensorFlow must load after
# cli.run has set up the filter of its native start-up noise.
from bert_tf import cli
from bert_tf.errors import UsageError

# Training scalars that describe speed and padding, not learning: drawn only when asked.
SPEED = ("sequences_per_second", "real_tokens_per_second", "examples_per_second", "real_tokens", "fill_rate")
COLUMNS = 3
RUN_SPLIT = "run"  # bert_tf.training.progress.RUN_SPLIT: the reports naming the program that trained
BASELINE_SPLIT = "baseline"  # bert_tf.training.progress.BASELINE_SPLIT: drawn on the eval panels


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    flags.DEFINE_string(
        "output",
        None,
        "Where the PNG goes (default: metrics.png in the first run folder).",
        flag_values=flag_values,
    )
    flags.DEFINE_list(
        "metrics",
        None,
        "Panels to draw, as SPLIT/NAME or NAME (e.g. train/loss,eval/accuracy); default: "
        "every training scalar but speed and padding, and every evaluation metric.",
        flag_values=flag_values,
    )


def read_runs(run_dirs: list[str]) -> dict[str, list[dict]]:
    """{run folder: its reports}, each folder checked to hold a run's metrics.jsonl."""
    from bert_tf import fileio
    from bert_tf.training.progress import METRICS_FILE, read_metrics

    runs = {}
    for run_dir in run_dirs:
        if not fileio.isfile(fileio.join(run_dir, METRICS_FILE)):
            what = "no such folder" if not fileio.isdir(run_dir) else f"it has no {METRICS_FILE}"
            raise UsageError(
                f"{run_dir} is not a run folder ({what}); give a pretraining --model_dir or a "
                "fine-tuning --output_dir of a run that has reported at least once"
            )
        runs[run_dir] = read_metrics(run_dir)
    return runs


def panels(runs: dict[str, list[dict]], wanted: list[str] | None) -> list[tuple[str, str]]:
    """The (split, metric) pairs to draw, training scalars first."""
    found: dict[tuple[str, str], None] = {}
    for reports in runs.values():
        for report in reports:
            if report["split"] in (RUN_SPLIT, BASELINE_SPLIT):
                continue
            for name in report:
                if name not in ("split", "step", "time"):
                    found[report["split"], name] = None
    order = {"train": 0, "eval": 1}
    available = sorted(found, key=lambda key: (order.get(key[0], 2), key[1] != "loss", key[1]))
    if not wanted:
        return [key for key in available if not (key[0] == "train" and key[1] in SPEED)]
    chosen = []
    for name in wanted:
        split, _, metric = name.rpartition("/")
        matches = [key for key in available if key[1] == metric and split in ("", key[0])]
        if not matches:
            names = ", ".join(f"{s}/{m}" for s, m in available)
            raise UsageError(f"--metrics={name}: no run reported it; the runs have {names}")
        chosen += [key for key in matches if key not in chosen]
    return chosen


def plot(run_dirs: list[str], output: str | None = None, metrics: list[str] | None = None) -> str:
    """Draws the runs' panels to `output` (a PNG; default metrics.png in the first run
    folder), written whole or not at all; returns its path."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    from matplotlib import pyplot

    from bert_tf import fileio

    runs = read_runs(run_dirs)
    keys = panels(runs, metrics)
    if not keys:
        raise UsageError(f"{', '.join(run_dirs)}: no scalars reported yet")
    rows = math.ceil(len(keys) / COLUMNS)
    columns = min(COLUMNS, len(keys))
    figure, axes = pyplot.subplots(rows, columns, figsize=(4.5 * columns, 3.2 * rows), squeeze=False)
    names = _labels(run_dirs)
    for axis, (split, metric) in zip(axes.flat, keys, strict=False):
        for run_dir, reports in runs.items():
            points = [(r["step"], r[metric]) for r in reports if r["split"] == split and metric in r]
            if points:
                steps, values = zip(*points, strict=True)
                line = axis.plot(
                    steps, values, marker="o" if len(points) < 20 else None, label=names[run_dir]
                )
                baseline = [r[metric] for r in reports if r["split"] == BASELINE_SPLIT and metric in r]
                if split == "eval" and baseline:  # the score a fine-tuned model should beat
                    axis.axhline(
                        baseline[-1],
                        color=line[0].get_color(),
                        linestyle="--",
                        label=f"{names[run_dir]}: baseline",
                    )
        axis.set_title(f"{split} {metric}")
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
        if metric == "learning_rate":
            axis.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    for axis in list(axes.flat)[len(keys) :]:
        axis.set_visible(False)
    if len(runs) > 1:
        axes.flat[0].legend(fontsize="small")
    for axis in axes.flat[: len(keys)]:
        if any(line.get_linestyle() == "--" for line in axis.get_lines()):
            axis.legend(fontsize="small")  # the baseline's dashed line, named
    figure.suptitle(
        "\n".join(describe_run(run_dir, reports) for run_dir, reports in runs.items()), fontsize="small"
    )
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    pyplot.close(figure)
    path = output or fileio.join(run_dirs[0], "metrics.png")
    fileio.write_bytes(path, buffer.getvalue())
    return path


def describe_run(run_dir: str, reports: list[dict]) -> str:
    """Which run a folder's curves are: the program that trained, when, and over which updates.

    >>> describe_run("runs/a", [{"split": "run", "step": 0, "time": 0.0, "program": "bert_tf.finetune"},
    ...                         {"split": "train", "step": 50, "time": 60.0, "loss": 1.0}])
    'runs/a: bert_tf.finetune, 1970-01-01 00:00 UTC, updates 0 to 50'
    """
    import time

    programs = list(
        dict.fromkeys(r["program"] for r in reports if r["split"] == RUN_SPLIT and "program" in r)
    )
    steps = [r["step"] for r in reports]
    started = min((r["time"] for r in reports if "time" in r), default=None)
    parts = [", then ".join(programs) if programs else "a run that did not record its program"]
    if started is not None:
        parts.append(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)))
    if steps:
        parts.append(f"updates {min(steps)} to {max(steps)}")
    return f"{run_dir}: {', '.join(parts)}"


def _labels(run_dirs: list[str]) -> dict[str, str]:
    """Each run's legend: its folder's name, or its path where two names are the same."""
    from bert_tf import fileio

    names = [fileio.basename(run_dir.rstrip("/")) for run_dir in run_dirs]
    unique = len(set(names)) == len(names)
    return {run_dir: name if unique else run_dir for run_dir, name in zip(run_dirs, names, strict=True)}


def main(flag_values: flags.FlagValues, run_dirs: list[str]) -> None:
    if not run_dirs:
        raise UsageError("give one or more run folders, e.g. python -m bert_tf.plot runs/demo")
    path = plot(run_dirs, flag_values.output, flag_values.metrics)
    cli.result(f"wrote {path}")


def command() -> None:
    """The `bert-tf-plot` command (setup.py's entry point), also `python -m bert_tf.plot`."""
    cli.run(main, define_flags, positional="RUN_DIR ...")


if __name__ == "__main__":
    command()
