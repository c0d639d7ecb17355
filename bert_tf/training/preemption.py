"""Stopping cleanly when the machine is taken away: save where the run is, say so, exit 143.

Preemptible GPU machines and Cloud TPU VMs send SIGTERM and allow a short grace period;
Ctrl-C sends SIGINT. Inside `StopSignals` neither kills the process: the signal is noted,
the training loop finishes the loop it is in (TensorFlow runs it to the end anyway),
saves a checkpoint at the step reached, and raises `Preempted`; the `model.fit` runs
(fine-tuning, pretraining on JAX: `bert_tf.training.callbacks.TrainingBackup`) do the same
after the update in which the signal came. The command-line programs turn that into exit status 128 + the signal's number (143 for SIGTERM, 130 for Ctrl-C, what
a shell reports for a process the signal ended, and what fine-tuning uses), distinct from
success (0) and from errors (1, 2), so a job scheduler knows to rerun the same command,
which resumes. A second Ctrl-C stops at once, without saving.

Example:

>>> import os, signal
>>> with StopSignals() as signals:
...     os.kill(os.getpid(), signal.SIGTERM)
...     signals.received
'SIGTERM'
"""

from __future__ import annotations

import os
import signal
import threading

from bert_tf.errors import RunStopped

EXIT_PREEMPTED = 128 + signal.SIGTERM  # 143


class Preempted(RunStopped):
    """The run stopped on a signal after saving a checkpoint; rerunning resumes it.

    The command-line programs print its message and exit with `exit_code`: 128 + the
    signal's number."""

    exit_code = EXIT_PREEMPTED

    def __init__(self, message: str, signal_name: str = "SIGTERM"):
        super().__init__(message)
        self.exit_code = 128 + signal.Signals[signal_name]


class StopSignals:
    """Context manager that turns SIGTERM and SIGINT into a flag, `received` (the signal's name).

    Only the main thread can install signal handlers; elsewhere it does nothing. `when`
    ends the line said on a signal ("received SIGTERM: saving a checkpoint WHEN").
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, enabled: bool = True, when: str = "after this loop, then stopping"):
        self.received: str | None = None
        self.enabled = enabled
        self.when = when
        self._previous: dict = {}

    def _handle(self, number, frame) -> None:
        if self.received and number == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: the user does not want to wait
        self.received = signal.Signals(number).name
        # os.write, not print: the signal may have interrupted a print to the same stream,
        # and a buffered stream refuses a reentrant write.
        os.write(2, f"\nreceived {self.received}: saving a checkpoint {self.when}\n".encode())

    def __enter__(self) -> StopSignals:
        if self.enabled and threading.current_thread() is threading.main_thread():
            for number in self.SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()
