"""Schedule values, optimizer construction and weight-decay exclusions."""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.training import optimization


class WarmupLinearDecayTest(tf.test.TestCase):
    def test_values_at_known_steps(self):
        schedule = optimization.WarmupLinearDecay(1e-4, num_train_steps=1000, num_warmup_steps=100)
        # Warmup: lr * step / warmup. After: lr * (1 - step / num_train_steps), as the original.
        expected = {
            0: 0.0,
            1: 1e-6,
            50: 5e-5,
            99: 9.9e-5,
            100: 9e-5,
            500: 5e-5,
            999: 1e-7,
            1000: 0.0,
            2000: 0.0,
        }
        for step, value in expected.items():
            self.assertAllClose(float(schedule(step)), value, rtol=1e-5, atol=1e-12, msg=f"step {step}")

    def test_no_warmup_starts_at_peak(self):
        schedule = optimization.WarmupLinearDecay(2e-5, num_train_steps=10, num_warmup_steps=0)
        self.assertAllClose(float(schedule(0)), 2e-5)
        self.assertAllClose(float(schedule(5)), 1e-5)

    def test_optimizer_follows_schedule_as_it_steps(self):
        optimizer = optimization.create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=4)
        variable = keras.Variable(np.ones(3, np.float32))
        rates = []
        for _ in range(6):
            rates.append(float(optimizer.learning_rate))
            optimizer.apply([tf.ones(3)], [variable])
        self.assertAllClose(rates, [0.0, 2.5e-4, 5e-4, 7.5e-4, 6e-4, 5e-4], rtol=1e-5)

    def test_bad_values_are_rejected(self):
        with self.assertRaisesRegex(ValueError, "num_warmup_steps"):
            optimization.WarmupLinearDecay(1e-4, num_train_steps=10, num_warmup_steps=20)
        with self.assertRaisesRegex(ValueError, "unknown optimizer 'sgd'"):
            optimization.create_optimizer(1e-4, 10, 1, optimizer="sgd")


class CreateOptimizerTest(tf.test.TestCase):
    def test_adamw_hyperparameters(self):
        optimizer = optimization.create_optimizer(1e-4, 100, 10)
        self.assertIsInstance(optimizer, keras.optimizers.AdamW)
        self.assertEqual(
            (
                optimizer.weight_decay,
                optimizer.beta_1,
                optimizer.beta_2,
                optimizer.epsilon,
                optimizer.global_clipnorm,
            ),
            (0.01, 0.9, 0.999, 1e-6, 1.0),
        )

    def test_lamb_is_keras_lamb(self):
        optimizer = optimization.create_optimizer(1e-3, 100, 10, optimizer="lamb")
        self.assertIsInstance(optimizer, keras.optimizers.Lamb)
        self.assertEqual(optimizer.weight_decay, 0.01)

    def test_loss_scale_under_mixed_float16(self):
        previous = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy("mixed_float16")
        try:
            optimizer = optimization.create_optimizer(1e-4, 100, 10)
        finally:
            keras.mixed_precision.set_global_policy(previous)
        self.assertIsInstance(optimizer, keras.mixed_precision.LossScaleOptimizer)
        self.assertIsInstance(optimizer.inner_optimizer, optimization.AdamW)
        self.assertNotIsInstance(
            optimization.create_optimizer(1e-4, 100, 10), keras.mixed_precision.LossScaleOptimizer
        )

    def test_global_norm_clipping_and_decoupled_decay(self):
        # One AdamW step on a gradient of norm 10: clipped to norm 1, Adam's first step moves
        # each weight by ~lr * sign(g); decay multiplies the weight by (1 - lr * wd) first.
        optimizer = optimization.create_optimizer(
            0.1, num_train_steps=10, num_warmup_steps=0, weight_decay=0.5
        )
        kernel = keras.Variable(np.full(4, 2.0, np.float32), name="kernel")
        bias = keras.Variable(np.full(4, 2.0, np.float32), name="bias")
        optimizer.apply([tf.fill([4], 5.0), tf.fill([4], 0.0)], [kernel, bias])
        self.assertAllClose(kernel.numpy(), np.full(4, 2.0 * (1 - 0.1 * 0.5) - 0.1), rtol=1e-5)
        self.assertAllClose(bias.numpy(), np.full(4, 2.0), rtol=1e-6)  # excluded from decay, zero gradient

    def test_adamw_is_the_adam_paper_update_with_decoupled_decay(self):
        # A NumPy AdamW from the Adam paper's Algorithm 1 (epsilon added to the bias-corrected
        # sqrt(v), as PyTorch does) with decoupled decay applied first, on gradients from
        # 1e-9 to 1e-2: Keras' own Adam, whose epsilon is in effect 1/sqrt(1 - beta_2**t)
        # times larger, moves the small ones visibly less.
        lr, decay, beta_1, beta_2, epsilon = 1e-3, 0.01, 0.9, 0.999, 1e-6
        rng = np.random.default_rng(0)
        # Weights as small as BERT's: float32 resolves their moves.
        start = (0.02 * rng.normal(size=8)).astype(np.float32)
        scales = np.logspace(-9, -2, 8).astype(np.float32)
        ours = optimization.AdamW(learning_rate=lr, weight_decay=decay, epsilon=epsilon)
        unfused = optimization.AdamW(learning_rate=lr, weight_decay=decay, epsilon=epsilon)
        unfused.fused_on_tensorflow = False  # the keras.ops update of the other backends
        stock = keras.optimizers.AdamW(learning_rate=lr, weight_decay=decay, epsilon=epsilon)
        ours_weights, unfused_weights, stock_weights = (keras.Variable(start) for _ in range(3))
        weights, m, v = start.astype(np.float64), np.zeros(8), np.zeros(8)
        for step in range(1, 31):
            gradient = (rng.normal(size=8) * scales).astype(np.float32)
            ours.apply([tf.constant(gradient)], [ours_weights])
            unfused.apply([tf.constant(gradient)], [unfused_weights])
            stock.apply([tf.constant(gradient)], [stock_weights])
            m = beta_1 * m + (1 - beta_1) * gradient
            v = beta_2 * v + (1 - beta_2) * gradient.astype(np.float64) ** 2
            weights -= lr * decay * weights
            weights -= lr * (m / (1 - beta_1**step)) / (np.sqrt(v / (1 - beta_2**step)) + epsilon)
        self.assertAllClose(ours_weights.numpy() - start, weights - start, rtol=1e-3, atol=1e-8)
        self.assertAllClose(unfused_weights.numpy() - start, weights - start, rtol=1e-3, atol=1e-8)
        moved = np.abs(weights - start)
        self.assertLess(np.abs(stock_weights.numpy() - start)[3], 0.5 * moved[3])  # gradients ~1e-6


