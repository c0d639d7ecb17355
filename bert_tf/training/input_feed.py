"""The loop's input: one pipeline per worker, whose position is saved with each checkpoint.

A resumed run must see the batches an uninterrupted run would have seen. Rebuilding the
dataset and skipping the consumed batches gives that, but costs as much as the reading,
tokenizing and masking of every skipped batch: hours at step 900,000. Instead each worker
saves its pipeline's iterator (tf.data's own iterator checkpoint: the positions in the
sources and the buffered elements, ~11 MB with the 10,000-sequence shuffle buffer) next to
every model checkpoint, and a resumed run restores it: constant time whatever the step.
(tf.data's symbolic checkpoint option, which saves only positions, makes a shuffle 25-50x
slower, raw text and TFRecords alike: the default, explicit checkpoint is used.)
The skip is kept as the fallback for a model_dir without a saved position (a run saved by
an older version, or restarted on another number of workers), and says so.

Each worker iterates its own host dataset and hands one batch to each of its replicas
(`experimental_distribute_values_from_function`), the same assignment as
`distribute_datasets_from_function`; the distributed iterators of `tf.distribute` cannot
be checkpointed, a host iterator can.

Layout: `model_dir/input_state/worker_{i}/phase{k}-{step}.{index,data-*}`.

Batches from tf.data service (`served`) have their position in the service's job, not
here: nothing is saved, and a resumed feed reads on in the job (`pipelines.data_service`
says what that replays and skips) instead of skipping batches it would take from others.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tensorflow as tf

from bert_tf import fileio
from bert_tf.training import distribute

INPUT_STATE_DIR = "input_state"


def distributed_batch(strategy: tf.distribute.Strategy, iterator):
    """Inside the step function: the next batch of each of this worker's replicas, as
    per-replica values (consecutive batches to consecutive replicas)."""
    _, pipeline_id, local_replicas = distribute.input_pipeline(strategy)
    batches = [next(iterator) for _ in range(local_replicas)]
    if local_replicas == 1 and strategy.num_replicas_in_sync == 1:
        return batches[0]
    first_replica = pipeline_id * local_replicas
    return strategy.experimental_distribute_values_from_function(
        lambda context: batches[context.replica_id_in_sync_group - first_replica]
    )


class InputFeed:
    """The batches of one phase for this worker's replicas, restorable at a saved step."""

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
        model_dir: str,
        phase_index: int,
        max_to_keep: int = 3,
        served: bool = False,
    ):
        self.strategy = strategy
        self.num_pipelines, self.pipeline_id, self.local_replicas = distribute.input_pipeline(strategy)
        self.dataset_fn = dataset_fn
        self.state_dir = fileio.join(model_dir, INPUT_STATE_DIR, f"worker_{self.pipeline_id}")
        self.phase_index = phase_index
        self.max_to_keep = max_to_keep
        self.served = served
        self.iterator = None
        self._warned = False

    def _dataset(self) -> tf.data.Dataset:
        context = tf.distribute.InputContext(
            num_input_pipelines=self.num_pipelines,
            input_pipeline_id=self.pipeline_id,
            num_replicas_in_sync=self.strategy.num_replicas_in_sync,
        )
        return self.dataset_fn(context)

    def _prefix(self, step: int) -> str:
        return fileio.join(self.state_dir, f"phase{self.phase_index}-{step}")

    def start(self, step: int, steps_done: int, verbose: bool = False) -> str:
        """Positions the feed after `steps_done` steps of this phase (global step `step`).

        Returns how: "start", "restored", "skipped" or "served" (read on in the service's job).
        """
        dataset = self._dataset()
        if self.served:
            self.iterator = iter(dataset.prefetch(tf.data.AUTOTUNE))
            return "served" if steps_done else "start"
        if not steps_done:
            self.iterator = iter(dataset.prefetch(tf.data.AUTOTUNE))
            return "start"
        prefix = self._prefix(step)
        if fileio.exists(prefix + ".index"):
            iterator = iter(dataset.prefetch(tf.data.AUTOTUNE))
            try:
                tf.train.Checkpoint(iterator=iterator).read(prefix).assert_consumed()
            except (tf.errors.OpError, AssertionError, ValueError) as error:
                print(
                    f"could not restore the input position {prefix} ({error}); skipping instead", flush=True
                )
            else:
                self.iterator = iterator
                return "restored"
        elif verbose:
            print(
                f"no saved input position for step {step} in {self.state_dir}: skipping the "
                f"{steps_done} batches already seen (slow for a late step)",
                flush=True,
            )
        # Each step takes one batch for every replica this pipeline feeds.
        skipped = dataset.skip(steps_done * self.local_replicas)
        self.iterator = iter(skipped.prefetch(tf.data.AUTOTUNE))
        return "skipped"

    def save(self, step: int) -> str | None:
        """Writes this worker's position at `step`; keeps the latest `max_to_keep`.

        A pipeline whose state cannot be saved is not a reason to stop training: it says so
        once, and a resume from this step skips the consumed batches instead.
        """
        if self.served:
            return None
        try:
            prefix = tf.train.Checkpoint(iterator=self.iterator).write(self._prefix(step))
        except (tf.errors.OpError, ValueError) as error:
            if not self._warned:
                print(
                    f"warning: the input position cannot be saved ({error}); a resume will skip batches",
                    flush=True,
                )
                self._warned = True
            return None
        self._prune()
        return prefix

    def _prune(self) -> None:
        pattern = re.compile(r"phase(\d+)-(\d+)\.index$")
        saved = []
        for path in fileio.glob(fileio.join(self.state_dir, "phase*-*.index")):
            match = pattern.search(path)
            if match:
                saved.append((int(match.group(2)), path[: -len(".index")]))
        for _, prefix in sorted(saved)[: -self.max_to_keep]:
            for path in fileio.glob(prefix + ".*"):
                fileio.remove(path)
