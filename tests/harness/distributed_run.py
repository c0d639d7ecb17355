"""Trains the real BertPretrainer a few steps under one strategy; run as a subprocess.

`tests/training/test_distributed.py` starts it once per strategy: devices have to be set
up before TensorFlow initializes them, and multi-worker training needs one process per
worker. It writes the loss of every loop and the final weights to --out (an .npz file).
"""

import argparse
import json
import os
import sys


def synthetic_dataset(
    context, global_batch_size: int, seq_length: int, predictions: int, vocab_size: int, packing: bool = False
):
    """A deterministic stream of pretraining examples; example i is the same in every process.

    With `packing`, the examples are packed (`bert_tf.preprocessing.packing`) into rows of the same
    length before batching, the same rows in every process.
    """
    import tensorflow as tf

    def example(index):
        seed = tf.stack([index, tf.constant(7, tf.int64)])
        length = tf.random.stateless_uniform([], seed, 6, seq_length + 1, tf.int32)
        ids = tf.random.stateless_uniform([seq_length], seed + 1, 5, vocab_size, tf.int32)
        valid = tf.range(seq_length) < length
        real_predictions = tf.random.stateless_uniform([], seed + 2, 1, predictions + 1, tf.int32)
        weights = tf.cast(tf.range(predictions) < real_predictions, tf.float32)
        positions = tf.random.stateless_uniform([predictions], seed + 3, 1, 6, tf.int32)
        return {
            "input_ids": tf.where(valid, ids, 0),
            "input_mask": tf.cast(valid, tf.int32),
            "segment_ids": tf.cast(tf.range(seq_length) >= length // 2, tf.int32) * tf.cast(valid, tf.int32),
            "masked_lm_positions": positions * tf.cast(weights, tf.int32),
            "masked_lm_ids": tf.random.stateless_uniform([predictions], seed + 4, 5, vocab_size, tf.int32),
            "masked_lm_weights": weights,
            "next_sentence_labels": tf.random.stateless_uniform([1], seed + 5, 0, 2, tf.int32),
        }

    per_replica = context.get_per_replica_batch_size(global_batch_size)
    dataset = tf.data.Dataset.range(1 << 40).map(example)
    if packing:
        from bert_tf.preprocessing.packing import pack_instances

        dataset = pack_instances(
            dataset.batch(64), max_seq_length=seq_length, max_predictions_per_row=2 * predictions,
            max_instances_per_row=PACKED_INSTANCES,
        )  # fmt: skip
    dataset = dataset.batch(per_replica, drop_remainder=True)
    # Per-replica batches 2k, 2k+1, ... of the one-device stream go to the pipelines in turn,
    # so every strategy sees the same global batches.
    return dataset.shard(context.num_input_pipelines, context.input_pipeline_id)


PACKED_INSTANCES = 3


def train(
    strategy,
    model_dir: str,
    *,
    steps=6,
    steps_per_loop=2,
    batch_size=8,
    gradient_accumulation_steps=1,
    packing=False,
    save_checkpoints_steps=1000,
):
    """Trains the tiny BertPretrainer; returns the per-loop losses and the final weights."""
    import keras
    import numpy as np

    from bert_tf.config import load_config
    from bert_tf.models import BertPretrainer
    from bert_tf.models.pretrainer import example_features
    from bert_tf.training import optimization, pretraining
    from bert_tf.training.loop import Phase, Trainer

    config = load_config("bert_tiny").replace(
        vocab_size=97, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    seq_length, predictions = 16, 4
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = BertPretrainer(config, packed=packing)
        if packing:
            model(example_features(1, seq_length, 2 * predictions, PACKED_INSTANCES))
        else:
            model(example_features(1, seq_length, predictions))
        optimizer = optimization.create_optimizer(
            1e-2, num_train_steps=steps, num_warmup_steps=1, presummed_gradients=True
        )
    trainer = Trainer(
        strategy,
        model,
        optimizer,
        pretraining.pretraining_loss_share,
        model_dir,
        global_batch_size=batch_size,
        totals_fn=pretraining.masked_lm_totals,
        steps_per_loop=steps_per_loop,
        save_checkpoints_steps=save_checkpoints_steps,
        gradient_accumulation_steps=gradient_accumulation_steps,
        verbose=False,
    )

    def dataset_fn(context):
        return synthetic_dataset(context, batch_size, seq_length, predictions, config.vocab_size, packing)

    result = trainer.train([Phase("synthetic", 0, steps, dataset_fn)])
    return {
        "losses": np.array([entry["loss"] for entry in result.history]),
        "replicas": np.array(strategy.num_replicas_in_sync),
        **{f"w{i}": w for i, w in enumerate(model.get_weights())},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=["default", "mirrored", "multi_worker"], required=True)
    parser.add_argument("--cpu_devices", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--steps_per_loop", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--packing", action="store_true")
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import tensorflow as tf

    if args.cpu_devices > 1:
        # Must happen before anything initializes the devices.
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.cpu_devices
        )

    import numpy as np

    from bert_tf.training import distribute

    strategy = distribute.get_strategy(args.strategy)
    result = train(
        strategy,
        args.model_dir,
        steps=args.steps,
        steps_per_loop=args.steps_per_loop,
        batch_size=args.batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        packing=args.packing,
    )
    np.savez(args.out, **result)
    print(json.dumps({"replicas": int(result["replicas"]), "losses": result["losses"].tolist()}))
    sys.stdout.flush()
    os._exit(0)  # multi-worker collectives can hang at interpreter exit


if __name__ == "__main__":
    main()
