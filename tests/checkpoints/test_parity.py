"""Numerical parity with Hugging Face transformers and with the original TF1 layout.

The Hugging Face reference is tests/fixtures/hf_tiny, written by
tools/make_hf_parity_fixture.py with transformers' BertForPreTraining (random weights,
padding in the batch, both segment ids). The TF1 reference is a checkpoint written here
with tf.compat.v1 variables under the original names, and a numpy forward pass keyed by
those names, independent of bert_tf's code.
"""

import json
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import export_pretrained, from_pretrained

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf_tiny")
# The same model with transformers' erf GELU ("gelu"), as released HF BERT configs say.
ERF_FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf_tiny_erf")
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FLOAT32_TOLERANCE = 1e-4
# bfloat16 keeps 8 significant bits (relative error ~4e-3 per operation). On this fixture
# (outputs up to ~5 in magnitude) the largest difference measured was 0.04 (TF and JAX).
BFLOAT16_TOLERANCE = 0.1


def fixture_arrays(fixture=FIXTURE):
    inputs = dict(np.load(os.path.join(fixture, "inputs.npz")))
    expected = dict(np.load(os.path.join(fixture, "outputs.npz")))
    return inputs, expected


def pretrainer_outputs(model, inputs):
    encoded = model.encoder(inputs)
    outputs = model(inputs)
    return {
        "sequence_output": encoded["sequence_output"],
        "pooled_output": encoded["pooled_output"],
        "mlm_logits": outputs["mlm_logits"],
        "nsp_logits": outputs["nsp_logits"],
    }


def max_differences(model, inputs, expected):
    actual = pretrainer_outputs(model, inputs)
    return {
        name: float(np.abs(np.asarray(tf.cast(actual[name], tf.float32)) - expected[name]).max())
        for name in expected
    }


