"""Beam's pipeline options from a command line, checked before anything runs; counters back.

A program's own flags are absl's; what is left on its command line is Beam's
(`--direct_num_workers=2`, `--project=...`, `--flink_master=...`): `pipeline_options`
parses it with Beam's own parser and refuses, in one line each, a runner Beam does not
know, an option no Beam runner has, a value Beam cannot parse, and options the runner's
own validation rejects (DataflowRunner without --project, ...), all before a file is read.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
from apache_beam.runners.runner import PipelineRunner, create_runner

from bert_tf.errors import UsageError

# The namespace of the counters the pipelines' steps keep (`beam.metrics.Metrics.counter`).
NAMESPACE = "bert_tf"


@contextlib.contextmanager
def _quiet_beam_options():
    """Beam's options module logs what the errors below say again (and argparse prints usage)."""
    beam_logger = logging.getLogger("apache_beam.options")
    level = beam_logger.level
    beam_logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stderr(io.StringIO()) as printed:
            yield printed
    finally:
        beam_logger.setLevel(level)


def pipeline_options(runner_name: str, args: Sequence[str]) -> tuple[PipelineRunner, PipelineOptions]:
    """The runner and the options of a pipeline, from `--runner` and Beam's options in `args`."""
    args = list(args)
    try:
        runner = create_runner(runner_name)
    except ValueError:
        raise UsageError(
            f"--runner={runner_name} is not a Beam runner; use one of {', '.join(StandardOptions.KNOWN_RUNNER_NAMES)} "
            "or a PipelineRunner's full class name"
        ) from None
    except ImportError as error:  # DataflowRunner without apache-beam[gcp], ...
        raise UsageError(f"--runner={runner_name}: {error}") from None
    options = PipelineOptions(args, runner=runner_name)
    with _quiet_beam_options() as printed:
        try:
            everything = options.get_all_options(retain_unknown_options=True)
            known = options.get_all_options()
        except SystemExit:  # argparse's way of refusing a value
            message = printed.getvalue().strip().splitlines()[-1:] or ["a value Beam cannot parse"]
            raise UsageError(
                f"Beam pipeline options {' '.join(args)}: {message[0].removeprefix('error: ')}"
            ) from None
        unknown = sorted(set(everything) - set(known))
        if unknown:
            raise UsageError(
                f"unknown flag(s) {', '.join('--' + name for name in unknown)}: neither this program's (see "
                "--helpshort) nor a Beam pipeline option"
            )
        problems = PipelineOptionsValidator(options, runner).validate()
    if problems:
        raise UsageError(f"--runner={runner_name} rejects these Beam options: {' '.join(problems)}")
    return runner, options


def run(pipeline: beam.Pipeline) -> dict[str, int]:
    """Runs `pipeline` to its end; returns its counters (NAMESPACE) by name."""
    result = pipeline.run()
    result.wait_until_finish()
    counters = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        try:
            value = counter.committed
        except Exception:  # runners that keep attempted values only
            value = None
        if value is None:
            value = counter.attempted
        name = counter.key.metric.name
        counters[name] = counters.get(name, 0) + int(value or 0)
    return counters
