"""The offline pipelines on Apache Beam: the same work spread over many machines.

`python -m pipelines.create_pretraining_data --runner=...` and
`python -m pipelines.build_vocab --runner=...` run as Beam pipelines (`generate`,
`vocab`) on any Beam runner: DirectRunner on this machine, DataflowRunner, or a Flink or
Spark cluster through the portable runner. Without `--runner` the programs are the
one-process ones and import nothing of Beam; this module is light too (Beam is imported
by its submodules), so that `require_beam` can say how to install it.
"""

from __future__ import annotations

import logging

from bert_tf.errors import UsageError

INSTALL_HINT = 'pip install "bert_tf[beam]"'


def require_beam() -> None:
    """Raises a `UsageError` naming the install command when Apache Beam is not installed."""
    # Beam's import warns, on the root logger, that Google Cloud's clients are not installed:
    # nothing a run on other runners needs (and DataflowRunner says what it lacks).
    root = logging.getLogger()
    quiet = _DropMessage("apitools not found")
    root.addFilter(quiet)
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        raise UsageError(
            f"--runner runs the program on Apache Beam, which is not installed: {INSTALL_HINT}"
        ) from None
    finally:
        root.removeFilter(quiet)


class _DropMessage(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def quiet_logs(beam_args: list[str]) -> list[str]:
    """Holds Beam's own log lines to errors, here and in its worker processes (unless the
    options set their level); returns the options to run with.

    Its notes (workers starting and stopping, options it passes them that they do not use)
    say nothing a user of these programs can act on; its errors still show.
    """
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    if any(arg.split("=")[0] == "--default_sdk_harness_log_level" for arg in beam_args):
        return beam_args
    return [*beam_args, "--default_sdk_harness_log_level=ERROR"]
