"""What every task preprocessor shares: the tokenizer, the length rules, labels, the call.

A preprocessor is a `tf.Module` of graph ops only (tensorflow-text and TensorFlow), so the
same object is mapped over `tf.data` for training, evaluation and prediction, called from
Python, and traced into the exported task SavedModel.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from bert_tf.preprocessing.windows import check_doc_stride

# The features a BERT task model reads; preprocessors may compute more (see `features`).
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")


class Preprocessor(tf.Module):
    """Base of the task preprocessors.

    Args:
      tokenizer: a `bert_tf.tokenization.BertTokenizer` (tracked: its vocab is saved with
        any SavedModel that holds the preprocessor).
      sequence_length: the longest packed row.
      pad_to_multiple_of: dynamic padding: each batch is padded to its longest row rounded
        up to this multiple (so a model sees few distinct shapes); None pads every row to
        `sequence_length` (static shapes, as TPUs need).

    Subclasses define `features(x)` (model inputs plus what evaluation needs) and
    `labels(y, features)`.
    """

    def __init__(self, tokenizer, sequence_length: int, pad_to_multiple_of: int | None, name=None):
        super().__init__(name=name)
        if pad_to_multiple_of is not None and pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be positive or None, got {pad_to_multiple_of}")
        self.tokenizer = tokenizer
        self.sequence_length = int(sequence_length)
        self.pad_to_multiple_of = pad_to_multiple_of

    @property
    def windowed(self) -> bool:
        """Whether a text may make several rows (windows): `bert_tf.tasks.streams` then
        regroups the rows into batches of `batch_size` rows."""
        return False

    @property
    def special_ids(self) -> tuple[int, int, int]:
        return self.tokenizer.cls_id, self.tokenizer.sep_id, self.tokenizer.pad_id

    def features(self, x) -> dict[str, tf.Tensor]:
        raise NotImplementedError

    def labels(self, y, features: dict[str, tf.Tensor]):
        """The training targets of labels `y`, given this batch's `features(x)`."""
        raise NotImplementedError

    def __call__(self, x, y=None, sample_weight=None):
        """Model inputs of a batch, or (inputs, labels[, sample_weight]) (Keras' convention)."""
        features = self.features(x)
        inputs = {name: features[name] for name in MODEL_INPUTS}
        if y is None:
            return inputs if sample_weight is None else (inputs, None, sample_weight)
        labels = self.labels(y, features)
        return (inputs, labels) if sample_weight is None else (inputs, labels, sample_weight)

    # --- labels ---------------------------------------------------------------------

    @staticmethod
    def label_table(label_list: Sequence[str]) -> tf.lookup.StaticHashTable:
        """label string -> its index (-1 for a string outside the list)."""
        return tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(label_list), tf.string), tf.range(len(label_list), dtype=tf.int32)
            ),
            default_value=-1,
        )

    @staticmethod
    def lookup(table, labels: tf.Tensor, label_list: Sequence[str]) -> tf.Tensor:
        """Label strings (or indices) -> int32 indices; a string outside `label_list` is an error."""
        if labels.dtype != tf.string:
            return tf.cast(labels, tf.int32)
        ids = table.lookup(labels)
        check = tf.debugging.assert_non_negative(
            ids if not isinstance(ids, tf.RaggedTensor) else ids.flat_values,
            message=f"a label is not one of the task's labels {list(label_list)}",
        )
        with tf.control_dependencies([check]):
            return (
                tf.identity(ids)
                if not isinstance(ids, tf.RaggedTensor)
                else ids.with_flat_values(tf.identity(ids.flat_values))
            )


class LabelledPreprocessor(Preprocessor):
    """A preprocessor of one text field with class labels (`label_list`; None: regression).

    `doc_stride` (None: off) reads a text longer than a row as overlapping windows, every
    `doc_stride` pieces (`bert_tf.preprocessing.windows`): one row per window, and
    `features` adds `example_index` [windows], each window's row of the batch.
    """

    def __init__(
        self,
        tokenizer,
        sequence_length: int = 128,
        label_list: Sequence[str] | None = None,
        pad_to_multiple_of: int | None = 8,
        doc_stride: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(tokenizer, sequence_length, pad_to_multiple_of, name=name)
        if sequence_length < 3:
            raise ValueError(f"sequence_length must be at least 3 ([CLS] x [SEP]), got {sequence_length}")
        self.label_list = list(label_list) if label_list is not None else None
        self._labels = self.label_table(self.label_list) if self.label_list else None
        self.doc_stride = check_doc_stride(doc_stride, self.sequence_length - 2)

    @property
    def windowed(self) -> bool:
        return self.doc_stride is not None
