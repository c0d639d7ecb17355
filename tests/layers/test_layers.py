"""Every layer: output shapes, config round trip, a training step and mixed precision."""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.layers import (
    BertEmbeddings,
    BertSelfAttention,
    MaskedLMHead,
    NextSentenceHead,
    TransformerBlock,
    attention_bias,
    gather_positions,
    gelu,
)

HIDDEN = 16
RNG = np.random.default_rng(0)
HIDDEN_STATES = RNG.normal(size=(2, 6, HIDDEN)).astype("float32")
INPUT_MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")


def _embeddings(**kwargs):
    return BertEmbeddings(vocab_size=30, hidden_size=HIDDEN, max_position_embeddings=10, **kwargs)


def _built_embeddings():
    layer = _embeddings()
    layer.build()
    return layer


# (factory, inputs, expected output shape) for every layer.
CASES = {
    "embeddings": (
        _embeddings,
        lambda: (RNG.integers(0, 30, (2, 6)), RNG.integers(0, 2, (2, 6))),
        (2, 6, HIDDEN),
    ),
    "attention": (
        lambda **kw: BertSelfAttention(HIDDEN, 4, **kw),
        lambda: (HIDDEN_STATES, attention_bias(INPUT_MASK)),
        (2, 6, HIDDEN),
    ),
    "block": (
        lambda **kw: TransformerBlock(HIDDEN, 4, 32, **kw),
        lambda: (HIDDEN_STATES, attention_bias(INPUT_MASK)),
        (2, 6, HIDDEN),
    ),
    "mlm_head": (
        lambda **kw: MaskedLMHead(_built_embeddings(), **kw),
        lambda: (HIDDEN_STATES, np.array([[1, 2, 0], [5, 4, 3]])),
        (2, 3, 30),
    ),
    "nsp_head": (lambda **kw: NextSentenceHead(**kw), lambda: (HIDDEN_STATES[:, 0],), (2, 2)),
}


class LayerContractTest(tf.test.TestCase):
    def _each(self):
        return [(factory, make_inputs(), shape) for factory, make_inputs, shape in CASES.values()]

    def test_output_shape(self):
        for factory, inputs, shape in self._each():
            self.assertEqual(tuple(factory()(*inputs).shape), shape)

    def test_config_round_trip_gives_the_same_outputs(self):
        for factory, inputs, _ in self._each():
            layer = factory()
            expected = layer(*inputs)
            restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
            self.assertEqual(type(restored), type(layer))
            restored(*inputs)
            restored.set_weights(layer.get_weights())
            self.assertAllClose(restored(*inputs), expected)

    def test_training_step_reduces_a_loss(self):
        for factory, inputs, _ in self._each():
            layer = factory()
            layer(*inputs)
            optimizer = keras.optimizers.SGD(0.1)

            def loss():
                return tf.reduce_mean(tf.square(layer(*inputs) - 1.0))  # noqa: B023

            before = float(loss())
            with tf.GradientTape() as tape:
                value = loss()
            variables = layer.trainable_variables
            if isinstance(layer, MaskedLMHead):  # of the tied embeddings, only the word table is used
                table = layer.embeddings.word_embeddings
                unused = [v for v in layer.embeddings.weights if v is not table]
                variables = [v for v in variables if not any(v is u for u in unused)]
            gradients = tape.gradient(value, variables)
            self.assertFalse(any(gradient is None for gradient in gradients))
            optimizer.apply(gradients, variables)
            self.assertLess(float(loss()), before)

    def test_mixed_precision_keeps_float32_variables(self):
        for policy in ("mixed_float16", "mixed_bfloat16"):
            for factory, inputs, _ in self._each():
                layer = factory(dtype=policy)
                output = layer(*inputs)
                heads = isinstance(layer, MaskedLMHead | NextSentenceHead)
                self.assertEqual(output.dtype, tf.float32 if heads else tf.as_dtype(policy[6:]))
                for variable in layer.weights:
                    self.assertEqual(variable.dtype, "float32", variable.path)
                self.assertAllEqual(
                    tf.math.is_finite(tf.cast(output, tf.float32)), tf.ones_like(output, tf.bool)
                )


