"""The position of `model.fit`'s input, saved with each backup so that a resume continues it.

Keras iterates a `tf.data` dataset with an iterator of its own. On the TensorFlow backend
the step function draws the batch itself, so after an update that iterator is exactly past
the batches trained on. `InputPosition.track(dataset)` returns the same dataset but keeps
the iterators Keras makes of it: `save(prefix)` writes tf.data's iterator checkpoint (the
sources' positions, the shuffle buffer, the batches in flight) and, after
`restore_from(prefix)`, every iterator Keras makes starts from that checkpoint. A resumed
run so continues where the saved one was, instead of reading, tokenizing and batching
again every batch already seen (`dataset.skip`).

Where that cannot work the caller skips instead, as before, and it is said here:
* another Keras backend: JAX's `fit` draws its batches in Python, ahead of the step, so
  the iterator is past the batches trained on (`supported` is False);
* a strategy of several replicas (or a TPU): Keras distributes the dataset, and a
  distributed iterator cannot be saved (`supported` is False);
* an input whose state tf.data cannot save (e.g. a `Dataset.from_generator` source):
  `save` says so once and returns False, and the backup records that a resume must skip.

Example:

>>> import tensorflow as tf, tempfile, os
>>> position = InputPosition()
>>> dataset = position.track(tf.data.Dataset.range(10).shuffle(4, seed=1))
>>> iterator = iter(dataset)
>>> first = [int(next(iterator)) for _ in range(3)]
>>> prefix = os.path.join(tempfile.mkdtemp(), "input")
>>> position.save(prefix)
True
>>> rest = [int(x) for x in iterator]
>>> resumed = InputPosition()
>>> resumed.restore_from(prefix)
>>> [int(x) for x in resumed.track(tf.data.Dataset.range(10).shuffle(4, seed=1))] == rest
True
"""

from __future__ import annotations

import logging

import keras
import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops

from bert_tf.errors import damaged

logger = logging.getLogger(__name__)


class _TrackedDataset(dataset_ops.UnaryUnchangedStructureDataset):
    """The dataset unchanged; `on_iterator` sees each iterator made of it (`iter`, Keras' fit)."""

    def __init__(self, dataset: tf.data.Dataset, on_iterator):
        self._on_iterator = on_iterator
        super().__init__(dataset, dataset._variant_tensor)

    def __iter__(self):
        iterator = super().__iter__()
        self._on_iterator(iterator)
        return iterator


class InputPosition:
    """Saves and restores the position of the iterator Keras draws training batches from."""

    def __init__(self):
        self.iterator = None
        self._restore_prefix: str | None = None
        self._warned = False

    @staticmethod
    def supported(strategy: tf.distribute.Strategy) -> bool:
        """Whether fit's iterator is one this can save: TensorFlow backend, one replica."""
        return (
            keras.backend.backend() == "tensorflow"
            and strategy.num_replicas_in_sync == 1
            and not isinstance(strategy, tf.distribute.TPUStrategy)
        )

    def track(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        return _TrackedDataset(dataset, self._started)

    def restore_from(self, prefix: str) -> None:
        """Every iterator made from now on starts at the position saved under `prefix`."""
        self._restore_prefix = prefix

    def _started(self, iterator) -> None:
        if self._restore_prefix is not None:
            try:
                tf.train.Checkpoint(iterator=iterator).read(self._restore_prefix).assert_consumed()
            except (tf.errors.OpError, AssertionError, ValueError) as error:
                raise damaged(
                    self._restore_prefix,
                    f"the saved input position does not fit this input pipeline ({str(error).splitlines()[0]})",
                    f"delete {self._restore_prefix}.index to resume by skipping the batches already seen",
                ) from None
        self.iterator = iterator

    def save(self, prefix: str) -> bool:
        """Writes the position under `prefix` (a checkpoint prefix); False when it cannot be saved."""
        if self.iterator is None:
            return False
        try:
            tf.train.Checkpoint(iterator=self.iterator).write(prefix)
        except (tf.errors.OpError, ValueError) as error:
            if not self._warned:
                logger.warning(
                    "the input position cannot be saved (%s); a resume will skip the batches already seen",
                    str(error).splitlines()[0],
                )
                self._warned = True
            return False
        return True
