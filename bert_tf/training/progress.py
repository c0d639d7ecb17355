"""What the training loop reports: a progress line, and scalars for TensorBoard and plots.

A run's scalars (loss, learning rate, speed, evaluation metrics) go to TensorBoard event
files under `RUN/logs` and, the same values, to `RUN/metrics.jsonl`: one JSON object per
report, `{"split": "train" | "eval", "step": N, "time": unix seconds, NAME: value, ...}`,
which `read_metrics` reads back and `python -m bert_tf.plot` draws. The display of the
other long steps is `bert_tf.progress_display`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from bert_tf import fileio
from bert_tf.progress_display import format_duration


def progress_line(
    step: int,
    total_steps: int,
    metrics: Mapping[str, float],
    learning_rate: float,
    *,
    fill_rate: float | None = None,
    rate: tuple[float, str] | None = None,
    tokens_per_second: float | None = None,
    eta: float | None = None,
    note: str | None = None,
) -> str:
    """The training progress line both drivers print (the pretraining loop and Keras `fit`).

    >>> progress_line(10, 100, {"loss": 7.5}, 1e-4, rate=(32.0, "seq/s"), eta=90)
    'step 10/100  loss 7.5000  lr 0.0001  32.0 seq/s  ETA 1m30s'
    """
    parts = [f"step {step}/{total_steps}", *(f"{name} {value:.4f}" for name, value in metrics.items())]
    parts.append(f"lr {learning_rate:.3g}")
    if fill_rate is not None:
        parts.append(f"fill {100 * fill_rate:.1f}%")
    if note:
        parts.append(note)
    if rate is not None:
        parts.append(f"{rate[0]:.1f} {rate[1]}")
    if tokens_per_second is not None:
        parts.append(f"{tokens_per_second:.0f} tok/s")
    if eta is not None:
        parts.append(f"ETA {format_duration(eta)}")
    return "  ".join(parts)


class ProgressReporter:
    """Prints one line per loop (metrics, sequences/s, ETA) and writes TensorBoard scalars.

    Metrics named `real_tokens` (non-padding tokens per step) and `fill_rate` (their
    fraction of the positions) are shown as real tokens/s and the fill in percent, the
    throughput that counts when batches are padded or packed.

    Example:

    >>> reporter = ProgressReporter(total_steps=100, global_batch_size=32, scalars=None, enabled=False)
    >>> reporter.start(0)
    >>> line = reporter.report(10, {"loss": 7.5}, learning_rate=1e-4)
    >>> line.startswith("step 10/100")
    True
    """

    def __init__(
        self,
        total_steps: int,
        global_batch_size: int,
        scalars: ScalarLog | None,
        enabled: bool = True,
        stream=None,
    ):
        self.total_steps = total_steps
        self.global_batch_size = global_batch_size
        self.enabled = enabled
        self.stream = stream or sys.stdout
        self._scalars = scalars
        self._last_time = None
        self._last_step = None
        self._loops = 0
        self.sequences_per_second: float | None = None  # of the last loop; None for the first
        self.real_tokens_per_second: float | None = None  # likewise, when `real_tokens` is reported

    def start(self, step: int) -> None:
        self._last_time = time.perf_counter()
        self._last_step = step
        self._loops = 0

    def report(self, step: int, metrics: Mapping[str, float], learning_rate: float) -> str:
        now = time.perf_counter()
        steps = step - self._last_step
        elapsed = max(now - self._last_time, 1e-9)
        self._last_time, self._last_step = now, step
        self._loops += 1
        sequences_per_second = steps * self.global_batch_size / elapsed
        self.sequences_per_second = sequences_per_second if self._loops > 1 else None
        tokens_per_second = None
        if "real_tokens" in metrics:
            tokens_per_second = steps * metrics["real_tokens"] / elapsed
        self.real_tokens_per_second = tokens_per_second if self._loops > 1 else None
        first = self._loops == 1  # tracing and compilation included: its speed says nothing
        line = progress_line(
            step,
            self.total_steps,
            {name: value for name, value in metrics.items() if name not in ("real_tokens", "fill_rate")},
            learning_rate,
            fill_rate=metrics.get("fill_rate"),
            rate=None if first else (sequences_per_second, "seq/s"),
            tokens_per_second=None if first else tokens_per_second,
            eta=None if first else (self.total_steps - step) * elapsed / max(steps, 1),
            note=f"{elapsed:.1f}s (incl. compile)" if first else None,
        )
        if self.enabled:
            print(line, file=self.stream, flush=True)
        if self._scalars is not None:
            scalars = {**metrics, "learning_rate": learning_rate}
            if self._loops > 1:
                scalars["sequences_per_second"] = sequences_per_second
                if tokens_per_second is not None:
                    scalars["real_tokens_per_second"] = tokens_per_second
            self._scalars.write(step, scalars)
        return line

    def close(self) -> None:
        if self._scalars is not None:
            self._scalars.close()


# What TensorBoard's scalar plugin writes; written directly because tf.summary.scalar
# needs the tensorboard package installed, and logging must not.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


def write_scalar(name: str, value: float) -> None:
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)


METRICS_FILE = "metrics.jsonl"


def log_dir(run_dir: str) -> str:
    """The TensorBoard folder of a run (a pretraining model_dir, a fine-tuning output_dir)."""
    return fileio.join(run_dir, "logs")


class ScalarLog:
    """Writes a run's scalars of one split to TensorBoard (`events_dir`) and to the run's
    `metrics.jsonl`, flushed at every `write`.

    `metrics.jsonl` is appended to (rewritten whole on object stores, which cannot append);
    a resumed run appends the steps it repeats again, and `read_metrics` keeps the last.

    >>> import tempfile
    >>> run = tempfile.mkdtemp()
    >>> log = ScalarLog(run, "train", events_dir=log_dir(run))
    >>> log.write(10, {"loss": 2.5, "learning_rate": 1e-4})
    >>> log.close()
    >>> [(m["split"], m["step"], m["loss"]) for m in read_metrics(run)]
    [('train', 10, 2.5)]
    """

    def __init__(self, run_dir: str, split: str, events_dir: str, step_offset: int = 0):
        self.path = fileio.join(run_dir, METRICS_FILE)
        self.split = split
        self.events_dir = events_dir
        # Added to every step: a run of several fits, each counting its updates from 0.
        self.step_offset = step_offset
        self._writer = None

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        step += self.step_offset
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.events_dir)
        with self._writer.as_default(step=step):
            for name, value in scalars.items():
                write_scalar(name, value)
        self._writer.flush()
        values = {name: float(value) for name, value in scalars.items()}
        # json.dumps writes NaN and Infinity, which json.loads (read_metrics) reads back.
        _append_report(self.path, {"split": self.split, "step": int(step), **values})

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


RUN_SPLIT = "run"  # the reports that say which program trained, from which step
BASELINE_SPLIT = "baseline"  # a fine-tuning run's baseline scores, drawn beside the eval curves


def record_run(run_dir: str, program: str, step: int) -> None:
    """Notes in the run's metrics.jsonl that `program` trains from update `step` on (a start,
    or a resume): what `python -m bert_tf.plot` names the run by."""
    fileio.makedirs(run_dir)
    _append_report(
        fileio.join(run_dir, METRICS_FILE), {"split": RUN_SPLIT, "step": int(step), "program": program}
    )


def _append_report(path: str, report: dict) -> None:
    """Appends `report`, stamped with the time, as a line of a metrics.jsonl (rewritten whole on
    object stores, which cannot append)."""
    line = json.dumps(
        {"split": report["split"], "step": report["step"], "time": round(time.time(), 3), **report}
    )
    if fileio.scheme(path) == "":  # a local file: appended to
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    else:
        before = fileio.read_text(path) if fileio.exists(path) else ""
        fileio.write_text(path, before + line + "\n")


def read_metrics(run_dir: str) -> list[dict]:
    """The reports of a run's `metrics.jsonl`, by split and step; where a resumed run
    reported a step again, its last report. A line cut short by a crash is skipped."""
    path = fileio.join(run_dir, METRICS_FILE)
    reports: dict[tuple[str, int], dict] = {}
    for line in fileio.read_text(path).splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue
        if isinstance(report, dict) and {"split", "step"} <= report.keys():
            reports[report["split"], int(report["step"])] = report
    return [reports[key] for key in sorted(reports)]


def remove_metrics(run_dir: str) -> None:
    """Removes a run's TensorBoard folder and metrics.jsonl (a fresh start in an old folder)."""
    fileio.rmtree(log_dir(run_dir))
    if fileio.exists(fileio.join(run_dir, METRICS_FILE)):
        fileio.remove(fileio.join(run_dir, METRICS_FILE))


def read_scalars(log_dir: str) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} of the scalars in the TensorBoard event files of `log_dir`."""
    from tensorflow.core.util import event_pb2

    scalars: dict[str, list[tuple[int, float]]] = {}
    for name in fileio.listdir(log_dir):
        if fileio.isdir(fileio.join(log_dir, name)):
            continue
        for record in tf.data.TFRecordDataset(fileio.join(log_dir, name)):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                number = (
                    float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                )
                scalars.setdefault(value.tag, []).append((int(event.step), number))
    return scalars
