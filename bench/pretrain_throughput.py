r"""Pretraining throughput: the real loop (input pipeline included) against the bare step.

Both run in this process on the same model, optimizer, batch size and dtype policy:

* bare step: one `tf.function` doing forward, backward and the optimizer update on a
  batch that is already in memory; no input pipeline, no loop machinery;
* loop: `bert_tf.training.loop.Trainer` exactly as `python -m bert_tf.pretrain` runs it,
  reading original-format TFRecords through `pipelines.pretraining_dataset`.

It prints sequences/s of each, the loop's loss against the bare step (target < 5%), and
the model-FLOPs utilisation of both against the matmul peak measured in the same process.

    python bench/pretrain_throughput.py                     # BERT-Base, seq 128, mixed_bfloat16
    python bench/pretrain_throughput.py --config=bert_mini  # quick check
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

if not __package__:  # run as `python bench/pretrain_throughput.py`: import from the checkout
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from absl import app, flags  # noqa: E402

flags.DEFINE_string("config", "bert_base", "Model config.")
flags.DEFINE_integer("batch_size", 8, "Global batch size.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("steps", 4, "Steps per measurement (the loop: two measured loops after a warm-up one).")
flags.DEFINE_string("mixed_precision", "mixed_bfloat16", "Keras dtype policy.")
flags.DEFINE_bool("jit_compile", False, "XLA for the forward/backward pass (both sides).")
FLAGS = flags.FLAGS


def train_flops_per_sequence(config, seq_length: int, predictions: int) -> float:
    """Matmul FLOPs of forward + backward (3x forward) for one sequence."""
    hidden, inner = config.hidden_size, config.intermediate_size
    per_token_layer = 2 * (4 * hidden * hidden + 2 * hidden * inner) + 4 * seq_length * hidden
    encoder = config.num_hidden_layers * per_token_layer * seq_length
    heads = predictions * 2 * (hidden * hidden + hidden * config.vocab_size) + 2 * hidden * hidden
    return 3.0 * (encoder + heads)


def matmul_peak(dtype, size: int = 1024, repeats: int = 20) -> float:
    import tensorflow as tf

    a = tf.random.normal([size, size], dtype=tf.float32)
    a = tf.cast(a, dtype)

    @tf.function
    def chain(x):
        for _ in range(repeats):
            x = tf.matmul(x, a) * tf.cast(1.0 / size, dtype)
        return x

    chain(a).numpy()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        chain(a).numpy()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 * repeats / best


def write_records(path: str, count: int, seq_length: int, predictions: int, vocab_size: int) -> str:
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(count):
            ids = rng.integers(1000, vocab_size, seq_length)
            positions = np.sort(rng.choice(np.arange(1, seq_length - 1), predictions, replace=False))
            feature = {
                "input_ids": ints(ids),
                "input_mask": ints(np.ones(seq_length)),
                "segment_ids": ints(np.arange(seq_length) >= seq_length // 2),
                "masked_lm_positions": ints(positions),
                "masked_lm_ids": ints(ids[positions]),
                "masked_lm_weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=[1.0] * predictions)
                ),
                "next_sentence_labels": ints([rng.integers(0, 2)]),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


def main(argv):
    del argv
    import keras
    import tensorflow as tf

    from bert_tf.config import load_config
    from bert_tf.models import BertPretrainer
    from bert_tf.models.pretrainer import example_features
    from bert_tf.training import optimization, pretraining
    from bert_tf.training.loop import Phase, Trainer
    from pipelines import pretraining_dataset

    config = load_config(FLAGS.config)
    batch, seq, predictions, steps = FLAGS.batch_size, FLAGS.seq_length, FLAGS.predictions, FLAGS.steps
    keras.mixed_precision.set_global_policy(FLAGS.mixed_precision)
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.get_strategy()
    model = BertPretrainer(config)
    model(example_features(1, seq, predictions))
    optimizer = optimization.create_optimizer(1e-4, 10_000, 100, presummed_gradients=True)
    work = tempfile.mkdtemp(prefix="bert_tf_bench_")
    records = write_records(
        os.path.join(work, "train.tfrecord"), 4 * batch, seq, predictions, config.vocab_size
    )

    def dataset_fn(context):
        return pretraining_dataset(
            [records],
            batch_size=batch,  # global; per-replica batches come out
            max_seq_length=seq,
            max_predictions_per_seq=predictions,
            seed=0,
            input_context=context,
        )

    # --- the bare step on an in-memory batch
    features = next(iter(dataset_fn(tf.distribute.InputContext())))
    totals = pretraining.masked_lm_totals(features)
    variables = model.trainable_variables
    optimizer.build(variables)

    @tf.function(jit_compile=FLAGS.jit_compile)
    def bare_step(features):
        with tf.GradientTape() as tape:
            outputs = model(pretraining.model_inputs(features), training=True)
            loss = pretraining.pretraining_loss_share(features, outputs, totals)["loss"]
        gradients = tape.gradient(optimizer.scale_loss(loss), variables)
        optimizer.apply([tf.convert_to_tensor(g) for g in gradients], variables)
        return loss

    def time_bare_step() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            loss = bare_step(features)
        loss.numpy()
        return steps * batch / (time.perf_counter() - start)

    bare_step(features).numpy()
    # The bare step is timed before and after the loop, so that drift in the machine's speed
    # (other jobs, thermal) shows up as a spread instead of a bias against one side.
    bare_rates = [time_bare_step()]

    # --- the real loop: one warm-up loop (tracing), then `steps` steps measured by the loop
    trainer = Trainer(
        strategy,
        model,
        optimizer,
        pretraining.pretraining_loss_share,
        os.path.join(work, "model"),
        global_batch_size=batch,
        totals_fn=pretraining.masked_lm_totals,
        model_inputs=pretraining.model_inputs,
        steps_per_loop=steps,
        save_checkpoints_steps=10**9,
        jit_compile=FLAGS.jit_compile,
        save_final_checkpoint=False,
        verbose=False,
    )
    history = trainer.train([Phase("bench", 0, 3 * steps, dataset_fn)]).history
    loop_rates = [entry["sequences_per_second"] for entry in history[1:]]  # the first loop traces
    bare_rates.append(time_bare_step())
    bare_rate, loop_rate = sum(bare_rates) / len(bare_rates), sum(loop_rates) / len(loop_rates)

    flops = train_flops_per_sequence(config, seq, predictions)
    peak_f32 = matmul_peak(tf.float32)
    peak_bf16 = matmul_peak(tf.bfloat16)
    peak = peak_bf16 if "bfloat16" in FLAGS.mixed_precision else peak_f32
    print(
        f"{FLAGS.config}, batch {batch}, seq {seq}, {FLAGS.mixed_precision}, jit_compile={FLAGS.jit_compile}"
    )
    print(f"  model FLOPs per sequence (train): {flops / 1e9:.1f} GFLOP")
    print(
        f"  matmul peak in this process: float32 {peak_f32 / 1e9:.1f} GFLOP/s, bfloat16 {peak_bf16 / 1e9:.1f} GFLOP/s"
    )
    for name, rate in (("bare step", bare_rate), ("loop + input pipeline", loop_rate)):
        print(
            f"  {name:24s} {rate:8.2f} seq/s   MFU {100 * rate * flops / peak:5.1f}% of the measured matmul peak"
        )
    print(
        f"  samples: bare step {[round(r, 3) for r in bare_rates]}, loop {[round(r, 3) for r in loop_rates]}"
    )
    print(f"  loop loses {100 * (1 - loop_rate / bare_rate):.1f}% to the bare step (target < 5%)")


if __name__ == "__main__":
    app.run(main)
