"""BERT pretraining steps on one GPU with JAX: bert_tf next to keras-hub's BertMaskedLM.

    python bench/gpu/pretrain_jax.py                  # BERT-Base (batch 256), then BERT-Large (128)
    python bench/gpu/pretrain_jax.py --tiny --steps 2 # a 2-layer model on the CPU: proves it runs

Both models are trained the way `python -m bert_tf.pretrain --backend=jax` trains ours:
`model.fit` on the Keras JAX backend, XLA-compiled (`jit_compile=True`), the
`mixed_bfloat16` policy, AdamW with global-norm clipping, at sequence length 128 with 20
masked positions. bert_tf runs `keras_pretraining.PretrainingModel` (masked LM + next
sentence loss); keras-hub runs `BertMaskedLM` of the same size (masked LM only: it has no
next-sentence head) with the same weighted masked-LM loss. Batches are synthetic
(random ids with padding), made once in NumPy: TensorFlow is not needed and not imported.

For each model it prints sequences/s (the median of the timed epochs; the first epoch,
which compiles, is not timed), model FLOPs utilisation (matmul FLOPs of forward + backward
over the chip's peak, `--peak_tflops`, 989 for an H100/H200's dense bf16) and the ratio
bert_tf / keras-hub. keras-hub is imported only here; bench/gpu/README.md says how to
carry it to a machine that lacks it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

if not __package__:  # run as `python bench/gpu/pretrain_jax.py`: import from the checkout
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from bench.keras_hub_peer import keras_hub_masked_lm  # noqa: E402
from bert_tf.config import BertConfig, load_config  # noqa: E402
from bert_tf.models import BertPretrainer  # noqa: E402
from bert_tf.training.keras_pretraining import PretrainingModel  # noqa: E402

TINY = BertConfig(
    vocab_size=1024,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=256,
    max_position_embeddings=128,
)


def step_flops(config: BertConfig, batch_size: int, seq_length: int, predictions: int) -> float:
    """Matmul FLOPs of one training step: 3x the forward pass (forward + backward)."""
    hidden, inner = config.hidden_size, config.intermediate_size
    tokens = batch_size * seq_length
    # Q, K, V and output projections, the FFN, then scores and the weighted sum of values.
    per_layer = 2 * tokens * (4 * hidden * hidden + 2 * hidden * inner) + 2 * 2 * tokens * seq_length * hidden
    head = 2 * batch_size * predictions * hidden * (hidden + config.vocab_size)  # transform + tied logits
    return 3 * (config.num_hidden_layers * per_layer + head)


def synthetic_batches(config, rows: int, seq_length: int, predictions: int, seed: int = 0) -> dict:
    """`rows` pretraining examples: random ids, 0-16 padding tokens, two segments."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq_length - 16, seq_length + 1, rows)
    input_mask = (np.arange(seq_length)[None] < lengths[:, None]).astype("int32")
    low = min(1000, config.vocab_size // 2)  # past the special tokens of a real vocab
    return {
        "input_ids": (rng.integers(low, config.vocab_size, (rows, seq_length)) * input_mask).astype("int32"),
        "input_mask": input_mask,
        "segment_ids": ((np.arange(seq_length)[None] > lengths[:, None] // 2) * input_mask).astype("int32"),
        "masked_lm_positions": np.sort(rng.integers(1, seq_length - 16, (rows, predictions)), axis=-1).astype(
            "int32"
        ),
        "masked_lm_ids": rng.integers(low, config.vocab_size, (rows, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((rows, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (rows, 1)).astype("int32"),
    }


def optimizer() -> keras.optimizers.Optimizer:
    # The optimizer of bert_tf.training.optimization without the schedule (a constant
    # rate changes nothing in a step's cost).
    from bert_tf.training.optimization import AdamW

    return AdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)


def bert_tf_contender(config, data):
    model = PretrainingModel(BertPretrainer(config))
    model.compile(optimizer=optimizer(), jit_compile=True)
    return model, {"x": data}


def keras_hub_contender(config, data):
    model = keras_hub_masked_lm(config)
    # keras-hub's own compile: sparse cross-entropy on the logits, weighted by
    # masked_lm_weights (its sample weights) - the same loss as our masked-LM term.
    model.compile(
        optimizer=optimizer(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
        jit_compile=True,
    )
    x = {
        "token_ids": data["input_ids"],
        "padding_mask": data["input_mask"],
        "segment_ids": data["segment_ids"],
        "mask_positions": data["masked_lm_positions"],
    }
    return model, {"x": x, "y": data["masked_lm_ids"], "sample_weight": data["masked_lm_weights"]}


class EpochTimer(keras.callbacks.Callback):
    """Wall time of each epoch; Keras reads the epoch's metrics at its end, which waits for
    the device, so the time covers every step of the epoch."""

    def __init__(self):
        super().__init__()
        self.times: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        float(logs["loss"])
        self.times.append(time.perf_counter() - self._start)


def measure(name, build, config, args, batch_size) -> float:
    data = synthetic_batches(config, args.steps * batch_size, args.seq_length, args.predictions)
    model, fit_args = build(config, data)
    timer = EpochTimer()
    start = time.perf_counter()
    # Keras' own fit for both: keras-hub's PipelineModel.fit would first wrap the arrays in a
    # tf.data or grain pipeline (for a preprocessor, and there is none here).
    history = keras.Model.fit(
        model,
        **fit_args,
        batch_size=batch_size,
        epochs=1 + args.epochs,
        shuffle=False,
        callbacks=[timer],
        verbose=0,
    )
    losses = history.history["loss"]
    timed = timer.times[1:]  # the first epoch compiles
    seconds = statistics.median(timed)
    rate = args.steps * batch_size / seconds
    flops = step_flops(config, batch_size, args.seq_length, args.predictions) * args.steps / seconds
    print(
        f"  {name:9s} {rate:9.1f} seq/s  MFU {flops / 1e12 / args.peak_tflops:6.1%} "
        f"({flops / 1e12:.1f} TFLOP/s of {args.peak_tflops:g})  median epoch of {args.steps} steps "
        f"{seconds:.3f}s, first (compile) {timer.times[0]:.1f}s, all {time.perf_counter() - start:.0f}s, "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f}",
        flush=True,
    )
    if not np.all(np.isfinite(losses)):
        raise SystemExit(f"{name}: the loss is not finite: {losses}")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="base:256,large:128", help="config:global_batch, comma-separated")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20, help="masked positions per sequence")
    parser.add_argument("--steps", type=int, default=20, help="steps per timed epoch")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs (after one that compiles)")
    parser.add_argument("--policy", default="mixed_bfloat16")
    parser.add_argument("--peak_tflops", type=float, default=989.0, help="the chip's dense peak, for MFU")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model, batch 8, seq 32 (a CPU check)")
    parser.add_argument("--no_keras_hub", action="store_true", help="bert_tf alone")
    args = parser.parse_args()
    if keras.backend.backend() != "jax":
        raise SystemExit(f"run with KERAS_BACKEND=jax (Keras is on {keras.backend.backend()})")
    import jax

    sizes = (
        [("tiny", 8)]
        if args.tiny
        else [(s.split(":")[0], int(s.split(":")[1])) for s in args.sizes.split(",")]
    )
    if args.tiny:
        args.seq_length, args.predictions = 32, 5
    print(
        f"JAX {jax.__version__} on {jax.devices()[0].device_kind} ({jax.default_backend()}), Keras "
        f"{keras.__version__}, {args.policy}, XLA, seq {args.seq_length}, {args.predictions} predictions; "
        f"TensorFlow loaded: {sys.modules.get('tensorflow') is not None}",
        flush=True,
    )
    keras.config.set_dtype_policy(args.policy)
    for size, batch_size in sizes:
        config = TINY if size == "tiny" else load_config(f"bert_{size}")
        print(f"BERT-{size.capitalize()}, global batch {batch_size}:", flush=True)
        keras.utils.set_random_seed(0)
        ours = measure("bert_tf", bert_tf_contender, config, args, batch_size)
        if args.no_keras_hub:
            continue
        keras.utils.set_random_seed(0)
        theirs = measure("keras_hub", keras_hub_contender, config, args, batch_size)
        print(f"  ratio bert_tf / keras_hub (BERT-{size.capitalize()}): {ours / theirs:.2f}x", flush=True)
        keras.backend.clear_session()


if __name__ == "__main__":
    main()
