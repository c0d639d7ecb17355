"""Text (and text-pair) classification and regression: strings and labels in, features out.

Example (a batch of two texts, padded to its longest row rounded up to a multiple of 8):

>>> import tensorflow as tf
>>> from bert_tf.tokenization import BertTokenizer
>>> preprocessor = TextClassifierPreprocessor(
...     BertTokenizer("tests/fixtures/bert_uncased_vocab.txt"), sequence_length=16, label_list=["neg", "pos"])
>>> x, y = preprocessor(tf.constant(["Hello world!", "Hi"]), tf.constant(["pos", "neg"]))
>>> x["input_ids"].numpy().tolist(), y.numpy().tolist()
([[101, 7592, 2088, 999, 102, 0, 0, 0], [101, 7632, 102, 0, 0, 0, 0, 0]], [1, 0])
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.preprocessing.base import LabelledPreprocessor
from bert_tf.preprocessing.segments import combine_segments, flat_pieces
from bert_tf.preprocessing.windows import doc_windows, take_windows


class TextClassifierPreprocessor(LabelledPreprocessor):
    """`[CLS] A [SEP] (B [SEP])` features of one or two texts, as the original run_classifier.

    Call it on a batch: `preprocessor(x, y=None, sample_weight=None)` where `x` is a
    tf.string [batch] tensor or a tuple of two (text_a, text_b); `y` holds labels (strings of
    `label_list`, or their indices; floats for regression, `label_list=None`). It returns
    the features `{input_ids, input_mask, segment_ids}` int32 [batch, length], or
    `(features, labels[, sample_weight])`, so `dataset.batch(n).map(preprocessor)` feeds
    `model.fit` directly. With `multi_label`, each example's `y` is a list of labels (a
    [batch, (labels)] ragged tensor) and its labels a multi-hot float32 [batch, num_labels].
    A pair too long for `sequence_length` loses tokens from the end of its longer text (the
    second on a tie), one at a time, as the original.

    With `doc_stride`, nothing is cut: the text (of a pair, the second text; the first is
    kept whole in every window) is read in overlapping windows of the room the row leaves
    it, every `doc_stride` pieces (`bert_tf.preprocessing.windows`), one row per window,
    each with its text's label; `features` adds `example_index` [windows].

    Args:
      tokenizer: a `bert_tf.tokenization.BertTokenizer`.
      sequence_length: the longest packed row.
      label_list: class names (label i is `label_list[i]`); None for regression.
      pad_to_multiple_of: dynamic padding (see `Preprocessor`); None pads to sequence_length.
      multi_label: each example has a set of labels (see above).
      doc_stride: read long texts in windows every this many pieces (below
        sequence_length - 2); None cuts them.
    """

    def __init__(
        self,
        tokenizer,
        sequence_length: int = 128,
        label_list=None,
        pad_to_multiple_of: int | None = 8,
        multi_label: bool = False,
        doc_stride: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(tokenizer, sequence_length, label_list, pad_to_multiple_of, doc_stride, name=name)
        self.multi_label = multi_label

    def features(self, x) -> dict[str, tf.Tensor]:
        """The features and `trimmed` ([batch] bool: the row lost tokens)."""
        texts = [x] if isinstance(x, tf.Tensor) or not isinstance(x, (tuple, list)) else list(x)
        segments = [
            flat_pieces(self.tokenizer.tokenize(tf.convert_to_tensor(text, tf.string))) for text in texts
        ]
        if self.doc_stride is None:
            return combine_segments(
                segments,
                self.sequence_length,
                *self.special_ids,
                self.pad_to_multiple_of,
                return_trimmed=True,
            )
        *whole, windowed = segments  # [b, (pieces)] each
        # The room a row leaves the windowed text: [CLS] (A [SEP]) window [SEP].
        room = self.sequence_length - 1 - len(segments) - sum(s.row_lengths() for s in whole)
        room = room + tf.zeros_like(windowed.row_lengths())  # [b] int64
        check = tf.debugging.assert_positive(
            room,
            message=f"a first text of a pair fills the {self.sequence_length} pieces of a row (it is kept "
            "whole in every window of the second text); raise --max_seq_length or shorten the first texts",
        )
        with tf.control_dependencies([check]):
            room = tf.identity(room)
        windows = doc_windows(windowed.row_lengths(), room, self.doc_stride)
        rows = [tf.gather(segment, windows.example) for segment in whole] + [take_windows(windowed, windows)]
        packed = combine_segments(rows, self.sequence_length, *self.special_ids, self.pad_to_multiple_of)
        packed["example_index"] = tf.cast(windows.example, tf.int32)
        packed["trimmed"] = tf.zeros_like(windows.example, tf.bool)  # windows cut nothing
        return packed

    def labels(self, y, features=None) -> tf.Tensor:
        """The labels [rows] ([rows, num_labels] multi-hot): a window has its text's."""
        if not isinstance(y, tf.RaggedTensor):
            y = tf.convert_to_tensor(y)
        if features is not None and "example_index" in features:
            y = tf.gather(y, features["example_index"])
        if self.label_list is None:
            return tf.cast(y, tf.float32)  # regression
        if not self.multi_label:
            return self.lookup(self._labels, y, self.label_list)
        if not isinstance(y, tf.RaggedTensor):
            y = tf.RaggedTensor.from_tensor(y)
        ids = self.lookup(self._labels, y, self.label_list)  # [batch, (labels)]
        # Multi-hot: 1.0 where an example has the label, [batch, num_labels].
        hot = tf.one_hot(ids.flat_values, len(self.label_list), dtype=tf.float32)
        counts = tf.math.unsorted_segment_sum(hot, ids.value_rowids(), ids.nrows())
        return tf.minimum(counts, 1.0)  # a label named twice is still one