class HuggingFaceParityTest(tf.test.TestCase):
    def test_float32_outputs_match_transformers(self):
        model, settings = from_pretrained(FIXTURE)
        inputs, expected = fixture_arrays()
        differences = max_differences(model, inputs, expected)
        for name, difference in differences.items():
            self.assertLessEqual(difference, FLOAT32_TOLERANCE, f"{name}: {differences}")
        self.assertEqual(settings.vocab_file, os.path.join(FIXTURE, "vocab.txt"))

    def test_erf_gelu_config_matches_transformers(self):
        model, _ = from_pretrained(ERF_FIXTURE)
        self.assertEqual(model.encoder.config.hidden_act, "gelu_exact")
        inputs, expected = fixture_arrays(ERF_FIXTURE)
        differences = max_differences(model, inputs, expected)
        for name, difference in differences.items():
            self.assertLessEqual(difference, FLOAT32_TOLERANCE, f"{name}: {differences}")

    def test_mixed_bfloat16_outputs_are_close(self):
        keras.config.set_dtype_policy("mixed_bfloat16")
        try:
            model, _ = from_pretrained(FIXTURE)
        finally:
            keras.config.set_dtype_policy("float32")
        inputs, expected = fixture_arrays()
        differences = max_differences(model, inputs, expected)
        for name, difference in differences.items():
            self.assertLessEqual(difference, BFLOAT16_TOLERANCE, f"{name}: {differences}")
        self.assertGreater(max(differences.values()), FLOAT32_TOLERANCE)  # bf16 really ran

    def test_jax_backend_forward_parity_and_training_step(self):
        # The Keras backend is fixed at import: run the JAX half in a fresh interpreter.
        script = """
import json, os, sys
import numpy as np, keras, jax
assert keras.backend.backend() == "jax"
from bert_tf.checkpoints import export_pretrained
from bert_tf.checkpoints import from_pretrained
from bert_tf.models.losses import pretraining_losses
fixture = sys.argv[1]
model, _ = from_pretrained(fixture)
inputs = dict(np.load(os.path.join(fixture, "inputs.npz")))
expected = dict(np.load(os.path.join(fixture, "outputs.npz")))
outputs = jax.jit(lambda x: model(x))(inputs)
encoded = jax.jit(lambda x: model.encoder(x))(inputs)
actual = {"sequence_output": encoded["sequence_output"], "pooled_output": encoded["pooled_output"],
          "mlm_logits": outputs["mlm_logits"], "nsp_logits": outputs["nsp_logits"]}
report = {"diff": {k: float(np.abs(np.asarray(actual[k]) - expected[k]).max()) for k in expected}}
features = dict(inputs, masked_lm_ids=np.full(inputs["masked_lm_positions"].shape, 7, "int32"),
                masked_lm_weights=np.ones(inputs["masked_lm_positions"].shape, "float32"),
                next_sentence_labels=np.array([[0], [1], [1]], "int32"))
trainable = [v.value for v in model.trainable_variables]
non_trainable = [v.value for v in model.non_trainable_variables]
def loss_fn(trainable):
    outputs, _ = model.stateless_call(trainable, non_trainable, features, training=True)
    return pretraining_losses(features, outputs)["loss"]
step = jax.jit(jax.value_and_grad(loss_fn))
losses = []
for _ in range(4):
    loss, grads = step(trainable)
    losses.append(float(loss))
    trainable = [w - 0.05 * g for w, g in zip(trainable, grads)]
report["losses"] = losses
report["grads_finite"] = bool(all(np.isfinite(np.asarray(g)).all() for g in grads))
report["grads_nonzero"] = sum(bool(np.abs(np.asarray(g)).max() > 0) for g in grads)
report["num_grads"] = len(grads)
print("REPORT" + json.dumps(report))
"""
        env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
        env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        result = subprocess.run(
            [sys.executable, "-c", script, FIXTURE], capture_output=True, text=True, env=env, timeout=300
        )
        lines = [line for line in result.stdout.splitlines() if line.startswith("REPORT")]
        self.assertTrue(lines, f"JAX subprocess failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        report = json.loads(lines[-1][len("REPORT") :])
        for name, difference in report["diff"].items():
            self.assertLessEqual(difference, FLOAT32_TOLERANCE, f"{name}: {report['diff']}")
        self.assertTrue(report["grads_finite"])
        self.assertEqual(report["grads_nonzero"], report["num_grads"])
        self.assertLess(report["losses"][-1], report["losses"][0], report["losses"])


# --- the original TF1 layout ------------------------------------------------------------

VOCAB, HIDDEN, LAYERS, HEADS, INTERMEDIATE, POSITIONS = 40, 32, 2, 4, 64, 16


def original_variables(rng):
    """Name -> random array with the shapes of the original modeling.py / run_pretraining.py."""
    shapes = {
        "bert/embeddings/word_embeddings": (VOCAB, HIDDEN),
        "bert/embeddings/token_type_embeddings": (2, HIDDEN),
        "bert/embeddings/position_embeddings": (POSITIONS, HIDDEN),
        "bert/embeddings/LayerNorm/gamma": (HIDDEN,),
        "bert/embeddings/LayerNorm/beta": (HIDDEN,),
        "bert/pooler/dense/kernel": (HIDDEN, HIDDEN),
        "bert/pooler/dense/bias": (HIDDEN,),
        "cls/predictions/transform/dense/kernel": (HIDDEN, HIDDEN),
        "cls/predictions/transform/dense/bias": (HIDDEN,),
        "cls/predictions/transform/LayerNorm/gamma": (HIDDEN,),
        "cls/predictions/transform/LayerNorm/beta": (HIDDEN,),
        "cls/predictions/output_bias": (VOCAB,),
        "cls/seq_relationship/output_weights": (2, HIDDEN),
        "cls/seq_relationship/output_bias": (2,),
    }
    for i in range(LAYERS):
        layer = f"bert/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            shapes[f"{layer}/attention/self/{part}/kernel"] = (HIDDEN, HIDDEN)
            shapes[f"{layer}/attention/self/{part}/bias"] = (HIDDEN,)
        shapes[f"{layer}/attention/output/dense/kernel"] = (HIDDEN, HIDDEN)
        shapes[f"{layer}/attention/output/dense/bias"] = (HIDDEN,)
        shapes[f"{layer}/intermediate/dense/kernel"] = (HIDDEN, INTERMEDIATE)
        shapes[f"{layer}/intermediate/dense/bias"] = (INTERMEDIATE,)
        shapes[f"{layer}/output/dense/kernel"] = (INTERMEDIATE, HIDDEN)
        shapes[f"{layer}/output/dense/bias"] = (HIDDEN,)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[f"{layer}/{norm}/gamma"] = (HIDDEN,)
            shapes[f"{layer}/{norm}/beta"] = (HIDDEN,)
    return {
        name: (
            1.0 + 0.2 * rng.normal(size=shape) if name.endswith("gamma") else 0.2 * rng.normal(size=shape)
        ).astype("float32")
        for name, shape in shapes.items()
    }


def numpy_bert(w, input_ids, input_mask, segment_ids, masked_lm_positions):
    """The original math in float64 numpy: post-LN blocks, tanh GELU, -10000 mask."""

    def layer_norm(x, prefix):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * w[prefix + "/gamma"] + w[prefix + "/beta"]

    def dense(x, prefix):
        return x @ w[prefix + "/kernel"] + w[prefix + "/bias"]

    def gelu(x):
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))

    w = {name: value.astype("float64") for name, value in w.items()}
    batch, seq = input_ids.shape
    x = (
        w["bert/embeddings/word_embeddings"][input_ids]
        + w["bert/embeddings/token_type_embeddings"][segment_ids]
        + w["bert/embeddings/position_embeddings"][:seq]
    )
    x = layer_norm(x, "bert/embeddings/LayerNorm")
    adder = (1.0 - input_mask[:, None, None, :]) * -10000.0
    size = HIDDEN // HEADS
    for i in range(LAYERS):
        p = f"bert/encoder/layer_{i}"

        def heads(t):
            return t.reshape(batch, seq, HEADS, size).transpose(0, 2, 1, 3)

        q, k, v = (heads(dense(x, f"{p}/attention/self/{part}")) for part in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + adder
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, HIDDEN)
        attention = layer_norm(
            dense(context, f"{p}/attention/output/dense") + x, f"{p}/attention/output/LayerNorm"
        )
        ffn = dense(gelu(dense(attention, f"{p}/intermediate/dense")), f"{p}/output/dense")
        x = layer_norm(ffn + attention, f"{p}/output/LayerNorm")
    pooled = np.tanh(dense(x[:, 0], "bert/pooler/dense"))
    gathered = x[np.arange(batch)[:, None], masked_lm_positions]
    transformed = layer_norm(
        gelu(dense(gathered, "cls/predictions/transform/dense")), "cls/predictions/transform/LayerNorm"
    )
    mlm = transformed @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    nsp = pooled @ w["cls/seq_relationship/output_weights"].T + w["cls/seq_relationship/output_bias"]
    return {"sequence_output": x, "pooled_output": pooled, "mlm_logits": mlm, "nsp_logits": nsp}


