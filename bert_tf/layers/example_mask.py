"""The example mask: `input_mask` numbering each row's examples, and what the encoder derives
from it (position ids per example, an attention bias that keeps examples apart), so that every
example of a packed row (`bert_tf.preprocessing.packing`) is computed as if it were alone.

A packed row holds instances one after the other, then padding:

    input_ids   [CLS] a a [SEP] b [SEP] [CLS] c [SEP] d d [SEP]  0  0
    input_mask    1   1 1   1   1   1     2   2   2   2 2   2    0  0

`input_mask` carries the instance number (1, 2, ...) of every real token and 0 on
padding, so an ordinary row (1 on real tokens) is a packed row of one instance. From it
the encoder derives what makes each instance independent of its neighbours:

- position ids that restart at 0 for every instance (`example_position_ids`);
- a block-diagonal attention bias: a token attends only to the tokens of its own
  instance (`example_attention_bias`).

LayerNorm, the feed-forward layers and the heads act per token, so with these two every
real token's output is exactly what the instance alone would give. Padding tokens attend
to every real token, as in an ordinary row, so on rows of one instance both functions
give exactly the original model's inputs.

Example:

>>> import numpy as np
>>> mask = np.array([[1, 1, 1, 2, 2, 0]])
>>> example_position_ids(mask).numpy().tolist()
[[0, 1, 2, 0, 1, 5]]
>>> (example_attention_bias(mask).numpy()[0, 0] == 0).astype(int).tolist()[3]
[0, 0, 0, 1, 1, 0]
"""

from __future__ import annotations

from keras import ops

from bert_tf.layers.attention import MASK_ADDER


def example_position_ids(input_mask):
    """[batch, seq] instance numbers -> int32 [batch, seq] positions within each instance.

    A token's position is its index minus the number of real tokens of the instances
    before it (instances are contiguous and numbered in order); padding keeps its index.
    """
    instance = ops.cast(input_mask, "int32")
    index = ops.cumsum(ops.ones_like(instance), axis=1) - 1  # [batch, seq]: 0, 1, 2, ...
    # earlier[b, q, k]: key k is a real token of an instance before query q's.
    keys, queries = ops.expand_dims(instance, 1), ops.expand_dims(instance, 2)
    earlier = ops.logical_and(ops.greater(keys, 0), ops.less(keys, queries))
    return index - ops.sum(ops.cast(earlier, "int32"), axis=2)


def example_attention_bias(input_mask):
    """[batch, seq] instance numbers -> float32 additive bias [batch, 1, seq, seq].

    0 where the key is a real token of the query's instance (or the query is padding),
    `MASK_ADDER` elsewhere: exp(-10000) is exactly 0 in float32, so the softmax of a token
    is over its own instance alone.
    """
    instance = ops.cast(input_mask, "int32")
    key_real = ops.expand_dims(ops.greater(instance, 0), 1)  # [batch, 1, seq]
    same_instance = ops.equal(ops.expand_dims(instance, 2), ops.expand_dims(instance, 1))  # [batch, seq, seq]
    query_padding = ops.expand_dims(ops.equal(instance, 0), 2)
    allowed = ops.logical_and(key_real, ops.logical_or(same_instance, query_padding))
    return ops.expand_dims(ops.where(allowed, 0.0, MASK_ADDER), 1)
