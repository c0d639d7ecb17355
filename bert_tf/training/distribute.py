"""`tf.distribute` strategy from command-line style arguments.

One function turns `--strategy`, `--tpu` and `--num_gpus` into the strategy that the
training loop runs under. The loop itself is the same for all of them.

Example:

>>> from bert_tf.training.distribute import get_strategy
>>> get_strategy("one_device").num_replicas_in_sync
1
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from bert_tf.errors import BertTfError

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker", "tpu")


def define_strategy_flags(flag_values) -> None:
    """--tpu, --strategy and --num_gpus, shared by `bert_tf.pretrain` and `bert_tf.finetune`."""
    from absl import flags

    flags.DEFINE_string(
        "tpu",
        None,
        "TPU name or address for TPUClusterResolver ('local' on a TPU VM).",
        flag_values=flag_values,
    )
    flags.DEFINE_enum(
        "strategy",
        "default",
        list(STRATEGIES),
        "Distribution strategy; multi_worker reads the cluster from TF_CONFIG.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer("num_gpus", 0, "GPUs for --strategy=one_device/mirrored.", flag_values=flag_values)


class StrategyError(BertTfError, ValueError):
    """A strategy request that cannot be satisfied; the message says what to change."""


def get_strategy(
    strategy: str = "default", tpu: str | None = None, num_gpus: int = 0
) -> tf.distribute.Strategy:
    """Creates the distribution strategy the training loop runs under.

    Args:
      strategy: "default" (no distribution; TPUStrategy when `tpu` is given),
        "one_device" (`/gpu:0` when `num_gpus` > 0, else `/cpu:0`), "mirrored" (all
        `num_gpus` GPUs, or the visible CPU/GPU devices when 0), "multi_worker"
        (MultiWorkerMirroredStrategy; the cluster comes from the `TF_CONFIG` environment
        variable) or "tpu".
      tpu: TPU name or address for `TPUClusterResolver` (`"local"` for a TPU VM); giving
        it implies strategy "tpu".
      num_gpus: GPUs to use with "one_device" and "mirrored".
    """
    strategy = (strategy or "default").lower()
    if strategy not in STRATEGIES:
        raise StrategyError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    if tpu and strategy not in ("default", "tpu"):
        raise StrategyError(f"--tpu={tpu} needs --strategy=tpu (or default), got --strategy={strategy}")
    if num_gpus < 0:
        raise StrategyError(f"num_gpus must be >= 0, got {num_gpus}")
    import keras

    if keras.backend.backend() != "tensorflow" and (tpu or strategy != "default" or num_gpus):
        raise StrategyError(
            f"--strategy={strategy} --tpu={tpu} --num_gpus={num_gpus} choose a tf.distribute strategy, "
            f"which needs the TensorFlow backend (Keras runs on {keras.backend.backend()}); leave these "
            "flags out, or unset KERAS_BACKEND"
        )

    if tpu or strategy == "tpu":
        return _tpu_strategy(tpu or "")
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "multi_worker":
        return _multi_worker_strategy()

    gpus = tf.config.list_logical_devices("GPU")
    if num_gpus > len(gpus):
        raise StrategyError(
            f"--num_gpus={num_gpus} but TensorFlow sees {len(gpus)} GPU(s); "
            "lower --num_gpus or check CUDA_VISIBLE_DEVICES"
        )
    if strategy == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus else "/cpu:0")
    # mirrored
    devices = [f"/gpu:{i}" for i in range(num_gpus)] if num_gpus else None
    return tf.distribute.MirroredStrategy(devices=devices)


def _tpu_strategy(tpu: str) -> tf.distribute.Strategy:
    # "" lets the resolver find the TPU from the environment (e.g. TPU_NAME on GCE).
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    except (OSError, ValueError, RuntimeError) as error:  # urllib's URLError is an OSError
        # A name is looked up through Google Cloud's metadata server and TPU API: off
        # Google Cloud (or without credentials) that fails with a network error that
        # never says it was about the TPU.
        raise StrategyError(
            f"--tpu={tpu or '(from $TPU_NAME)'}: the TPU could not be found ({error}); a TPU name is "
            "resolved through Google Cloud (its metadata server and the Cloud TPU API), which this machine "
            "cannot reach. On a TPU VM pass --tpu=local; elsewhere pass the TPU's address "
            "(--tpu=grpc://10.0.0.2:8470), or run on a Google Cloud VM with credentials "
            "(gcloud auth application-default login) in the TPU's project and zone"
        ) from None
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _multi_worker_strategy() -> tf.distribute.Strategy:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise StrategyError(
            "--strategy=multi_worker reads the cluster from the TF_CONFIG environment variable, "
            'which is not set; e.g. TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}\''
        )
    try:
        cluster = json.loads(raw)
    except json.JSONDecodeError as error:
        raise StrategyError(f"TF_CONFIG is not valid JSON ({error}): {raw!r}") from None
    if not isinstance(cluster, dict) or "cluster" not in cluster or "task" not in cluster:
        raise StrategyError(f"TF_CONFIG needs 'cluster' and 'task' entries, got {raw!r}")
    return tf.distribute.MultiWorkerMirroredStrategy()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints and logs (worker 0 / chief of a cluster)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type or isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def worker_id(strategy: tf.distribute.Strategy) -> int:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_id is None:
        return 0
    return int(resolver.task_id)


def input_pipeline(strategy: tf.distribute.Strategy) -> tuple[int, int, int]:
    """(input pipelines, this worker's pipeline id, replicas it feeds), as
    `distribute_datasets_from_function` numbers them: one pipeline per worker, the chief
    (if any) first."""
    replicas = strategy.num_replicas_in_sync
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type or isinstance(strategy, tf.distribute.TPUStrategy):
        return 1, 0, replicas
    cluster = resolver.cluster_spec().as_dict()
    workers = len(cluster.get("chief", [])) + len(cluster.get("worker", []))
    if workers <= 1:
        return 1, 0, replicas
    pipeline_id = int(resolver.task_id)
    if resolver.task_type == "worker" and "chief" in cluster:
        pipeline_id += 1
    return workers, pipeline_id, replicas // workers
