"""Multiple choice (SWAG): a context and its candidate endings in, one packed row per choice.

Each choice is `[CLS] context [SEP] ending [SEP]`, trimmed like a classification pair
(the longer side from its end). The model scores the choices of an example together.

Example:

>>> import tensorflow as tf
>>> from bert_tf.tokenization import BertTokenizer
>>> preprocessor = MultipleChoicePreprocessor(BertTokenizer("tests/fixtures/bert_uncased_vocab.txt"), 16)
>>> x, y = preprocessor((tf.constant(["hello"]), tf.constant([["world", "hi"]])), tf.constant([0]))
>>> x["input_ids"].shape.as_list(), x["input_ids"][0, 1].numpy().tolist()
([1, 2, 8], [101, 7592, 102, 7632, 102, 0, 0, 0])
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.preprocessing.base import MODEL_INPUTS, Preprocessor
from bert_tf.preprocessing.segments import combine_segments


class MultipleChoicePreprocessor(Preprocessor):
    """Features [batch, choices, length] of (context [batch], endings [batch, choices]).

    `y`: the index of the right ending, int [batch]. `features` also returns `trimmed`
    [batch] bool (any choice of the example was cut).
    """

    def __init__(self, tokenizer, sequence_length: int = 128, pad_to_multiple_of: int | None = 8, name=None):
        super().__init__(tokenizer, sequence_length, pad_to_multiple_of, name=name)
        if sequence_length < 3:
            raise ValueError(f"sequence_length must be at least 3, got {sequence_length}")

    def features(self, x) -> dict[str, tf.Tensor]:
        context, endings = x
        if isinstance(endings, tf.RaggedTensor):  # batched from rows: every example has its endings
            endings = endings.to_tensor()
        context, endings = tf.convert_to_tensor(context, tf.string), tf.convert_to_tensor(endings, tf.string)
        shape = tf.shape(endings)  # [batch, choices]
        check = tf.debugging.assert_equal(
            tf.shape(context)[0],
            shape[0],
            message="multiple choice: context [batch] and endings [batch, num_choices] need the same batch",
        )
        with tf.control_dependencies([check]):
            contexts = tf.repeat(context, shape[1])  # [batch * choices]: each context once per ending
        segments = [self.tokenizer.tokenize(contexts), self.tokenizer.tokenize(tf.reshape(endings, [-1]))]
        packed = combine_segments(
            segments, self.sequence_length, *self.special_ids, self.pad_to_multiple_of, return_trimmed=True
        )
        length = tf.shape(packed["input_ids"])[1]
        features = {name: tf.reshape(packed[name], [shape[0], shape[1], length]) for name in MODEL_INPUTS}
        features["trimmed"] = tf.reduce_any(tf.reshape(packed["trimmed"], shape), axis=1)
        return features

    def labels(self, y, features=None) -> tf.Tensor:
        return tf.cast(y, tf.int32)
