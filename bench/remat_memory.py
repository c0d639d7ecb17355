"""Rematerialization (`--remat`): the peak memory and the time of a pretraining step at
sequence length 512, with each Transformer block's activations kept (the default) or
recomputed in the backward pass.

    python bench/remat_memory.py [--config bert_medium] [--batch 8] [--seq 512] [--steps 3]

Each side is a fresh process (the peak resident memory of a process only grows, so the two
cannot share one). Each side builds `BertPretrainer`, takes the same random batch and runs
AdamW steps (global-norm clipping) in one tf.function. Dropout is on, as in pretraining.
The bench reports per side:
- the process' peak resident memory (ru_maxrss);
- the peak's growth over the memory held once the model and the optimizer are built, which
  is what a training step needs on top of the weights;
- the median step time after a warm-up step.

It prints the ratios remat / keep. The sides run one after the other: run it on a quiet
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

if not __package__:  # run as `python bench/remat_memory.py`: import from the checkout
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PREDICTIONS = 76  # max_predictions_per_seq at length 512, 15% masking


def rss_mb() -> float:
    """The process' resident memory now, in MB (Linux)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker(args) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    import tensorflow as tf

    from bert_tf.config import load_config
    from bert_tf.layers.transformer_block import rematerialize
    from bert_tf.models import BertPretrainer
    from bert_tf.models.losses import pretraining_losses

    config = load_config(args.config)
    keras.utils.set_random_seed(1)
    model = BertPretrainer(config)
    rematerialize(model, args.worker == "remat")
    rng = np.random.default_rng(0)
    batch, seq = args.batch, args.seq
    features = {
        "input_ids": rng.integers(1000, config.vocab_size, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "segment_ids": (np.arange(seq)[None] >= seq // 2).astype("int32").repeat(batch, 0),
        "masked_lm_positions": np.sort(rng.integers(1, seq, (batch, PREDICTIONS)), -1).astype("int32"),
        "masked_lm_ids": rng.integers(1000, config.vocab_size, (batch, PREDICTIONS)).astype("int32"),
        "masked_lm_weights": np.ones((batch, PREDICTIONS), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }
    optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    model(features)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            loss = pretraining_losses(features, model(features, training=True))["loss"]
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    built = rss_mb()
    times = []
    for _ in range(args.steps + 1):  # the first traces the step
        start = time.perf_counter()
        step(features).numpy()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
    return {
        "peak_mb": peak,
        "built_mb": built,
        "step_mb": peak - built,
        "step_s": statistics.median(times[1:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="bert_medium", help="a config name or file (default bert_medium)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--worker", choices=("keep", "remat"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print("RESULT" + json.dumps(worker(args)), flush=True)
        return
    results = {}
    for side in ("keep", "remat"):
        command = [sys.executable, os.path.abspath(__file__), f"--worker={side}"]
        command += [
            f"--config={args.config}",
            f"--batch={args.batch}",
            f"--seq={args.seq}",
            f"--steps={args.steps}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
        if not lines:
            sys.exit(f"the {side} worker failed:\n{done.stderr[-3000:]}")
        results[side] = json.loads(lines[-1][len("RESULT") :])
    print(f"{args.config}, batch {args.batch} x {args.seq} pieces, {args.steps} timed steps, dropout on")
    print(f"{'side':<8}{'peak MB':>10}{'built MB':>10}{'step MB':>10}{'step s':>9}")
    for side, r in results.items():
        print(f"{side:<8}{r['peak_mb']:>10.0f}{r['built_mb']:>10.0f}{r['step_mb']:>10.0f}{r['step_s']:>9.2f}")
    keep, remat = results["keep"], results["remat"]
    print(
        f"remat / keep: peak memory {remat['peak_mb'] / keep['peak_mb']:.2f}x, a step's memory "
        f"{remat['step_mb'] / keep['step_mb']:.2f}x, step time {remat['step_s'] / keep['step_s']:.2f}x"
    )


if __name__ == "__main__":
    main()
