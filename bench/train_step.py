"""One BERT-Base pretraining step (MLM + NSP, seq 128, batch 16) on this machine, next to
keras-hub's `BertMaskedLM` of the same size, in the same process and the same harness.

    python bench/train_step.py [--policies mixed_bfloat16,float32] [--steps 3] [--no_hub_xla]

For each dtype policy it reports sequences/s of one optimizer step (AdamW, global-norm
clipping) for bert_tf's `BertPretrainer` and keras-hub's `BertMaskedLM` (MLM only: it has
no NSP head), both run by the same tf.function without XLA, and keras-hub once more with
XLA (what Keras' `compile()` picks by default on TensorFlow); the ratios; and the model
FLOP/s as a fraction of the matmul ceiling measured here (float32 and bfloat16
[2048x768]x[768x3072] matmuls, the FFN shape, best of TF kernels and XLA). On CPUs with
AVX512-BF16, TF's oneDNN bfloat16 matmul is about twice XLA's, hence no XLA for bert_tf.
Steps of the two models are interleaved after warm-up, so load from other processes
affects both alike; the median step time is reported. keras-hub is needed only here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

if not __package__:  # run as `python bench/train_step.py`: import from the checkout
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.keras_hub_peer import keras_hub_masked_lm  # noqa: E402
from bert_tf.config import load_config  # noqa: E402
from bert_tf.models import BertPretrainer  # noqa: E402
from bert_tf.models.losses import pretraining_losses  # noqa: E402

BATCH, SEQ, PREDICTIONS = 16, 128, 20


def matmul_tflops(dtype: str, jit_compile: bool, repeats: int = 8) -> float:
    """Best-of TFLOP/s of a [2048, 768] x [768, 3072] matmul (XLA or TF's oneDNN kernels)."""
    a = tf.cast(tf.random.normal((2048, 768)), dtype)
    b = tf.cast(tf.random.normal((768, 3072)), dtype)
    matmul = tf.function(
        lambda x, y: tf.reduce_sum(tf.cast(tf.matmul(x, y), "float32")), jit_compile=jit_compile
    )
    matmul(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * 2048 * 768 * 3072 / best / 1e12


def step_flops(config) -> float:
    """Matmul FLOPs of one training step (forward x 3 for forward + backward)."""
    tokens, hidden, inner = BATCH * SEQ, config.hidden_size, config.intermediate_size
    per_layer = 2 * tokens * (4 * hidden * hidden + 2 * hidden * inner) + 2 * 2 * BATCH * SEQ * SEQ * hidden
    head = 2 * BATCH * PREDICTIONS * hidden * (hidden + config.vocab_size)
    return 3 * (config.num_hidden_layers * per_layer + head)


def batch(vocab_size: int, rng) -> dict[str, np.ndarray]:
    lengths = rng.integers(SEQ - 16, SEQ + 1, BATCH)
    input_mask = (np.arange(SEQ)[None] < lengths[:, None]).astype("int32")
    return {
        "input_ids": (rng.integers(1000, vocab_size, (BATCH, SEQ)) * input_mask).astype("int32"),
        "input_mask": input_mask,
        "segment_ids": ((np.arange(SEQ)[None] > lengths[:, None] // 2) * input_mask).astype("int32"),
        "masked_lm_positions": np.sort(rng.integers(1, SEQ - 16, (BATCH, PREDICTIONS)), -1).astype("int32"),
        "masked_lm_ids": rng.integers(1000, vocab_size, (BATCH, PREDICTIONS)).astype("int32"),
        "masked_lm_weights": np.ones((BATCH, PREDICTIONS), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (BATCH, 1)).astype("int32"),
    }


def optimizer() -> keras.optimizers.Optimizer:
    return keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)


def make_step(model, loss_fn, jit_compile: bool):
    opt = optimizer()
    opt.build(model.trainable_variables)

    @tf.function(jit_compile=jit_compile)
    def step(features):
        with tf.GradientTape() as tape:
            loss = loss_fn(features, model(features, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        opt.apply(gradients, model.trainable_variables)
        return loss

    return step


def ours(config, jit_compile):
    model = BertPretrainer(config)
    return make_step(model, lambda f, o: pretraining_losses(f, o)["loss"], jit_compile), lambda f: f


def keras_hub_model(config, jit_compile):
    model = keras_hub_masked_lm(config)

    def loss_fn(features, logits):  # the same weighted MLM loss as ours
        per_prediction = keras.ops.sparse_categorical_crossentropy(
            features["masked_lm_ids"], keras.ops.cast(logits, "float32"), from_logits=True
        )
        weights = features["masked_lm_weights"]
        return keras.ops.sum(per_prediction * weights) / (keras.ops.sum(weights) + 1e-5)

    def adapt(f):
        return {
            "token_ids": f["input_ids"],
            "padding_mask": f["input_mask"],
            "segment_ids": f["segment_ids"],
            "mask_positions": f["masked_lm_positions"],
            "masked_lm_ids": f["masked_lm_ids"],
            "masked_lm_weights": f["masked_lm_weights"],
        }

    def hub_loss(features, _unused=None):
        return loss_fn(
            features,
            model(
                {k: features[k] for k in ("token_ids", "padding_mask", "segment_ids", "mask_positions")},
                training=True,
            ),
        )

    opt = optimizer()
    opt.build(model.trainable_variables)

    @tf.function(jit_compile=jit_compile)
    def step(features):
        with tf.GradientTape() as tape:
            loss = hub_loss(features)
        gradients = tape.gradient(loss, model.trainable_variables)
        opt.apply(gradients, model.trainable_variables)
        return loss

    return step, adapt


def run(policy: str, steps: int, ceilings: dict[str, float], hub_xla: bool) -> None:
    keras.config.set_dtype_policy(policy)
    config = load_config("bert_base")
    features = {k: tf.constant(v) for k, v in batch(config.vocab_size, np.random.default_rng(0)).items()}
    # Same harness, TF kernels (no XLA) for both; plus keras-hub as `compile()` runs it by
    # default on TensorFlow (jit_compile="auto" -> XLA).
    contenders = {
        "bert_tf": ours(config, jit_compile=False),
        "keras_hub": keras_hub_model(config, jit_compile=False),
    }
    if hub_xla:
        contenders["keras_hub_xla"] = keras_hub_model(config, jit_compile=True)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for name, (step, adapt) in contenders.items():  # compile + one warm-up step each
        start = time.perf_counter()
        step(adapt(features)).numpy()
        step(adapt(features)).numpy()
        print(f"  {name}: compiled and warmed up in {time.perf_counter() - start:.0f}s", flush=True)
    for _ in range(steps):  # interleaved, so background load hits every contender alike
        for name, (step, adapt) in contenders.items():
            start = time.perf_counter()
            step(adapt(features)).numpy()
            times[name].append(time.perf_counter() - start)
    ceiling = ceilings["bfloat16" if "bfloat16" in policy else "float32"]
    flops = step_flops(config)
    rates = {}
    for name, values in times.items():
        median = statistics.median(values)
        rates[name] = BATCH / median
        print(
            f"  {name:13s} {policy:15s} {rates[name]:6.3f} seq/s  (median of {len(values)} steps: {median:.2f}s; "
            f"{flops / median / 1e12:.3f} TFLOP/s = {flops / median / 1e12 / ceiling:.0%} of the "
            f"{ceiling:.3f} TFLOP/s matmul ceiling)",
            flush=True,
        )
    for name in rates:
        if name != "bert_tf":
            print(f"  ratio bert_tf / {name} ({policy}): {rates['bert_tf'] / rates[name]:.2f}x", flush=True)
    keras.config.set_dtype_policy("float32")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--policies", default="mixed_bfloat16", help="comma-separated, e.g. mixed_bfloat16,float32"
    )
    parser.add_argument("--steps", type=int, default=3, help="timed steps per model, after a warm-up step")
    parser.add_argument(
        "--no_hub_xla", action="store_true", help="skip keras-hub under XLA (slow to compile)"
    )
    args = parser.parse_args()
    ceilings = {}
    for dtype in ("float32", "bfloat16"):
        measured = {jit: matmul_tflops(dtype, jit) for jit in (False, True)}
        ceilings[dtype] = max(measured.values())
        print(
            f"matmul {dtype}: {measured[False]:.3f} TFLOP/s (TF kernels), {measured[True]:.3f} TFLOP/s (XLA); "
            f"ceiling {ceilings[dtype]:.3f}",
            flush=True,
        )
    for policy in args.policies.split(","):
        run(policy, args.steps, ceilings, hub_xla=not args.no_hub_xla)


if __name__ == "__main__":
    main()
