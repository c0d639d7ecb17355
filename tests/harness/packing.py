"""Packed pretraining rows and the same instances alone: what the packing tests compare, in
this process and in a JAX one."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.models import BertPretrainer
from bert_tf.models.pretrainer import example_features
from bert_tf.preprocessing import packing
from bert_tf.training import pretraining

SEQ, PREDICTIONS, ROW_PREDICTIONS, INSTANCES = 32, 3, 8, 4

CONFIG = BertConfig(
    vocab_size=60,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=40,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def random_instances(count=11, seed=0, lengths=None):
    """Instances `[CLS] A [SEP] B [SEP]` of random lengths (drawn from `lengths` if given),
    each alone (unpadded) as numpy."""
    rng = np.random.default_rng(seed)
    instances = []
    for _ in range(count):
        length = int(rng.choice(lengths) if lengths else rng.integers(5, 21))
        split = int(rng.integers(2, length - 2))
        ids = rng.integers(5, CONFIG.vocab_size, length)
        ids[0], ids[split], ids[-1] = 2, 3, 3
        predicted = int(rng.integers(1, PREDICTIONS + 1))
        positions = np.sort(rng.choice(np.arange(1, length - 1), predicted, replace=False))
        instances.append(
            {
                "input_ids": ids,
                "segment_ids": (np.arange(length) > split).astype(int),
                "masked_lm_positions": positions,
                "masked_lm_ids": rng.integers(5, CONFIG.vocab_size, predicted),
                "next_sentence_labels": int(rng.integers(0, 2)),
            }
        )
    return instances


def padded_batch(instances):
    """The unpacked batch: one instance per row, padded to SEQ and PREDICTIONS."""
    batch = {
        name: np.zeros((len(instances), SEQ), "int32") for name in ("input_ids", "input_mask", "segment_ids")
    }
    for name in ("masked_lm_positions", "masked_lm_ids"):
        batch[name] = np.zeros((len(instances), PREDICTIONS), "int32")
    batch["masked_lm_weights"] = np.zeros((len(instances), PREDICTIONS), "float32")
    batch["next_sentence_labels"] = np.zeros((len(instances), 1), "int32")
    for row, instance in enumerate(instances):
        length, predicted = len(instance["input_ids"]), len(instance["masked_lm_positions"])
        batch["input_ids"][row, :length] = instance["input_ids"]
        batch["segment_ids"][row, :length] = instance["segment_ids"]
        batch["input_mask"][row, :length] = 1
        batch["masked_lm_positions"][row, :predicted] = instance["masked_lm_positions"]
        batch["masked_lm_ids"][row, :predicted] = instance["masked_lm_ids"]
        batch["masked_lm_weights"][row, :predicted] = 1.0
        batch["next_sentence_labels"][row, 0] = instance["next_sentence_labels"]
    return batch


def packed_batch(instances):
    """The same instances packed into rows by the real packer, and where each one went."""
    rows = packing.pack_batch(
        {name: tf.constant(value) for name, value in padded_batch(instances).items()},
        max_seq_length=SEQ,
        max_predictions_per_row=ROW_PREDICTIONS,
        max_instances_per_row=INSTANCES,
    )
    rows = {name: value.numpy() for name, value in rows.items()}
    # Instance i's place, found from the rows: the slot whose [CLS] holds its first token.
    places = []
    for instance in instances:
        length = len(instance["input_ids"])
        for row, slot in zip(*np.nonzero(rows["next_sentence_weights"]), strict=True):
            start = rows["next_sentence_positions"][row, slot]
            if (
                np.array_equal(rows["input_ids"][row, start : start + length], instance["input_ids"])
                and ((rows["input_mask"][row] == slot + 1).sum() == length)
                and (row, slot) not in [(p[0], p[1]) for p in places]
            ):
                places.append((row, slot, start))
                break
    assert len(places) == len(instances), "an instance is missing from the packed rows"
    return rows, places


def alone(model, instance):
    """The unpacked model on one instance alone, unpadded: sequence output, MLM and NSP logits."""
    length = len(instance["input_ids"])
    features = {
        "input_ids": instance["input_ids"][None],
        "input_mask": np.ones((1, length), "int32"),
        "segment_ids": instance["segment_ids"][None],
        "masked_lm_positions": instance["masked_lm_positions"][None],
    }
    outputs = model(features)
    sequence = model.encoder(features)["sequence_output"]
    return np.asarray(sequence[0]), np.asarray(outputs["mlm_logits"][0]), np.asarray(outputs["nsp_logits"][0])


def packed_outputs(model, rows):
    inputs = pretraining.model_inputs(rows)
    outputs = model(inputs)
    sequence = model.encoder(inputs)["sequence_output"]
    return np.asarray(sequence), np.asarray(outputs["mlm_logits"]), np.asarray(outputs["nsp_logits"])


def max_differences(unpacked_model, packed_model, instances, rows, places):
    """Largest |packed - alone| over all instances, per output."""
    sequence, mlm_logits, nsp_logits = packed_outputs(packed_model, rows)
    differences = {"sequence_output": 0.0, "mlm_logits": 0.0, "nsp_logits": 0.0}
    for instance, (row, slot, start) in zip(instances, places, strict=True):
        alone_sequence, alone_mlm, alone_nsp = alone(unpacked_model, instance)
        length = len(instance["input_ids"])
        packed_sequence = sequence[row, start : start + length]
        # The instance's predictions in the row: its positions moved by its start.
        columns = [
            int(
                np.nonzero(
                    (rows["masked_lm_positions"][row] == start + p) & (rows["masked_lm_weights"][row] > 0)
                )[0][0]
            )
            for p in instance["masked_lm_positions"]
        ]
        for name, packed_value, alone_value in (
            ("sequence_output", packed_sequence, alone_sequence),
            ("mlm_logits", mlm_logits[row, columns], alone_mlm),
            ("nsp_logits", nsp_logits[row, slot], alone_nsp),
        ):
            differences[name] = max(differences[name], float(np.abs(packed_value - alone_value).max()))
    return differences


def numpy_features(*shape):
    """`example_features` as numpy arrays, which every backend takes."""
    return {name: np.asarray(value) for name, value in example_features(*shape).items()}


def models(seed=3):
    keras.utils.set_random_seed(seed)
    unpacked = BertPretrainer(CONFIG)
    unpacked(numpy_features(1, SEQ, PREDICTIONS))
    packed = BertPretrainer(CONFIG, packed=True)
    packed(numpy_features(1, SEQ, ROW_PREDICTIONS, INSTANCES))
    packed.set_weights(unpacked.get_weights())  # the same variables: checkpoints load either way
    return unpacked, packed
