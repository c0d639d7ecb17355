"""Checks on pretraining inputs, made before anything is written to model_dir.

Each check raises `InputError` with what was wrong, the value, and what to do.
"""

from __future__ import annotations

import filecmp
import os

import tensorflow as tf

from bert_tf.checkpoints import integrity
from bert_tf.config import BertConfig
from bert_tf.errors import BertTfError
from pipelines import records


class InputError(BertTfError, ValueError):
    """Pretraining input a user must fix; the message says what and how."""


def expand_files(patterns: str | list[str], flag: str) -> list[str]:
    """Expands comma-separated globs; every pattern must match at least one file."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    files: list[str] = []
    for pattern in patterns:
        matched = sorted(tf.io.gfile.glob(pattern.strip()))
        if not matched:
            raise InputError(
                f"--{flag}={pattern} matches no file; check the path (globs such as data/*.tfrecord work)"
            )
        files.extend(matched)
    return files


def is_tfrecord(path: str) -> bool:
    """Whether `path` starts with a readable TFRecord of Examples (as opposed to raw text)."""
    return records.peek_format(path) is not None


def record_lengths(path: str) -> dict[str, int]:
    """Lengths of the features of the first example in a TFRecord file."""
    for record in tf.data.TFRecordDataset(path).take(1):
        example = tf.train.Example.FromString(record.numpy())
        lengths = {}
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            lengths[name] = len(getattr(feature, kind).value) if kind else 0
        return lengths
    raise InputError(f"{path} holds no records; regenerate it or leave it out of --train_files")


def check_record_shapes(
    files: list[str], max_seq_length: int, max_predictions_per_seq: int, flag: str
) -> None:
    """TFRecords hold fixed-length features; they must match the flags (checked on the first file)."""
    if not files or not is_tfrecord(files[0]):
        return
    for path in files:  # a file cut short is named now, not when training reaches it
        records.check_framing(path)
    lengths = record_lengths(files[0])
    seq_length = lengths.get("input_ids")
    if seq_length is not None and "input_mask" in lengths and seq_length != max_seq_length:
        raise InputError(
            f"{files[0]} (--{flag}) holds sequences of length {seq_length}, but --max_seq_length="
            f"{max_seq_length}; pass --max_seq_length={seq_length} or regenerate the data"
        )
    predictions = lengths.get("masked_lm_positions")
    if predictions is not None and predictions != max_predictions_per_seq:
        raise InputError(
            f"{files[0]} (--{flag}) holds {predictions} masked positions per sequence, but "
            f"--max_predictions_per_seq={max_predictions_per_seq}; pass --max_predictions_per_seq="
            f"{predictions} or regenerate the data"
        )


def check_vocab(vocab: list[str], vocab_file: str, config: BertConfig) -> None:
    if len(vocab) != config.vocab_size:
        raise InputError(
            f"the vocab {vocab_file} has {len(vocab)} tokens but the config's vocab_size is "
            f"{config.vocab_size}; use the vocab the config was made for, or a config with "
            f'"vocab_size": {len(vocab)}'
        )


CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"


def check_model_dir(model_dir: str, config: BertConfig, vocab_file: str | None) -> None:
    """A model_dir from an earlier run must hold the same config (and vocab) as this one."""
    stored_config = os.path.join(model_dir, CONFIG_FILE)
    if os.path.exists(stored_config):
        integrity.latest_checkpoint(model_dir)  # a state file that cannot be read is an error
        stored = BertConfig.from_json_file(stored_config)
        if stored != config:
            differences = ", ".join(
                f"{name} {value!r} there vs {getattr(config, name)!r} now"
                for name, value in stored.to_dict().items()
                if getattr(config, name) != value
            )
            raise InputError(
                f"--model_dir={model_dir} holds a run of another config ({differences}); "
                "use a new --model_dir, or the --config of that run to resume it"
            )
    elif integrity.latest_checkpoint(model_dir):
        raise InputError(
            f"--model_dir={model_dir} holds a checkpoint but no {CONFIG_FILE} to tell which config it "
            "belongs to; use a new --model_dir"
        )
    stored_vocab = os.path.join(model_dir, VOCAB_FILE)
    if (
        vocab_file
        and os.path.exists(stored_vocab)
        and not filecmp.cmp(stored_vocab, vocab_file, shallow=False)
    ):
        raise InputError(
            f"--model_dir={model_dir} was trained with another vocab ({stored_vocab} differs from "
            f"{vocab_file}); use a new --model_dir or that vocab"
        )
