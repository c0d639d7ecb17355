"""The one test harness: shared checks, test data and processes, imported as `tests.harness`.

- here: the checks every Keras layer and model runs, one call each (as keras-hub's
  `run_layer_test`), and `tiny_config`;
- `data`: the synthetic tasks and files tests build (vocabs, corpora, CSV/CoNLL/SQuAD/SWAG
  rows, a tiny checkpoint);
- `reference`: independent transcriptions of the original rules (tokenizer, features) that
  tests hold bert_tf to;
- `processes`: fresh processes as a user starts them (the environment, free ports, a loader
  of exported SavedModels that imports nothing of bert_tf);
- `tasks`: the checks every task family runs, built-in or a user's (`run_task_test`).

Shared checks for every Keras layer and model, one call each (as keras-hub's `run_layer_test`).

`run_layer_test` and `run_model_test` build the object, check its output shapes and exact weight
counts, save and restore it (config round trip for a layer, a `.keras` file for a model) and
compare outputs, take one training step and check that every trainable variable got a gradient
and that the loss fell, and build it under `mixed_float16` and `mixed_bfloat16` to check the
output dtype, that variables stay float32 and that outputs are finite. A test then states only
what is particular to its layer: the inputs, the expected shapes and counts, and its own math.
`unpack_sequences` reads the examples back out of packed fine-tuning rows.

"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")


def _shapes(outputs):
    return tf.nest.map_structure(lambda tensor: tuple(tensor.shape), outputs)


def _num_params(weights) -> int:
    return int(sum(np.prod(weight.shape) for weight in weights))


def _loss(outputs):
    """Mean squared distance of every output from 1: any weight that shapes an output moves it."""
    return tf.add_n(
        [tf.reduce_mean(tf.square(tf.cast(output, tf.float32) - 1.0)) for output in tf.nest.flatten(outputs)]
    )


@contextlib.contextmanager
def global_dtype_policy(policy: str):
    """Models build their layers under Keras' global policy; restore float32 afterwards."""
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy("float32")


def check_weight_counts(
    test: tf.test.TestCase,
    layer,
    *,
    num_trainable_weights: int,
    num_non_trainable_weights: int,
    num_params: int,
    num_trainable_params: int | None,
) -> None:
    test.assertLen(layer.trainable_weights, num_trainable_weights, [w.path for w in layer.trainable_weights])
    test.assertLen(
        layer.non_trainable_weights, num_non_trainable_weights, [w.path for w in layer.non_trainable_weights]
    )
    test.assertEqual(_num_params(layer.weights), num_params)
    expected_trainable = num_params if num_trainable_params is None else num_trainable_params
    test.assertEqual(_num_params(layer.trainable_weights), expected_trainable)


def check_training_step(
    test: tf.test.TestCase,
    layer,
    call: Callable,
    *,
    learning_rate: float,
    unused_variables: Sequence = (),
) -> None:
    """One SGD step on `_loss`: every used trainable variable gets a gradient; the loss falls."""
    unused = {id(variable) for variable in unused_variables}
    variables = [variable for variable in layer.trainable_variables if id(variable) not in unused]
    test.assertNotEmpty(variables)
    with tf.GradientTape() as tape:
        loss = _loss(call(layer))  # the call is deterministic: no dropout outside training
    before = float(loss)
    gradients = tape.gradient(loss, variables)
    test.assertEqual(
        [variable.path for variable, gradient in zip(variables, gradients, strict=True) if gradient is None],
        [],
    )
    keras.optimizers.SGD(learning_rate).apply(gradients, variables)
    test.assertLess(float(_loss(call(layer))), before)


def check_mixed_precision(test: tf.test.TestCase, outputs, layer, policy: str, float32_outputs: bool) -> None:
    expected = tf.float32 if float32_outputs else tf.as_dtype(policy.removeprefix("mixed_"))
    for output in tf.nest.flatten(outputs):
        test.assertEqual(output.dtype, expected, policy)
        test.assertTrue(bool(tf.reduce_all(tf.math.is_finite(tf.cast(output, tf.float32)))), policy)
    for variable in layer.weights:
        test.assertEqual(variable.dtype, "float32", variable.path)


