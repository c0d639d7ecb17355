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
from bert_tf.preprocessing.segments import combine_segments


class TextClassifierPreprocessor(LabelledPreprocessor):
    """`[CLS] A [SEP] (B [SEP])` features of one or two texts, as the original run_classifier.

    Call it on a batch: `preprocessor(x, y=None, sample_weight=None)` where `x` is a
    tf.string [batch] tensor or a tuple of two (text_a, text_b); `y` holds labels (strings of
    `label_list`, or their indices; floats for regression, `label_list=None`). It returns
    the features `{input_ids, input_mask, segment_ids}` int32 [batch, length], or
    `(features, labels[, sample_weight])`, so `dataset.batch(n).map(preprocessor)` feeds
    `model.fit` directly. With `multi_label`, each example's `y` is a list of labels (a
    [batch, (labels)] ragged tensor) and its labels a multi-hot float32 [batch, num_labels]. A pair too long for `sequence_length` loses tokens from the end
    of its longer text (the second on a tie), one at a time, as the original.

    Args:
      tokenizer: a `bert_tf.tokenization.BertTokenizer`.
      sequence_length: the longest packed row.
      label_list: class names (label i is `label_list[i]`); None for regression.
      pad_to_multiple_of: dynamic padding (see `Preprocessor`); None pads to sequence_length.
      multi_label: each example has a set of labels (see above).
    """

    def __init__(
        self,
        tokenizer,
        sequence_length: int = 128,
        label_list=None,
        pad_to_multiple_of: int | None = 8,
        multi_label: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(tokenizer, sequence_length, label_list, pad_to_multiple_of, name=name)
        self.multi_label = multi_label

    def features(self, x) -> dict[str, tf.Tensor]:
        """The features and `trimmed` ([batch] bool: the row lost tokens)."""
        texts = [x] if isinstance(x, tf.Tensor) or not isinstance(x, (tuple, list)) else list(x)
        segments = [self.tokenizer.tokenize(tf.convert_to_tensor(text, tf.string)) for text in texts]
        return combine_segments(
            segments, self.sequence_length, *self.special_ids, self.pad_to_multiple_of, return_trimmed=True
        )

    def labels(self, y, features=None) -> tf.Tensor:
        if not isinstance(y, tf.RaggedTensor):
            y = tf.convert_to_tensor(y)
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