class WeightDecayExclusionTest(tf.test.TestCase):
    def test_layer_norm_and_bias_are_not_decayed_on_the_real_model(self):
        from bert_tf.config import load_config
        from bert_tf.models import BertPretrainer
        from bert_tf.models.pretrainer import example_features

        model = BertPretrainer(load_config("bert_tiny").replace(vocab_size=60))
        model(example_features(1, 8, 2))
        optimizer = optimization.create_optimizer(1e-4, 100, 10)
        decayed = {v.path for v in model.trainable_variables if optimization.uses_weight_decay(optimizer, v)}
        excluded = {v.path for v in model.trainable_variables} - decayed
        # Independent reference: the original rule on the Google names of the same variables
        # ("LayerNorm" / "bias" in bert/encoder/layer_0/output/LayerNorm/gamma, ...).
        from bert_tf.checkpoints import model_slots

        google_name = {slot.variable.path: slot.name for slot in model_slots(model)}
        self.assertEqual(set(google_name), {v.path for v in model.trainable_variables})
        for path, name in google_name.items():
            self.assertEqual(path in excluded, "LayerNorm" in name or "bias" in name, f"{path} ({name})")
        self.assertIn("layer_0/output_layer_norm/gamma", excluded)
        self.assertIn("masked_lm_head/output_bias", excluded)
        self.assertIn("layer_0/attention/query/kernel", decayed)
        self.assertIn("embeddings/word_embeddings", decayed)

        # And the optimizer acts on it: with zero gradients only decay moves a weight.
        variables = model.trainable_variables
        before = {v.path: v.numpy().copy() for v in variables}
        optimizer = optimization.create_optimizer(0.1, 10, 0, weight_decay=0.5)
        optimizer.apply([tf.zeros_like(v) for v in variables], variables)
        for variable in variables:
            moved = not np.allclose(variable.numpy(), before[variable.path])
            self.assertEqual(
                moved, variable.path in decayed and np.any(before[variable.path] != 0), variable.path
            )
