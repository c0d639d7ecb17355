"""Encoder, pretrainer and task models: the shared contract (tests/harness.py), then their own math."""

import os
import tempfile
import warnings

import keras
import numpy as np
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer
from bert_tf.models.losses import pretraining_losses
from bert_tf.tasks.choice.model import BertMultipleChoice
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.span.model import BertSpanLabeler
from bert_tf.tasks.token.model import BertTokenClassifier
from tests.harness import run_model_test

CONFIG = BertConfig(
    vocab_size=50,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
)


def pretraining_batch(batch=4, seq=10, predictions=3, seed=0):
    """A batch with the original feature names and shapes, padding included."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, seq + 1, batch)
    lengths[0] = seq
    input_mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")
    segment_ids = ((np.arange(seq)[None] >= lengths[:, None] // 2) * input_mask).astype("int32")
    positions = np.stack([rng.choice(np.arange(1, length), predictions, replace=False) for length in lengths])
    weights = np.ones((batch, predictions), "float32")
    weights[1, -1] = 0.0
    return {
        "input_ids": (rng.integers(5, CONFIG.vocab_size, (batch, seq)) * input_mask).astype("int32"),
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(5, CONFIG.vocab_size, (batch, predictions)).astype("int32"),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }


def encoder_batch(batch=4, seq=10):
    features = pretraining_batch(batch, seq)
    return {name: features[name] for name in ("input_ids", "input_mask", "segment_ids")}


def task_models(encoder):
    return {
        "classifier": BertClassifier(encoder, num_classes=3),
        "regression": BertClassifier(encoder, num_classes=1),
        "token_classifier": BertTokenClassifier(encoder, num_classes=5),
        "span_labeler": BertSpanLabeler(encoder),
    }


# Parameter counts from the architecture, for CONFIG: hidden H, intermediate FFN, vocab V,
# P positions, T token types.
H, FFN, V, P, T = 32, 64, 50, 16, 2
EMBEDDING_PARAMS = (V + T + P) * H + 2 * H  # three tables, LayerNorm gamma and beta
BLOCK_PARAMS = 4 * (H * H + H) + (H * FFN + FFN) + (FFN * H + H) + 2 * 2 * H  # attention, FFN, 2 LayerNorms
POOLER_PARAMS = H * H + H
ENCODER_PARAMS = EMBEDDING_PARAMS + 2 * BLOCK_PARAMS + POOLER_PARAMS
ENCODER_WEIGHTS = 5 + 2 * 16 + 2
HEAD_WEIGHTS = 2  # a dense kernel and bias


def choices_batch(choices=3):
    return {name: np.stack([value] * choices, axis=1)[:2] for name, value in encoder_batch().items()}


class ModelContractTest(tf.test.TestCase):
    """Shapes, weight counts, .keras round trip, a training step and mixed precision per model."""

    def test_encoder(self):
        restored = run_model_test(
            self,
            lambda: BertEncoder(CONFIG),
            encoder_batch(),
            expected_output_shape={
                "sequence_output": (4, 10, H),
                "pooled_output": (4, H),
                "encoder_outputs": [(4, 10, H)] * 2,
            },
            expected_num_trainable_weights=ENCODER_WEIGHTS,
            expected_num_params=ENCODER_PARAMS,
            float32_output=False,
        )
        self.assertEqual(restored.config, CONFIG)
        outputs = restored(encoder_batch())
        self.assertAllEqual(outputs["encoder_outputs"][-1], outputs["sequence_output"])

    def test_pretrainer(self):
        restored = run_model_test(
            self,
            lambda: BertPretrainer(CONFIG),
            pretraining_batch(),
            expected_output_shape={"mlm_logits": (4, 3, V), "nsp_logits": (4, 2)},
            # MLM head: transform dense, LayerNorm, output bias (the word table is tied); NSP dense.
            expected_num_trainable_weights=ENCODER_WEIGHTS + 5 + HEAD_WEIGHTS,
            expected_num_params=ENCODER_PARAMS + (H * H + H) + 2 * H + V + (H * 2 + 2),
        )
        self.assertIs(restored.masked_lm_head.embeddings, restored.encoder.embeddings)
        self.assertEqual(restored.config, CONFIG)

    def test_classifier(self):
        run_model_test(
            self,
            lambda: BertClassifier(BertEncoder(CONFIG), num_classes=3),
            encoder_batch(),
            expected_output_shape=(4, 3),
            expected_num_trainable_weights=ENCODER_WEIGHTS + HEAD_WEIGHTS,
            expected_num_params=ENCODER_PARAMS + H * 3 + 3,
        )

    def test_regression(self):
        run_model_test(
            self,
            lambda: BertClassifier(BertEncoder(CONFIG), num_classes=1),
            encoder_batch(),
            expected_output_shape=(4, 1),
            expected_num_trainable_weights=ENCODER_WEIGHTS + HEAD_WEIGHTS,
            expected_num_params=ENCODER_PARAMS + H + 1,
        )

    def test_token_classifier(self):
        # Heads on the sequence output train without the pooler, which is still saved.
        run_model_test(
            self,
            lambda: BertTokenClassifier(BertEncoder(CONFIG), num_classes=5),
            encoder_batch(),
            expected_output_shape=(4, 10, 5),
            expected_num_trainable_weights=ENCODER_WEIGHTS - 2 + HEAD_WEIGHTS,
            expected_num_params=ENCODER_PARAMS + H * 5 + 5,
            expected_num_trainable_params=ENCODER_PARAMS - POOLER_PARAMS + H * 5 + 5,
        )

    def test_span_labeler(self):
        run_model_test(
            self,
            lambda: BertSpanLabeler(BertEncoder(CONFIG)),
            encoder_batch(),
            expected_output_shape={"start_logits": (4, 10), "end_logits": (4, 10)},
            expected_num_trainable_weights=ENCODER_WEIGHTS - 2 + HEAD_WEIGHTS,
            expected_num_params=ENCODER_PARAMS + H * 2 + 2,
            expected_num_trainable_params=ENCODER_PARAMS - POOLER_PARAMS + H * 2 + 2,
        )

    def test_multiple_choice(self):
        run_model_test(
            self,
            lambda: BertMultipleChoice(BertEncoder(CONFIG)),
            choices_batch(),
            expected_output_shape=(2, 3),
            expected_num_trainable_weights=ENCODER_WEIGHTS + HEAD_WEIGHTS,
            expected_num_params=ENCODER_PARAMS + H + 1,
        )


class EncoderTest(tf.test.TestCase):
    def test_pooled_output_is_tanh_dense_of_cls(self):
        encoder = BertEncoder(CONFIG)
        outputs = encoder(encoder_batch())
        cls = outputs["sequence_output"][:, 0]
        expected = np.tanh(cls @ encoder.pooler_dense.kernel.numpy() + encoder.pooler_dense.bias.numpy())
        self.assertAllClose(outputs["pooled_output"], expected, atol=1e-5)

    def test_padding_does_not_change_real_positions(self):
        encoder = BertEncoder(CONFIG)
        features = encoder_batch()
        short = {name: value[:, :7] for name, value in features.items()}
        short["input_mask"][:] = 1
        padded = {name: np.pad(value, ((0, 0), (0, 5))) for name, value in short.items()}
        self.assertAllClose(
            encoder(short)["sequence_output"], encoder(padded)["sequence_output"][:, :7], atol=1e-5
        )

    def test_int64_inputs_and_extra_features(self):
        encoder = BertEncoder(CONFIG)
        features = pretraining_batch()
        int64 = {name: value.astype("int64") for name, value in encoder_batch().items()}
        self.assertAllClose(encoder(int64)["pooled_output"], encoder(features)["pooled_output"])

    def test_missing_input_names_them(self):
        with self.assertRaisesRegex((KeyError, ValueError), "segment_ids"):
            BertEncoder(CONFIG)({"input_ids": np.ones((1, 3)), "input_mask": np.ones((1, 3))})


class SavingTest(tf.test.TestCase):
    def test_tf_checkpoint_round_trip(self):
        model, other = BertPretrainer(CONFIG), BertPretrainer(CONFIG)
        features = pretraining_batch()
        prefix = tf.train.Checkpoint(model=model).save(os.path.join(tempfile.mkdtemp(), "ckpt"))
        other(features)
        tf.train.Checkpoint(model=other).restore(prefix).assert_existing_objects_matched()
        self.assertAllClose(other(features)["mlm_logits"], model(features)["mlm_logits"])


class TaskModelTest(tf.test.TestCase):
    def test_multiple_choice_scores_each_choice_alone(self):
        encoder = BertEncoder(CONFIG)
        model = BertMultipleChoice(encoder)
        features = encoder_batch(batch=6)
        choices = {name: value.reshape(2, 3, 10) for name, value in features.items()}
        logits = model(choices)
        self.assertEqual(logits.shape, (2, 3))
        pooled = encoder(features)["pooled_output"]
        scorer = model.get_layer("scorer")
        self.assertAllClose(logits, np.reshape(scorer(pooled), (2, 3)), atol=1e-5)

    def test_classifier_learns_with_fit(self):
        model = BertClassifier(BertEncoder(CONFIG), num_classes=2)
        features = encoder_batch(batch=8)
        labels = np.array([0, 1] * 4)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=False,
        )
        history = model.fit(features, labels, epochs=5, batch_size=8, verbose=0)
        self.assertLess(history.history["loss"][-1], history.history["loss"][0])

    def test_sequence_heads_train_without_the_pooler_and_leave_the_encoder_alone(self):
        encoder = BertEncoder(CONFIG)
        models = task_models(encoder)  # one encoder shared by all heads
        pooler = {weight.path for weight in encoder.pooler_dense.weights}
        features = encoder_batch(batch=8)
        targets = {
            "token_classifier": np.zeros((8, 10), "int32"),
            "span_labeler": {"start_logits": np.zeros(8, "int32"), "end_logits": np.ones(8, "int32")},
        }
        for name, target in targets.items():
            model = models[name]
            self.assertEmpty(pooler & {weight.path for weight in model.trainable_weights})
            self.assertEmpty(pooler & {weight.path for weight in model.trainable_variables})
            self.assertContainsSubset(pooler, {weight.path for weight in model.weights})  # still saved
            model.compile(
                optimizer=keras.optimizers.Adam(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                jit_compile=False,
            )
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model.fit(features, target, epochs=1, batch_size=8, verbose=0)
                path = os.path.join(tempfile.mkdtemp(), f"{name}.keras")
                model.save(path)  # with its optimizer, which must load back without a mismatch
                keras.saving.load_model(path)
            messages = [str(w.message) for w in caught]
            self.assertEmpty(
                [m for m in messages if "Gradients do not exist" in m or "Skipping variable" in m]
            )
        self.assertContainsSubset(pooler, {weight.path for weight in models["classifier"].trainable_weights})
        self.assertTrue(encoder.pooler_dense.trainable)


class PretrainingTest(tf.test.TestCase):
    def test_losses_match_numpy(self):
        features = pretraining_batch()
        outputs = BertPretrainer(CONFIG)(features)
        losses = pretraining_losses(features, outputs)
        logits = outputs["mlm_logits"].numpy().astype("float64")
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        picked = np.take_along_axis(log_probs, features["masked_lm_ids"][..., None], -1)[..., 0]
        weights = features["masked_lm_weights"]
        mlm = -(picked * weights).sum() / (weights.sum() + 1e-5)
        nsp_logits = outputs["nsp_logits"].numpy().astype("float64")
        nsp_log_probs = nsp_logits - np.log(np.exp(nsp_logits).sum(-1, keepdims=True))
        labels = features["next_sentence_labels"][:, 0]
        nsp = -nsp_log_probs[np.arange(4), labels].mean()
        self.assertAllClose(losses["masked_lm_loss"], mlm, atol=1e-5)
        self.assertAllClose(losses["next_sentence_loss"], nsp, atol=1e-5)
        self.assertAllClose(losses["loss"], mlm + nsp, atol=1e-5)
        correct = (logits.argmax(-1) == features["masked_lm_ids"]) * weights
        self.assertAllClose(losses["masked_lm_accuracy"], correct.sum() / weights.sum())
        self.assertAllClose(losses["next_sentence_accuracy"], (nsp_logits.argmax(-1) == labels).mean())

    def _train(self, policy, jit_compile, steps=6):
        keras.config.set_dtype_policy(policy)
        try:
            keras.utils.set_random_seed(1)
            model = BertPretrainer(CONFIG)
            optimizer = keras.optimizers.Adam(1e-3)
            if policy == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(model.trainable_variables)  # outside tf.function: one trace, not two
            features = pretraining_batch()

            @tf.function(jit_compile=jit_compile)
            def step():
                with tf.GradientTape() as tape:
                    losses = pretraining_losses(features, model(features, training=True))
                    loss = losses["loss"]
                    scaled = optimizer.scale_loss(loss)
                gradients = tape.gradient(scaled, model.trainable_variables)
                optimizer.apply(gradients, model.trainable_variables)
                return loss

            losses = [float(step()) for _ in range(steps)]
            for variable in model.weights:
                self.assertEqual(variable.dtype, "float32")
            return losses
        finally:
            keras.config.set_dtype_policy("float32")

    def test_training_steps_reduce_the_loss(self):
        # XLA compilation is slow on a small CPU: compile one policy, trace the other. A float32
        # training step is checked for every model by the shared contract (ModelContractTest).
        for policy, jit_compile in (("mixed_float16", False), ("mixed_bfloat16", True)):
            with self.subTest(policy=policy, jit_compile=jit_compile):
                losses = self._train(policy, jit_compile=jit_compile)
                self.assertTrue(np.isfinite(losses).all(), losses)
                self.assertLess(losses[-1], losses[0])

    def test_mixed_precision_outputs_are_float32_and_close(self):
        features = pretraining_batch()
        reference = BertPretrainer(CONFIG)
        expected = reference(features)
        keras.config.set_dtype_policy("mixed_bfloat16")
        try:
            model = BertPretrainer(CONFIG)
        finally:
            keras.config.set_dtype_policy("float32")
        model(features)
        model.set_weights(reference.get_weights())
        outputs = model(features)
        self.assertEqual(outputs["mlm_logits"].dtype, tf.float32)
        self.assertEqual(model.encoder(features)["sequence_output"].dtype, tf.bfloat16)
        # bfloat16 keeps 8 bits of mantissa: logits of magnitude ~1 agree to a few 1e-2.
        self.assertAllClose(outputs["mlm_logits"], expected["mlm_logits"], atol=5e-2)
        self.assertAllClose(outputs["nsp_logits"], expected["nsp_logits"], atol=5e-2)
