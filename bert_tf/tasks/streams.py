"""Task data as `tf.data` pipelines that never hold the whole dataset.

A source is a function that returns a fresh iterator of raw records, `(x, y)` for
labelled data or `(x,)` without labels, read row by row from the task's file (or TFDS
split). `batches` turns it into batches of model features with a task preprocessor
(`bert_tf.preprocessing`): the raw strings are shuffled in a bounded buffer, grouped,
tokenized and packed in parallel in the graph, and prefetched. Rows are padded to the
longest row of their batch rounded up to a multiple (dynamic padding), or to the
preprocessor's sequence length when it pads statically.

Example:

>>> from bert_tf.preprocessing import TextClassifierPreprocessor
>>> from bert_tf.tokenization import BertTokenizer
>>> preprocessor = TextClassifierPreprocessor(
...     BertTokenizer("tests/fixtures/bert_uncased_vocab.txt"), 32, label_list=["neg", "pos"])
>>> def source():
...     yield "a fine film", "pos"
...     yield "dull", "neg"
>>> signature = (tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.string))
>>> batch = next(iter(batches(record_chunks(source, signature), preprocessor, Batching(batch_size=2))))
>>> batch["inputs"]["input_ids"].shape.as_list(), batch["labels"].numpy().tolist()
([2, 8], [1, 0])
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from bert_tf.preprocessing import packing
from bert_tf.preprocessing.base import MODEL_INPUTS


@dataclasses.dataclass(frozen=True)
class Batching:
    """How records become batches.

    Args:
      batch_size: rows (or, for windowed tasks, windows) per batch.
      training: shuffle in a buffer of `shuffle_buffer` records and repeat forever.
      static: fixed-size batches (TPUs): training drops the last partial batch; evaluation
        pads it with rows of weight 0, so nothing is dropped or counted twice.
      bucket_boundaries: group rows of similar length (`bucket_by_sequence_length`); rows
        in a bucket are padded to its upper bound - 1. Without `training` the rows then
        come out grouped by length, not in order (`meta["index"]` gives their order).
      seed: shuffle seed.
      pack: put the rows of each batch into as few rows of the batch's padded length as
        they fit in (`bert_tf.preprocessing.packing.pack_sequences`; for one label per row:
        classification, regression): the batch keeps its examples and order, and the
        model computes each as if it had a row of its own.
      few_shapes: keep batches to a few distinct shapes, for a training step compiled once
        per input shape (JAX's `jit`, TensorFlow under XLA), where every new shape costs a
        compilation (seconds to tens of seconds on a CPU) and dynamic padding or packing
        makes dozens (37 in the 156 updates of bench/finetune.py's task, each 15-28 s to
        compile on JAX on the shared 2-core CPU). Packed rows are the preprocessor's full
        `sequence_length` and their number is rounded up to `shape_ladder`: there, 3
        shapes for ~11% more positions per batch (packing the same tokens into longer rows
        adds few). Batches short of `batch_size` examples (evaluation's last) are filled
        with examples of weight 0. Other layouts keep their dynamic widths.
    """

    batch_size: int
    training: bool = False
    static: bool = False
    bucket_boundaries: Sequence[int] | None = None
    seed: int | None = None
    shuffle_buffer: int = 10_000
    pack: bool = False
    few_shapes: bool = False

    def __post_init__(self):
        if self.pack and (self.static or self.bucket_boundaries):
            raise ValueError("packed batches take neither static shapes nor length buckets")


# Rows read in Python and handed to tf.data at a time: one hand-off per row costs ~70x the
# reading itself (measured: 4,100 vs 290,000 CSV rows/s).
CHUNK_ROWS = 256


def record_chunks(
    source: Callable[[], Iterator[tuple]], signature: tuple, labelled: bool = True
) -> tf.data.Dataset:
    """Chunks of up to CHUNK_ROWS records {"x", "y" (when labelled), "index"}, streamed in order.

    `source()` yields `(x, y)` tuples (`(x,)` or `(x, y)` when not `labelled`: y is
    dropped) matching `signature`, a tuple of `tf.TensorSpec`s of rank 0 or 1 (x may be a
    tuple itself). Each field of a chunk has a leading dimension of its records (ragged
    for vector fields); `index` numbers the records from 0. `batches` takes these.

    The reader's position (the records read) is the state of a `scan`, so tf.data's
    iterator checkpoint holds it (`bert_tf.training.fit_input`). A restored iterator
    reads on from it: in the process that read up to there, the open reader goes on
    (`RecordReader`); in a new one, `source()` is read again up to that record: at most
    one pass over the raw records, however many passes came before, and none of them
    tokenized (a source cannot be asked to start elsewhere than at its first record).
    """
    specs = tf.nest.flatten(signature)
    if any(spec.shape.rank not in (0, 1) for spec in specs):
        raise ValueError(f"record fields must be scalars or vectors, got {signature}")
    reader = RecordReader(source, signature)
    # The chunk as flat arrays: the index, then per field its values (and row lengths for vectors).
    dtypes = [tf.int64]
    for spec in specs:
        dtypes += [spec.dtype] if spec.shape.rank == 0 else [spec.dtype, tf.int64]

    @tf.autograph.experimental.do_not_convert
    def next_chunk(start, _):
        # stateful=False: the read is a pure function of `start`, so the pipeline may be saved.
        arrays = tf.numpy_function(reader.read_flat, [start], dtypes, stateful=False)
        index, arrays = arrays[0], arrays[1:]
        index.set_shape([None])
        fields = []
        for spec in specs:
            values, arrays = arrays[0], arrays[1:]
            values.set_shape([None])
            if spec.shape.rank == 1:
                lengths, arrays = arrays[0], arrays[1:]
                lengths.set_shape([None])
                values = tf.RaggedTensor.from_row_lengths(values, lengths)
            fields.append(values)
        return start + tf.size(index, out_type=tf.int64), (index, tuple(fields))

    dataset = (
        tf.data.Dataset.from_tensors(0)
        .repeat()
        .scan(tf.constant(0, tf.int64), next_chunk)
        .take_while(lambda index, fields: tf.size(index) > 0)
    )

    @tf.autograph.experimental.do_not_convert
    def to_records(index, fields):
        fields = tf.nest.pack_sequence_as(signature, list(fields))
        chunk = {"x": fields[0], "index": index}
        if labelled:
            chunk["y"] = fields[1]
        return chunk

    options = tf.data.Options()
    # The numpy_function reads by position (see above): its "external state" need not be saved.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset.map(to_records).with_options(options)


class RecordReader:
    """`source()`'s records by position: `read(start)` returns those from record `start` on.

    Sequential reads (one iterator going through the data) continue the open reader; a
    read from elsewhere (a restored iterator in a new process) opens `source()` again and
    passes over `start` records. `records_read` counts the records taken from sources, so
    and `records_passed_over` those read only to reach a position, so that the cost of
    positioning can be observed.
    """

    MAX_OPEN = 8  # readers left open by iterators that stopped early are closed past this

    def __init__(self, source: Callable[[], Iterator[tuple]], signature: tuple):
        self.source, self.signature = source, signature
        self.specs = tf.nest.flatten(signature)
        self.records_read = self.records_passed_over = 0
        self._open: dict[int, Iterator[tuple]] = {}  # next record -> the reader positioned there
        self._lock = threading.Lock()

    def read(self, start: int) -> list[list]:
        """Up to CHUNK_ROWS records from `start`, each as its flat fields (see `_fields`)."""
        with self._lock:
            records = self._open.pop(start, None)
        if records is None:
            records = iter(self.source())
            for _ in range(start):
                next(records)
                self.records_read += 1
                self.records_passed_over += 1
        rows = []
        for record in records:
            self.records_read += 1
            rows.append(_fields(self.signature, record))
            if len(rows) == CHUNK_ROWS:
                break
        if len(rows) < CHUNK_ROWS:  # the end of the data: its file closed now, not when collected
            getattr(records, "close", lambda: None)()
            records = iter(())
        # Kept at the end of the data too: the next read (empty, ending the pass) reads nothing.
        with self._lock:
            self._open[start + len(rows)] = records
            while len(self._open) > self.MAX_OPEN:
                self._open.pop(next(iter(self._open)))
        return rows

    def read_flat(self, start) -> list[np.ndarray]:
        start = int(start)
        rows = self.read(start)
        arrays = [np.arange(start, start + len(rows), dtype=np.int64)]
        for position, spec in enumerate(self.specs):
            dtype = object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype
            values = [row[position] for row in rows]
            if spec.shape.rank == 0:
                arrays.append(np.array(values, dtype=dtype).reshape([-1]))
            else:
                flat = [item for value in values for item in value]
                arrays.append(np.array(flat, dtype=dtype).reshape([-1]))
                arrays.append(np.array([len(value) for value in values], np.int64))
        return arrays


def _fields(signature, record) -> list:
    """A record's fields in the order of `tf.nest.flatten(signature)`; a vector field (NER's
    words) stays one field, where `tf.nest.flatten` would split its list into items."""
    if isinstance(signature, tuple):
        return [
            field for spec, value in zip(signature, record, strict=True) for field in _fields(spec, value)
        ]
    return [record]


def shape_ladder(limit: int) -> list[int]:
    """The sizes `Batching.few_shapes` rounds a batch's packed rows up to, up to `limit`.

    Powers of two and the halfway points between them: two sizes per doubling, so the
    padding is at most a third of a batch and a run sees a handful of shapes.

    >>> shape_ladder(32)
    [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    >>> shape_ladder(20)
    [1, 2, 3, 4, 6, 8, 12, 16, 20]
    """
    sizes, power = [1], 2
    while power < limit:
        sizes += [size for size in (power, power + power // 2) if size < limit]
        power *= 2
    return sorted({*sizes, limit})


def length_buckets(sequence_length: int, multiple: int = 8) -> list[int]:
    """Bucket boundaries for `bucket_by_sequence_length`: rows pad to multiples of `multiple`."""
    bounds = list(range(multiple + 1, sequence_length + 1, multiple))
    return [*bounds, sequence_length + 1]


def batches(
    chunks: tf.data.Dataset,
    preprocessor,
    batching: Batching,
    keep: Sequence[str] = (),
    ignore_label: int | None = None,
) -> tf.data.Dataset:
    """Batches of {"inputs", "labels" (labelled data), "weight", "meta"} dicts of `record_chunks`.

    `meta` holds the preprocessor features named in `keep`, `index` (the record each row
    came from) and `trimmed`. Windowed preprocessors (one record, several rows: SQuAD)
    are regrouped into batches of `batch_size` windows. `ignore_label` pads label rows
    of token tasks.
    """
    labelled = "y" in chunks.element_spec
    dataset = chunks.unbatch()
    if batching.training:
        dataset = dataset.shuffle(batching.shuffle_buffer, seed=batching.seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat()
    windowed = preprocessor.windowed
    if batching.pack and windowed:
        raise ValueError("packed batches take one row per example; this preprocessor makes windows")
    regroup = windowed or bool(batching.bucket_boundaries)
    drop = batching.static and batching.training and not regroup

    # The map functions here and the preprocessors they call are plain graph code:
    # skipping AutoGraph's conversion saves seconds of start-up.
    @tf.autograph.experimental.do_not_convert
    def process(batch):
        features = preprocessor.features(batch["x"])
        rows = tf.shape(features["input_ids"])[0]
        element = {
            "inputs": {name: features[name] for name in MODEL_INPUTS},
            "weight": tf.ones([rows], tf.float32),
        }
        index = batch["index"]
        if "example_index" in features:
            index = tf.gather(index, features["example_index"])
        element["meta"] = {"index": index, "trimmed": features["trimmed"], **{n: features[n] for n in keep}}
        if regroup:  # rows are batched again (padded_batch): ragged meta (NER's word positions) as -1-padded
            element["meta"] = {
                name: value.to_tensor(default_value=-1) if isinstance(value, tf.RaggedTensor) else value
                for name, value in element["meta"].items()
            }
        if labelled:
            element["labels"] = preprocessor.labels(batch["y"], features)
        if batching.pack:  # rows as long as the batch's padded length (few_shapes: the longest)
            inputs = element["inputs"]
            if batching.few_shapes:
                packed = packing.pack_sequences(inputs, row_length=preprocessor.sequence_length)
                element["inputs"] = _pad_rows(packed, shape_ladder(batching.batch_size))
            else:
                element["inputs"] = packing.pack_sequences(
                    inputs, row_length=tf.shape(inputs["input_ids"])[1]
                )
        return element

    # Ragged: NER sentences and SWAG endings have their own lengths.
    dataset = dataset.ragged_batch(batching.batch_size, drop_remainder=drop)
    dataset = dataset.map(process, num_parallel_calls=tf.data.AUTOTUNE)
    if regroup:
        dataset = _regroup(dataset.unbatch(), preprocessor.tokenizer.pad_id, batching, ignore_label)
    if (batching.static or batching.few_shapes) and not batching.training:
        dataset = dataset.map(lambda element: _fill_batch(element, batching.batch_size, batching.pack))
    return dataset.prefetch(tf.data.AUTOTUNE)


def _regroup(rows: tf.data.Dataset, pad_id: int, batching: Batching, ignore_label: int | None):
    """Rows batched again: in buckets of similar length (`bucket_boundaries`), or in batches
    of `batch_size` rows (a windowed preprocessor's windows)."""
    padding = _padding_values(rows.element_spec, pad_id, ignore_label)
    if batching.bucket_boundaries:
        # Labels per piece (token tasks: those padded with ignore_label) are cut with their
        # row; labels per example (a class, a multi-hot row) are not.
        per_piece = ignore_label is not None
        rows = rows.map(
            lambda element: _strip_padding(element, per_piece), num_parallel_calls=tf.data.AUTOTUNE
        )
        boundaries = list(batching.bucket_boundaries)
        return rows.bucket_by_sequence_length(
            lambda element: tf.shape(element["inputs"]["input_ids"])[-1],
            bucket_boundaries=boundaries,
            bucket_batch_sizes=[batching.batch_size] * (len(boundaries) + 1),
            padding_values=padding,
            pad_to_bucket_boundary=True,
            drop_remainder=batching.static,
        )
    if batching.training:
        rows = rows.shuffle(4 * batching.batch_size, seed=batching.seed)
    return rows.padded_batch(
        batching.batch_size, padding_values=padding, drop_remainder=batching.static and batching.training
    )


def _padding_values(spec, pad_id: int, ignore_label: int | None):
    def value(path, leaf):
        if path == ("inputs", "input_ids"):
            return tf.constant(pad_id, leaf.dtype)
        if path[0] == "labels" and ignore_label is not None and leaf.shape.rank:
            return tf.constant(ignore_label, leaf.dtype)
        if path[-1] in ("token_to_orig", "word_positions"):  # -1: no piece of the context / word here
            return tf.constant(-1, leaf.dtype)
        return tf.zeros([], leaf.dtype)

    def walk(path, node):
        if isinstance(node, dict):
            return {key: walk((*path, key), child) for key, child in node.items()}
        return value(path, node)

    return walk((), spec)


@tf.autograph.experimental.do_not_convert
def _strip_padding(element, labels_per_piece: bool = True):
    """One row cut to its real length (its padding is the batch's, not its own); its labels
    too where they are per piece."""
    length = tf.reduce_sum(element["inputs"]["input_mask"])

    def cut(tensor):
        return tensor[:length] if tensor.shape.rank == 1 else tensor

    element = dict(element)
    element["inputs"] = {name: cut(value) for name, value in element["inputs"].items()}
    if "labels" in element and labels_per_piece:
        element["labels"] = tf.nest.map_structure(cut, element["labels"])
    return element


@tf.autograph.experimental.do_not_convert
def _pad_rows(packed: dict[str, tf.Tensor], sizes: list[int]) -> dict[str, tf.Tensor]:
    """Packed rows padded with empty rows (no instance: input_mask 0) to the next of `sizes`."""
    rows = tf.shape(packed["input_ids"])[0]
    target = tf.gather(tf.constant(sizes, tf.int32), tf.searchsorted(tf.constant(sizes, tf.int32), [rows]))[0]
    padded = {
        name: tf.pad(value, [[0, target - rows], [0, 0]])
        for name, value in packed.items()
        if name != "cls_positions"
    }
    return {**padded, "cls_positions": packed["cls_positions"]}


@tf.autograph.experimental.do_not_convert
def _fill_batch(element, batch_size: int, packed: bool = False):
    """Pads a partial batch to `batch_size` examples of weight 0 (static shapes, few_shapes).

    Packed inputs keep their rows: only `cls_positions` has a row per example (the filling
    examples point at position 0, whose outputs are then dropped by their weight).
    """

    def fill(tensor):
        if isinstance(tensor, tf.RaggedTensor):
            missing = batch_size - tensor.nrows()
            empty = tf.RaggedTensor.from_row_lengths(
                tf.zeros([0], tensor.dtype), tf.zeros([missing], tensor.row_splits.dtype)
            )
            return tf.concat([tensor, empty], axis=0)
        missing = batch_size - tf.shape(tensor)[0]
        paddings = [[0, missing]] + [[0, 0]] * (tensor.shape.rank - 1)
        filled = tf.pad(tensor, paddings)
        filled.set_shape([batch_size, *tensor.shape[1:]])
        return filled

    if not packed:
        return tf.nest.map_structure(fill, element)
    rows = {name: value for name, value in element["inputs"].items() if name != "cls_positions"}
    examples = {**element, "inputs": {"cls_positions": element["inputs"]["cls_positions"]}}
    filled = tf.nest.map_structure(fill, examples)
    filled["inputs"] = {**rows, **filled["inputs"]}
    return filled


def keras_inputs(dataset: tf.data.Dataset, with_weights: bool = False) -> tf.data.Dataset:
    """(inputs, labels) or (inputs, labels, weight) for `model.fit` / `evaluate`."""
    if with_weights:
        return dataset.map(lambda element: (element["inputs"], element["labels"], element["weight"]))
    return dataset.map(lambda element: (element["inputs"], element["labels"]))
