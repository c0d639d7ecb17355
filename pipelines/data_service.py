r"""tf.data service for the online pretraining pipeline: a dispatcher, workers, and the client side.

The raw text → masked batch work of `pipelines.pretraining_dataset` can run on other
machines' CPUs: start a dispatcher and any number of workers, then pass the dispatcher's
address to the trainer (`python -m bert_tf.pretrain --data_service_address=grpc://HOST:5050`):

    python -m pipelines.data_service --dispatcher_port=5050 --work_dir=gs://b/dispatcher
    python -m pipelines.data_service --worker --dispatcher=HOST:5050 --worker_port=5051

Sharding: dynamic (`ShardingPolicy.DYNAMIC`). The dispatcher hands out the pipeline's
source one split at a time (one file of one pass over the corpus), each to one worker, and
every trainer reads from the same job, in which each batch goes to exactly one consumer:
trainers (hosts of a multi-worker run) get distinct data, and a worker added or lost only
changes who reads the next split. A lost worker's split in progress is not read again.

Resume: the input position lives in the service, not in the checkpoint. A resumed trainer
joins its job again (named after the model_dir and the phase) and reads on from where the
job stands: the batches trained on after the last checkpoint are not replayed, and those a
stopped trainer had buffered are skipped. A job the service no longer holds (the
dispatcher restarted without --work_dir, or the job unread for longer than its
--job_gc_timeout_s) starts again at the first pass.
"""

from __future__ import annotations

import dataclasses
import hashlib
import socket

from absl import flags

from bert_tf import cli
from bert_tf.cli import setting
from bert_tf.errors import BertTfError, UsageError

# An unreachable dispatcher is reported after this long instead of retried for ever.
CONNECT_TIMEOUT_S = 5.0


class DataServiceError(BertTfError, ConnectionError):
    """The tf.data service cannot be reached or used; the message says how to fix it."""


def split_address(address: str, flag: str = "--data_service_address") -> tuple[str, int]:
    """(host, port) of `grpc://HOST:PORT` or `HOST:PORT`; a `UsageError` for anything else."""
    bare = address[len("grpc://") :] if address.startswith("grpc://") else address
    host, _, port = bare.rpartition(":")
    if "://" in bare or not host or not port.isdigit():
        raise UsageError(
            f"{flag}={address} is not an address of a tf.data service dispatcher; write grpc://HOST:PORT"
        )
    return host, int(port)


def check_reachable(
    address: str, timeout_s: float = CONNECT_TIMEOUT_S, flag: str = "--data_service_address"
) -> str:
    """The dispatcher's `grpc://HOST:PORT` once something listens there; a `DataServiceError`
    within `timeout_s` if nothing does (TensorFlow's client would retry for ever)."""
    host, port = split_address(address, flag)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise DataServiceError(
            f"no tf.data service dispatcher answers at {host}:{port} ({flag}={address}): "
            f"{reason} within {timeout_s:g} s; start one there with python -m pipelines.data_service "
            f"--dispatcher_port={port}, or pass the address of a running one"
        ) from None
    return f"grpc://{host}:{port}"


def job_name(model_dir: str, phase_index: int) -> str:
    """The service job of one phase of one run: a resumed run reads on in the same job."""
    digest = hashlib.sha256(model_dir.encode("utf-8")).hexdigest()[:16]
    return f"bert_tf-{digest}-phase{phase_index}"


def from_service(dataset, address: str, job: str, max_outstanding_requests: int | None = None):
    """`dataset`'s elements, computed by the service's workers and read in the shared `job`.

    Dynamic sharding: each split of the dataset's source (a file of a pass) goes to one
    worker, each element to one consumer of the job (see the module docstring).
    `max_outstanding_requests` bounds how many elements this consumer asks for ahead of its
    reading (None: tf.data's own choice), and so what a stopped consumer leaves unread.
    """
    import tensorflow as tf

    return dataset.apply(
        tf.data.experimental.service.distribute(
            processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC,
            service=check_reachable(address),
            job_name=job,
            max_outstanding_requests=max_outstanding_requests,
        )
    )


