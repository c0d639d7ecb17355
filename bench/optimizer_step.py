"""One AdamW update of a BERT's weights: ours against Keras' own AdamW, taking turns.

The weights are those of the MiniLM BERT the fine-tuning benchmark trains (6 layers,
hidden 384, a 30,522-piece vocabulary: 22.6M weights), the gradients random; both
optimizers clip to a global norm of 1.0 and decay weights by 0.01, as the fine-tuning
recipe does. Each update runs in a `tf.function`, as under `model.fit`; the two take turns
update by update so that other load hits both alike. It prints the median time of an
update and ours' speed against Keras'. Ours runs TensorFlow's fused Adam kernel
(`bert_tf.training.optimization.AdamW`), with epsilon on the bias-corrected `sqrt(v)`.

  python bench/optimizer_step.py             # 30 timed updates of each
  python bench/optimizer_step.py --steps=3   # a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.training import optimization  # noqa: E402

HIDDEN, LAYERS, VOCAB, POSITIONS = 384, 6, 30522, 512


def minilm_shapes() -> list[tuple[int, ...]]:
    shapes = [(VOCAB, HIDDEN), (POSITIONS, HIDDEN), (2, HIDDEN), (HIDDEN,), (HIDDEN,)]
    for _ in range(LAYERS):
        shapes += [(HIDDEN, HIDDEN), (HIDDEN,)] * 4  # query, key, value, attention output
        shapes += [(HIDDEN, 4 * HIDDEN), (4 * HIDDEN,), (4 * HIDDEN, HIDDEN), (HIDDEN,)]
        shapes += [(HIDDEN,)] * 4  # two LayerNorms
    return shapes + [(HIDDEN, HIDDEN), (HIDDEN,)]  # pooler


def traced_update(optimizer, gradients, weights):
    return tf.function(lambda: optimizer.apply(gradients, weights))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed updates of each optimizer")
    args = parser.parse_args()
    shapes = minilm_shapes()
    rng = np.random.default_rng(0)
    gradients = [tf.constant(rng.normal(0, 1e-4, shape).astype(np.float32)) for shape in shapes]
    contenders = {
        "bert_tf AdamW": optimization.create_optimizer(5e-5, num_train_steps=10_000, num_warmup_steps=100),
        "keras.optimizers.AdamW": keras.optimizers.AdamW(
            5e-5, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0
        ),
    }
    updates = {}
    for name, optimizer in contenders.items():
        weights = [keras.Variable(rng.normal(0, 0.02, shape).astype(np.float32)) for shape in shapes]
        optimizer.build(weights)  # its slots outside the traced function
        updates[name] = traced_update(optimizer, gradients, weights)
        updates[name]()  # trace
    print(f"{sum(int(np.prod(shape)) for shape in shapes) / 1e6:.1f}M weights in {len(shapes)} variables")
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.steps):
        for name, update in updates.items():
            start = time.perf_counter()
            update()
            times[name].append(time.perf_counter() - start)
    peer = statistics.median(times["keras.optimizers.AdamW"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:24s} {1000 * median:7.1f} ms per update   {peer / median:5.2f}x Keras' speed")


if __name__ == "__main__":
    main()