def run_layer_test(
    test: tf.test.TestCase,
    factory: Callable[..., keras.layers.Layer],
    inputs: Sequence,
    *,
    expected_output_shape,
    expected_num_trainable_weights: int,
    expected_num_params: int,
    expected_num_non_trainable_weights: int = 0,
    expected_num_trainable_params: int | None = None,
    float32_output: bool = False,
    unused_variables: Callable[[keras.layers.Layer], Sequence] = lambda layer: (),
) -> keras.layers.Layer:
    """Checks one layer; `factory(**kwargs)` builds it (`dtype=` for mixed precision).

    `float32_output`: the layer returns float32 under mixed precision (heads whose logits feed
    a softmax); otherwise it returns the policy's compute dtype. `unused_variables(layer)`:
    trainable variables the layer tracks but does not use (such as the parts of a tied
    embedding layer other than the word table), which get no gradient.
    Returns the layer, built.
    """
    layer = factory()
    outputs = layer(*inputs)
    test.assertEqual(_shapes(outputs), expected_output_shape)
    check_weight_counts(
        test,
        layer,
        num_trainable_weights=expected_num_trainable_weights,
        num_non_trainable_weights=expected_num_non_trainable_weights,
        num_params=expected_num_params,
        num_trainable_params=expected_num_trainable_params,
    )

    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    test.assertEqual(type(restored), type(layer))
    test.assertEqual(restored.get_config(), layer.get_config())
    restored(*inputs)
    restored.set_weights(layer.get_weights())
    tf.nest.map_structure(test.assertAllClose, restored(*inputs), outputs)

    check_training_step(
        test, layer, lambda built: built(*inputs), learning_rate=0.1, unused_variables=unused_variables(layer)
    )

    for policy in MIXED_POLICIES:
        mixed = factory(dtype=policy)
        check_mixed_precision(test, mixed(*inputs), mixed, policy, float32_output)
    return layer


def run_model_test(
    test: tf.test.TestCase,
    factory: Callable[[], keras.Model],
    inputs,
    *,
    expected_output_shape,
    expected_num_trainable_weights: int,
    expected_num_params: int,
    expected_num_non_trainable_weights: int = 0,
    expected_num_trainable_params: int | None = None,
    float32_output: bool = True,
) -> keras.Model:
    """Checks one model; `factory()` builds it under Keras' global dtype policy.

    The round trip goes through a `.keras` file, the model's whole saved form. Returns the
    restored model, for checks particular to the model.
    """
    model = factory()
    outputs = model(inputs)
    test.assertEqual(_shapes(outputs), expected_output_shape)
    check_weight_counts(
        test,
        model,
        num_trainable_weights=expected_num_trainable_weights,
        num_non_trainable_weights=expected_num_non_trainable_weights,
        num_params=expected_num_params,
        num_trainable_params=expected_num_trainable_params,
    )

    path = os.path.join(tempfile.mkdtemp(), "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    test.assertEqual(type(restored), type(model))
    tf.nest.map_structure(lambda a, b: test.assertAllClose(a, b, atol=1e-6), outputs, restored(inputs))

    check_training_step(test, model, lambda built: built(inputs), learning_rate=0.01)

    for policy in MIXED_POLICIES:
        with global_dtype_policy(policy):
            mixed = factory()
        check_mixed_precision(test, mixed(inputs), mixed, policy, float32_output)
    return restored


def unpack_sequences(rows: dict) -> list[tuple]:
    """(input_ids, segment_ids) of each example of packed rows, in `cls_positions` order:
    the tokens of the instance that starts at the example's [CLS]."""
    row_length = rows["input_ids"].shape[1]
    examples = []
    for position in rows["cls_positions"]:
        row, start = divmod(int(position), row_length)
        instance = rows["input_mask"][row, start]
        columns = np.nonzero(rows["input_mask"][row] == instance)[0]
        # An instance is contiguous and starts at its [CLS].
        np.testing.assert_array_equal(columns, np.arange(start, start + len(columns)))
        examples.append(
            (rows["input_ids"][row, columns].tolist(), rows["segment_ids"][row, columns].tolist())
        )
    return examples


def tiny_config(vocab_size: int, **changes):
    """A 2-layer, 64-wide BertConfig for tests."""
    from bert_tf.config import BertConfig

    values = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=128,
    )
    values.update(changes)
    return BertConfig(**values)
