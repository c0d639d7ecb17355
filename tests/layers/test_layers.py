"""Every layer: the shared contract (tests/harness.py), then each layer's own math."""

import numpy as np
import scipy.special
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
    gelu_exact,
)
from tests.harness import run_layer_test

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


def _unused_embedding_tables(head):
    """Of the tied embeddings a masked LM head tracks, it uses only the word table."""
    table = head.embeddings.word_embeddings
    return [variable for variable in head.embeddings.weights if variable is not table]


# Parameter counts from the architecture, for HIDDEN 16, 4 heads, intermediate 32, vocab 30,
# 10 positions, 2 token types.
EMBEDDING_PARAMS = (30 + 2 + 10) * HIDDEN + 2 * HIDDEN  # three tables, LayerNorm gamma and beta
ATTENTION_PARAMS = 4 * (HIDDEN * HIDDEN + HIDDEN)  # query, key, value, output projections
BLOCK_PARAMS = ATTENTION_PARAMS + (HIDDEN * 32 + 32) + (32 * HIDDEN + HIDDEN) + 2 * 2 * HIDDEN


class LayerContractTest(tf.test.TestCase):
    """Shapes, weight counts, config round trip, a training step and mixed precision per layer."""

    def test_embeddings(self):
        run_layer_test(
            self,
            _embeddings,
            (RNG.integers(0, 30, (2, 6)), RNG.integers(0, 2, (2, 6))),
            expected_output_shape=(2, 6, HIDDEN),
            expected_num_trainable_weights=5,
            expected_num_params=EMBEDDING_PARAMS,
        )

    def test_attention(self):
        run_layer_test(
            self,
            lambda **kw: BertSelfAttention(HIDDEN, 4, **kw),
            (HIDDEN_STATES, attention_bias(INPUT_MASK)),
            expected_output_shape=(2, 6, HIDDEN),
            expected_num_trainable_weights=8,
            expected_num_params=ATTENTION_PARAMS,
        )

    def test_transformer_block(self):
        run_layer_test(
            self,
            lambda **kw: TransformerBlock(HIDDEN, 4, 32, **kw),
            (HIDDEN_STATES, attention_bias(INPUT_MASK)),
            expected_output_shape=(2, 6, HIDDEN),
            expected_num_trainable_weights=16,
            expected_num_params=BLOCK_PARAMS,
        )

    def test_masked_lm_head(self):
        # Its own transform dense, LayerNorm and output bias, plus the embeddings it is tied to.
        run_layer_test(
            self,
            lambda **kw: MaskedLMHead(_built_embeddings(), **kw),
            (HIDDEN_STATES, np.array([[1, 2, 0], [5, 4, 3]])),
            expected_output_shape=(2, 3, 30),
            expected_num_trainable_weights=5 + 5,
            expected_num_params=(HIDDEN * HIDDEN + HIDDEN) + 2 * HIDDEN + 30 + EMBEDDING_PARAMS,
            float32_output=True,
            unused_variables=_unused_embedding_tables,
        )

    def test_next_sentence_head(self):
        run_layer_test(
            self,
            lambda **kw: NextSentenceHead(**kw),
            (HIDDEN_STATES[:, 0],),
            expected_output_shape=(2, 2),
            expected_num_trainable_weights=2,
            expected_num_params=HIDDEN * 2 + 2,
            float32_output=True,
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

    def test_training_without_attention_dropout_runs_through_dot_product_attention(self):
        from unittest import mock

        import keras

        layer = BertSelfAttention(HIDDEN, 4, dropout_rate=0.0)
        bias = attention_bias(INPUT_MASK)
        expected = layer(HIDDEN_STATES, bias, training=False)
        original = keras.ops.dot_product_attention
        with mock.patch.object(keras.ops, "dot_product_attention", side_effect=original) as fused:
            trained = layer(HIDDEN_STATES, bias, training=True)
        self.assertEqual(fused.call_count, 1)  # the op a GPU backend may fuse, in training too
        self.assertAllClose(trained, expected, atol=1e-6)

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

    def test_gelu_of_half_precision_rounds_once(self):
        # Computed in float32 and rounded to the input's dtype once: each value is the float32
        # GELU's nearest bfloat16 (or float16), where rounding after every op drifts from it.
        x = np.linspace(-5, 5, 401).astype("float32")
        for function in (gelu, gelu_exact):
            for dtype in (tf.bfloat16, tf.float16):
                with self.subTest(function=function.__name__, dtype=dtype.name):
                    half = tf.cast(x, dtype)
                    result = function(half)
                    self.assertEqual(result.dtype, dtype)
                    self.assertAllEqual(result, tf.cast(function(tf.cast(half, tf.float32)), dtype))
        exact = 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))
        self.assertAllClose(gelu_exact(x), exact, atol=1e-6)
