"""What the training loop reports: a progress line and TensorBoard scalars."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

import tensorflow as tf
from tensorflow.core.framework import summary_pb2


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{seconds:02d}s"
    return f"{seconds}s"


class ProgressReporter:
    """Prints one line per loop (metrics, sequences/s, ETA) and writes TensorBoard scalars.

    Example:

    >>> reporter = ProgressReporter(total_steps=100, global_batch_size=32, log_dir=None, enabled=False)
    >>> reporter.start(0)
    >>> line = reporter.report(10, {"loss": 7.5}, learning_rate=1e-4)
    >>> line.startswith("step 10/100")
    True
    """

    def __init__(
        self,
        total_steps: int,
        global_batch_size: int,
        log_dir: str | None,
        enabled: bool = True,
        stream=None,
    ):
        self.total_steps = total_steps
        self.global_batch_size = global_batch_size
        self.enabled = enabled
        self.stream = stream or sys.stdout
        self._writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        self._last_time = None
        self._last_step = None
        self._loops = 0
        self.sequences_per_second: float | None = None  # of the last loop; None for the first

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
        parts = [f"step {step}/{self.total_steps}"]
        parts += [f"{name} {value:.4f}" for name, value in metrics.items()]
        parts.append(f"lr {learning_rate:.3g}")
        if self._loops == 1:
            # The first loop includes tracing and compilation; its speed says nothing.
            parts.append(f"{elapsed:.1f}s (incl. compile)")
        else:
            eta = (self.total_steps - step) * elapsed / max(steps, 1)
            parts.append(f"{sequences_per_second:.1f} seq/s")
            parts.append(f"ETA {format_duration(eta)}")
        line = "  ".join(parts)
        if self.enabled:
            print(line, file=self.stream, flush=True)
        if self._writer is not None:
            with self._writer.as_default(step=step):
                for name, value in metrics.items():
                    write_scalar(name, value)
                write_scalar("learning_rate", learning_rate)
                if self._loops > 1:
                    write_scalar("sequences_per_second", sequences_per_second)
            self._writer.flush()
        return line

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


# What TensorBoard's scalar plugin writes; written directly because tf.summary.scalar
# needs the tensorboard package installed, and logging must not.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


def write_scalar(name: str, value: float) -> None:
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)


def log_dir(model_dir: str) -> str:
    return os.path.join(model_dir, "logs")


def read_scalars(log_dir: str) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} of the scalars in the TensorBoard event files of `log_dir`."""
    from tensorflow.core.util import event_pb2

    scalars: dict[str, list[tuple[int, float]]] = {}
    for name in sorted(os.listdir(log_dir)):
        for record in tf.data.TFRecordDataset(os.path.join(log_dir, name)):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                scalars.setdefault(value.tag, []).append((int(event.step), number))
    return scalars