class EmbeddingsTest(tf.test.TestCase):
    def test_sum_of_three_tables_then_layer_norm(self):
        layer = _embeddings(dropout_rate=0.5)
        ids, segments = np.array([[3, 7, 29]]), np.array([[0, 1, 1]])
        output = layer(ids, segments)  # inference: no dropout
        summed = (
            layer.word_embeddings.numpy()[ids]
            + layer.token_type_embeddings.numpy()[segments]
            + layer.position_embeddings.numpy()[:3]
        )
        mean, var = summed.mean(-1, keepdims=True), summed.var(-1, keepdims=True)
        self.assertAllClose(output, (summed - mean) / np.sqrt(var + 1e-12), atol=1e-5)

    def test_truncated_normal_initialization(self):
        table = _embeddings(initializer_range=0.02)
        table.build()
        values = table.word_embeddings.numpy()
        self.assertLessEqual(np.abs(values).max(), 0.04 + 1e-6)
        self.assertAllClose(values.std(), 0.02 * 0.88, atol=0.004)  # std of N(0,1) cut at 2 sigma


class AttentionTest(tf.test.TestCase):
    def test_padded_keys_are_ignored(self):
        layer = BertSelfAttention(HIDDEN, 4, dropout_rate=0.0)
        bias = attention_bias(INPUT_MASK)
        changed = HIDDEN_STATES.copy()
        changed[0, 4:] = 100.0  # the padding of row 0
        self.assertAllClose(layer(HIDDEN_STATES, bias)[0, :4], layer(changed, bias)[0, :4], atol=1e-5)

    def test_training_path_without_dropout_matches_fused_path(self):
        layer = BertSelfAttention(HIDDEN, 4, dropout_rate=0.1)
        bias = attention_bias(INPUT_MASK)
        fused = layer(HIDDEN_STATES, bias, training=False)
        layer.probs_dropout.rate = 0.0  # keeps the explicit softmax path, without dropout
        self.assertAllClose(layer(HIDDEN_STATES, bias, training=True), fused, atol=1e-5)

    def test_dropout_acts_in_training_only(self):
        layer = BertSelfAttention(HIDDEN, 4, dropout_rate=0.5)
        bias = attention_bias(INPUT_MASK)
        self.assertAllClose(layer(HIDDEN_STATES, bias), layer(HIDDEN_STATES, bias, training=False))
        self.assertNotAllClose(layer(HIDDEN_STATES, bias, training=True), layer(HIDDEN_STATES, bias))

    def test_mask_bias_is_minus_ten_thousand(self):
        self.assertAllEqual(attention_bias(np.array([[1, 0]]))[0, 0, 0], [0.0, -10000.0])


class HeadsTest(tf.test.TestCase):
    def test_gather_positions(self):
        sequence = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
        positions = np.array([[3, 0], [1, 1]])
        self.assertAllEqual(gather_positions(sequence, positions), sequence[[[0, 0], [1, 1]], positions])

    def test_mlm_logits_are_tied_to_the_word_embeddings(self):
        embeddings = _built_embeddings()
        head = MaskedLMHead(embeddings)
        positions = np.array([[1, 2, 0], [5, 4, 3]])
        head(HIDDEN_STATES, positions)
        head.output_bias.assign(RNG.normal(size=30).astype("float32"))
        hidden = HIDDEN_STATES[np.arange(2)[:, None], positions]
        transformed = gelu(hidden @ head.transform_dense.kernel.numpy() + head.transform_dense.bias.numpy())
        transformed = head.layer_norm(transformed)
        expected = transformed @ embeddings.word_embeddings.numpy().T + head.output_bias.numpy()
        self.assertAllClose(head(HIDDEN_STATES, positions), expected, atol=1e-5)

    def test_gelu_is_the_tanh_approximation(self):
        x = np.linspace(-5, 5, 41).astype("float32")
        expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
        self.assertAllClose(gelu(x), expected, atol=1e-6)
