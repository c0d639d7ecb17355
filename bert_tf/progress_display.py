"""The progress display of every long step that is not a training update: generating data,
counting words for a vocab, counting, evaluating and predicting a fine-tuning task's data,
extracting features, exporting.

`Progress` shows done/total, the share done, the rate and the ETA where the total is known.
On a terminal it is one line redrawn in place; otherwise (a log file, a pipe) a plain line
every `BERT_TF_PROGRESS_SECONDS` seconds (10 by default), never a carriage return. Both end
with a line of the total, the time taken and the mean rate. `TimedStep` announces a step that
cannot count its progress and says how long it took. Both write to stderr.
"""

from __future__ import annotations

import os
import sys
import time

from bert_tf import cli


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{seconds:02d}s"
    return f"{seconds}s"


def is_terminal(stream) -> bool:
    """Whether `stream` shows on a terminal (stderr: the program's, behind `bert_tf.cli`'s filter)."""
    if stream is sys.stderr:
        return cli.stderr_is_terminal()
    return bool(getattr(stream, "isatty", lambda: False)())


_BYTE_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


def _amounts(values: list[float], unit: str) -> str:
    """`values` joined by "/", then the unit. Counts as integers (12,345); bytes in the unit
    that suits the last value (12.5/204.8 MB), with one decimal."""
    if unit != "bytes":
        text = "/".join(
            f"{value:,.0f}" if value >= 100 else f"{value:,.{int(value != int(value))}f}" for value in values
        )
        return f"{text} {unit}" if unit else text
    scale, name = next(((s, n) for s, n in _BYTE_UNITS if values[-1] >= s), (1, "B"))
    return "/".join(f"{value / scale:,.{int(scale > 1)}f}" for value in values) + f" {name}"


def _duration(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else format_duration(seconds)


class Progress:
    """A progress display on stderr: `update(done)` as the work goes, `close()` at the end.

    `total` (in `unit`s, None if unknown) gives the share done and the ETA; `unit="bytes"`
    shows kB, MB or GB, whichever suits the total; `note` adds a
    few words of the step's own (e.g. "1,024 instances written"). `interval`: seconds
    between the plain lines when the stream is not a terminal (default: the environment's
    `BERT_TF_PROGRESS_SECONDS`, else 10).

    Example:

    >>> import io
    >>> stream = io.StringIO()  # not a terminal: plain lines, no carriage return
    >>> bar = Progress("counting", total=200, unit="lines", stream=stream, interval=0)
    >>> bar.update(50)
    >>> bar.close()
    >>> print(stream.getvalue(), end="")
    counting: 50/200 lines (25%)  ... lines/s  ETA ...
    counting: 50 lines in ...s (... lines/s)
    """

    TERMINAL_INTERVAL = 0.2  # seconds between redraws in place

    def __init__(
        self,
        label: str,
        total: float | None = None,
        unit: str = "",
        stream=None,
        interval: float | None = None,
        enabled: bool = True,
    ):
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.in_place = is_terminal(self.stream)
        if interval is None:
            interval = float(os.environ.get("BERT_TF_PROGRESS_SECONDS", 10))
        self.interval = min(interval, self.TERMINAL_INTERVAL) if self.in_place else interval
        self.done: float = 0
        self.note = ""
        self._started = time.perf_counter()
        self._next_line = self._started + self.interval
        self._drawn = False  # a line in place waits for its end

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._started

    def update(self, done: float, note: str = "") -> None:
        """`done` units so far (not an increment); draws a line when one is due."""
        self.done, self.note = done, note
        now = time.perf_counter()
        if not self.enabled or now < self._next_line:
            return
        self._next_line = now + self.interval
        elapsed = max(now - self._started, 1e-9)
        if self.total:
            share = f" ({100 * min(done / self.total, 1.0):.0f}%)"
            parts = [f"{self.label}: {_amounts([done, self.total], self.unit)}{share}"]
        else:
            parts = [f"{self.label}: {_amounts([done], self.unit)}"]
        parts.append(f"{_amounts([done / elapsed], self.unit)}/s")
        if self.total and done > 0:
            parts.append(f"ETA {format_duration(max(self.total - done, 0) * elapsed / done)}")
        self._write("  ".join(parts + ([note] if note else [])))

    def close(self, note: str | None = None) -> None:
        """The closing line: the total, the time taken, the mean rate, and `note` (by
        default the last update's)."""
        if not self.enabled:
            return
        note = self.note if note is None else note
        elapsed = max(self.seconds, 1e-9)
        line = (
            f"{self.label}: {_amounts([self.done], self.unit)} in {_duration(elapsed)} "
            f"({_amounts([self.done / elapsed], self.unit)}/s)"
        )
        self._write("  ".join([line] + ([note] if note else [])))
        if self.in_place:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def _write(self, line: str) -> None:
        if self.in_place:
            self.stream.write("\r" + line + "\033[K")  # over the last line, its tail cleared
            self._drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *error) -> None:
        if error[0] is None:
            self.close()
        elif self._drawn:  # the error's message starts on a line of its own
            self.stream.write("\n")
            self.stream.flush()


class TimedStep:
    """Announces a step that cannot count its progress, and says how long it took.

    On a terminal the closing line replaces the announcement; otherwise both are plain
    lines. `note` (set inside the block) is added to the closing line.

    >>> import io
    >>> stream = io.StringIO()
    >>> with TimedStep("learning the vocab", stream=stream) as phase:
    ...     phase.note = "2,000 tokens"
    >>> print(stream.getvalue(), end="")
    learning the vocab ...
    learning the vocab: done in ...s  2,000 tokens
    """

    def __init__(self, what: str, stream=None, enabled: bool = True):
        self.what, self.enabled, self.note = what, enabled, ""
        self.stream = stream or sys.stderr
        self.in_place = is_terminal(self.stream)

    def __enter__(self) -> TimedStep:
        self._started = time.perf_counter()
        if self.enabled:
            self.stream.write(f"{self.what} ..." + ("" if self.in_place else "\n"))
            self.stream.flush()
        return self

    def __exit__(self, *error) -> None:
        if not self.enabled:
            return
        if error[0] is not None:  # the error's message starts on a line of its own
            self.stream.write("\n" if self.in_place else "")
        else:
            took = _duration(time.perf_counter() - self._started)
            line = "  ".join([f"{self.what}: done in {took}"] + ([self.note] if self.note else []))
            self.stream.write(("\r" + line + "\033[K" if self.in_place else line) + "\n")
        self.stream.flush()
