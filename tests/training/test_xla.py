"""The whole pretraining step compiles with XLA (what a TPU runs) through the real loop on CPU,
and learns what the uncompiled loop learns."""

import tempfile

import keras
import numpy as np
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.models import BertPretrainer
from bert_tf.models.pretrainer import example_features
from bert_tf.training import optimization, pretraining
from bert_tf.training.loop import Phase, Trainer

SEQ, PRED, BATCH, VOCAB = 16, 3, 4, 50


def _batches(context):
    # Static shapes, as a TPU needs: every batch full (drop_remainder).
    rng = np.random.default_rng(0)
    count = 32
    features = {
        "input_ids": rng.integers(5, VOCAB, (count, SEQ)).astype(np.int32),
        "input_mask": np.ones((count, SEQ), np.int32),
        "segment_ids": np.repeat([[0] * (SEQ // 2) + [1] * (SEQ // 2)], count, 0).astype(np.int32),
        "masked_lm_positions": rng.integers(1, SEQ, (count, PRED)).astype(np.int32),
        "masked_lm_ids": rng.integers(5, VOCAB, (count, PRED)).astype(np.int32),
        "masked_lm_weights": np.ones((count, PRED), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (count, 1)).astype(np.int32),
    }
    return tf.data.Dataset.from_tensor_slices(features).repeat().batch(BATCH, drop_remainder=True)


def _train(jit_compile: bool) -> list[float]:
    keras.utils.set_random_seed(3)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=SEQ,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = BertPretrainer(config)
    model(example_features(1, SEQ, PRED))
    optimizer = optimization.create_optimizer(1e-2, 6, 1, presummed_gradients=True)
    trainer = Trainer(
        tf.distribute.get_strategy(),
        model,
        optimizer,
        pretraining.pretraining_loss_share,
        tempfile.mkdtemp(),
        global_batch_size=BATCH,
        totals_fn=pretraining.masked_lm_totals,
        model_inputs=pretraining.model_inputs,
        steps_per_loop=2,
        save_checkpoints_steps=6,
        jit_compile=jit_compile,
        verbose=False,
    )
    result = trainer.train([Phase("all", 0, 6, _batches)])
    return trainer, [entry["loss"] for entry in result.history]


class XlaLoopTest(tf.test.TestCase):
    def test_jit_compiled_loop_matches_the_uncompiled_one(self):
        (trainer, compiled), (_, plain) = _train(jit_compile=True), _train(jit_compile=False)
        self.assertLen(compiled, 3)
        self.assertAllClose(compiled, plain, rtol=1e-3, atol=1e-4)
        # The step the loop ran is one XLA program holding the update too: AdamW's square
        # root of the second moment and the global-norm clipping are in its HLO.
        batch = next(iter(_batches(None)))
        hlo = trainer.compiled_step.experimental_get_compiler_ir(batch)(stage="hlo")
        self.assertIn("sqrt", hlo)
        self.assertGreater(hlo.count("parameter("), 2 * len(trainer.model.trainable_variables))