def write_tf1_checkpoint(directory, arrays, with_optimizer_slots=True):
    """Writes variables the way the original run_pretraining.py's Saver does."""
    graph = tf.Graph()
    with graph.as_default():
        for name, value in arrays.items():
            tf.compat.v1.get_variable(name, initializer=tf.constant(value))
            if with_optimizer_slots:
                tf.compat.v1.get_variable(name + "/adam_m", initializer=tf.zeros_like(value))
                tf.compat.v1.get_variable(name + "/adam_v", initializer=tf.zeros_like(value))
        tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, os.path.join(directory, "bert_model.ckpt"))
    config = {
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": POSITIONS,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
    }
    with open(os.path.join(directory, "bert_config.json"), "w") as file:
        json.dump(config, file)
    with open(os.path.join(directory, "vocab.txt"), "w") as file:
        file.write(
            "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(VOCAB - 5)])
        )


def tf1_inputs():
    input_mask = np.array([[1] * 10, [1] * 7 + [0] * 3], "int32")
    return {
        "input_ids": np.array([[2, 5, 9, 4, 11, 3, 12, 30, 39, 3], [2, 6, 7, 4, 20, 3, 8, 0, 0, 0]], "int32"),
        "input_mask": input_mask,
        "segment_ids": np.array([[0] * 6 + [1] * 4, [0] * 6 + [1] + [0] * 3], "int32"),
        "masked_lm_positions": np.array([[3, 7, 1], [3, 5, 0]], "int32"),
    }


class OriginalLayoutParityTest(tf.test.TestCase):
    def test_tf1_checkpoint_loads_and_matches_numpy(self):
        directory = os.path.join(tempfile.mkdtemp(), "uncased_L-2_H-32_A-4")
        os.makedirs(directory)
        arrays = original_variables(np.random.default_rng(7))
        write_tf1_checkpoint(directory, arrays)
        model, settings = from_pretrained(directory)
        inputs = tf1_inputs()
        expected = numpy_bert(arrays, **inputs)
        actual = pretrainer_outputs(model, inputs)
        for name in expected:
            self.assertAllClose(actual[name], expected[name], atol=FLOAT32_TOLERANCE, msg=name)
        self.assertTrue(settings.lower_case)
        self.assertIn("uncased", settings.lower_case_reason)

    def test_export_restores_into_original_tf1_variables(self):
        # What the original run_classifier.py does with init_checkpoint: a Saver over
        # graph variables with the original names restores our export.
        directory = tempfile.mkdtemp()
        arrays = original_variables(np.random.default_rng(8))
        write_tf1_checkpoint(directory, arrays, with_optimizer_slots=False)
        model, _ = from_pretrained(directory)
        out = os.path.join(directory, "export")
        export_pretrained(model, out, formats=("google",))
        graph = tf.Graph()
        with graph.as_default():
            variables = {
                name: tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.float32)
                for name, value in arrays.items()
            }
            saver = tf.compat.v1.train.Saver(variables)
            with tf.compat.v1.Session(graph=graph) as session:
                saver.restore(session, os.path.join(out, "bert_model.ckpt"))
                restored = session.run(variables)
        for name, value in arrays.items():
            self.assertAllEqual(restored[name], value, msg=name)
