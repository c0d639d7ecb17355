"""Rematerialization (`--remat`): the gradients of every weight are those of the model that
keeps its activations, with dropout on, step after step, on TensorFlow and on JAX; a
pretraining run with --remat trains to the same losses as one without."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import load_config
from bert_tf.layers.transformer_block import rematerialize
from bert_tf.models.encoder import BertEncoder
from bert_tf.training import pretraining
from bert_tf.training.settings import PretrainingConfig
from tests.harness.data import CORPUS_TOKENS, corpus_config, write_config, write_corpus, write_vocab
from tests.harness.jax_backend import run_on_jax
from tests.harness.processes import REPO

# Two training steps of a small encoder with dropout, from the same seed, keeping activations
# or recomputing them; prints the largest gradient difference (the script runs on either backend).
GRADIENTS = """
import json, sys
import keras, numpy as np
from bert_tf.config import load_config
from bert_tf.layers.transformer_block import rematerialize
from bert_tf.models.encoder import BertEncoder

ids = np.random.RandomState(0).randint(5, 100, size=(4, 24))
inputs = {"input_ids": ids, "input_mask": (np.arange(24) < 20) * np.ones_like(ids), "segment_ids": 0 * ids}
weights = np.random.RandomState(1).randn(4, 24, 64).astype("float32")
config = load_config("bert_tiny").replace(vocab_size=100, hidden_size=64, intermediate_size=128)


def gradients(remat):
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(config)
    blocks = rematerialize(encoder, remat)
    steps = []
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = keras.ops.sum(encoder(inputs, training=True)["sequence_output"] * weights)
            return tape.gradient(loss, encoder.trainable_variables)

        for _ in range(2):
            steps.append([np.asarray(tf.convert_to_tensor(g)) for g in step() if g is not None])
    else:
        import jax

        trainable = [v.value for v in encoder.trainable_variables]
        state = [v.value for v in encoder.non_trainable_variables]

        @jax.jit
        def loss(trainable, state):
            outputs, state = encoder.stateless_call(trainable, state, inputs, training=True)
            return (outputs["sequence_output"] * weights).sum(), state

        for _ in range(2):
            (_, state), grads = jax.value_and_grad(loss, has_aux=True)(trainable, state)
            steps.append([np.asarray(g) for g in grads])
    return blocks, steps


blocks, kept = gradients(False)
blocks, recomputed = gradients(True)
difference = max(float(np.abs(a - b).max()) for x, y in zip(kept, recomputed) for a, b in zip(x, y))
largest = max(float(np.abs(a).max()) for x in kept for a in x)
print("REPORT" + json.dumps({"blocks": blocks, "difference": difference, "largest": largest}))
"""


class RematTest(tf.test.TestCase):
    def _check(self, report):
        self.assertEqual(report["blocks"], 2)
        # Float noise of a recomputation: ~1e-7 of the largest gradient. Other dropout masks
        # (Keras' RematScope on TensorFlow) differ by ~3% of it.
        self.assertLess(report["difference"], 1e-5 * report["largest"])

    def test_gradients_equal_on_tensorflow(self):
        env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
        result = subprocess.run(
            [sys.executable, "-c", GRADIENTS], capture_output=True, text=True, env=env, cwd=REPO, timeout=600
        )
        reports = [line for line in result.stdout.splitlines() if line.startswith("REPORT")]
        self.assertTrue(reports, result.stderr[-3000:])
        self._check(json.loads(reports[-1][len("REPORT") :]))

    def test_gradients_equal_on_jax(self):
        self._check(run_on_jax(GRADIENTS))

    def test_a_block_keeps_its_outputs_and_weights(self):
        keras.utils.set_random_seed(4)
        encoder = BertEncoder(load_config("bert_tiny").replace(vocab_size=100))
        ids = np.random.RandomState(2).randint(5, 100, size=(2, 10))
        inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": 0 * ids}
        before = encoder(inputs)["sequence_output"]
        self.assertEqual(rematerialize(encoder), 2)
        self.assertAllClose(encoder(inputs)["sequence_output"], before)
        self.assertEqual(len(encoder.weights), len(BertEncoder(load_config("bert_tiny")).weights))

    @pytest.mark.slow  # two pretraining runs: ~1 min on 2 cores
    def test_pretraining_with_remat_trains_as_without(self):
        work = Path(tempfile.mkdtemp())
        fields = dict(
            config=write_config(work / "config.json", corpus_config(dropout=0.1)),
            corpus=write_corpus(work / "corpus.txt", documents=6),
            vocab_file=write_vocab(work / "vocab.txt", CORPUS_TOKENS),
            train_batch_size=8,
            max_seq_length=32,
            max_predictions_per_seq=5,
            num_train_steps=6,
            num_warmup_steps=1,
            learning_rate=3e-3,
            steps_per_loop=3,
            seed=1,
        )
        losses = {}
        for remat in (False, True):
            settings = PretrainingConfig(**fields, remat=remat, model_dir=str(work / f"remat_{remat}"))
            history = pretraining.run_pretraining(settings).train.history
            losses[remat] = [row["loss"] for row in history]
        self.assertLen(losses[True], 2)
        self.assertAllClose(losses[True], losses[False], rtol=1e-5)