@dataclasses.dataclass(frozen=True)
class DataServiceConfig:
    """A dispatcher (`dispatcher_port`) or, with `worker`, a worker of `dispatcher`."""

    dispatcher_port: int = setting(5050, "The dispatcher's port.")
    work_dir: str | None = setting(
        None,
        "The dispatcher's journal (a path or gs://): a restarted dispatcher resumes its jobs from it.",
    )
    worker: bool = setting(False, "Start a worker instead of a dispatcher.")
    dispatcher: str | None = setting(None, "With --worker: the dispatcher's HOST:PORT.")
    worker_port: int = setting(5051, "With --worker: the worker's port.")
    worker_host: str | None = setting(
        None, "With --worker: the name trainers reach this worker by (default: this machine's host name)."
    )
    job_gc_timeout_s: float = setting(
        3600.0,
        "The dispatcher ends a job no trainer has read for this long; a trainer resumed later starts a "
        "new job, at the first pass.",
    )
    worker_timeout_s: float = setting(
        60.0, "The dispatcher drops a worker silent for this long; its clients read from the others."
    )

    def __post_init__(self) -> None:
        if self.worker and not self.dispatcher:
            raise UsageError("--worker needs --dispatcher=HOST:PORT, the address of the dispatcher")
        if self.dispatcher:
            split_address(self.dispatcher, "--dispatcher")
        for name in ("worker_timeout_s", "job_gc_timeout_s"):
            if getattr(self, name) <= 0:
                raise UsageError(f"--{name} must be > 0, got {getattr(self, name)}")


def start_dispatcher(settings: DataServiceConfig):
    """A started `DispatchServer` (fault tolerant with a `work_dir`), with the ops the pipeline uses.

    The dispatcher builds each job's graph (to hand out its splits) before any worker runs
    it, so it needs tensorflow-text's ops registered as much as the workers do.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops the pipeline's graph holds)

    config = tf.data.experimental.service.DispatcherConfig(
        port=settings.dispatcher_port,
        work_dir=settings.work_dir,
        fault_tolerant_mode=settings.work_dir is not None,
        worker_timeout_ms=int(settings.worker_timeout_s * 1000),
        job_gc_timeout_ms=int(settings.job_gc_timeout_s * 1000),
    )
    return tf.data.experimental.service.DispatchServer(config)


def start_worker(settings: DataServiceConfig):
    """A started `WorkerServer` of `settings.dispatcher`, with the ops the pipeline uses."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops the pipeline's graph holds)

    host, port = split_address(settings.dispatcher, "--dispatcher")
    check_reachable(f"{host}:{port}", flag="--dispatcher")
    config = tf.data.experimental.service.WorkerConfig(
        dispatcher_address=f"{host}:{port}",
        worker_address=f"{settings.worker_host or socket.gethostname()}:%port%",
        port=settings.worker_port,
    )
    return tf.data.experimental.service.WorkerServer(config)


define_flags = cli.settings_flags(DataServiceConfig)


def main(flag_values: flags.FlagValues, args: list[str]) -> None:
    settings = cli.settings_from_flags(DataServiceConfig, flag_values)
    if settings.worker:
        server = start_worker(settings)
        print(f"tf.data service worker on port {settings.worker_port} of {settings.dispatcher}", flush=True)
    else:
        server = start_dispatcher(settings)
        journal = (
            f", journal in {settings.work_dir}" if settings.work_dir else " (no --work_dir: jobs end with it)"
        )
        print(
            f"tf.data service dispatcher at grpc://{socket.gethostname()}:{settings.dispatcher_port}{journal}; "
            "Ctrl-C stops it",
            flush=True,
        )
    server.join()


def command() -> None:
    """`python -m pipelines.data_service`: a dispatcher, or with --worker a worker, until stopped."""
    cli.run(main, define_flags)


if __name__ == "__main__":
    command()
