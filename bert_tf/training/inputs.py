"""Checks on pretraining inputs, made before anything is written to model_dir.

Each check raises `InputError` with what was wrong, the value, and what to do.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf import fileio
from bert_tf.checkpoints import integrity
from bert_tf.config import BertConfig
from bert_tf.errors import BertTfError
from pipelines import data_service, records, text_dataset, text_input
from pipelines.dataset import fixed_evaluation_batches, pretraining_dataset


class InputError(BertTfError, ValueError):
    """Pretraining input a user must fix; the message says what and how."""


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
    files: list[str],
    max_seq_length: int,
    max_predictions_per_seq: int,
    flag: str,
    packing: bool = False,
    next_sentence_prediction: bool = True,
) -> None:
    """TFRecords hold fixed-length features; they must match the flags (checked on the first file),
    and hold next-sentence pairs or masked-LM-only segments as `next_sentence_prediction` says.

    With `packing`, records may be shorter than the rows, never longer.
    """
    if not files or not is_tfrecord(files[0]):
        return
    for path in files:  # a file cut short is named now, not when training reaches it
        records.check_framing(path)
    lengths = record_lengths(files[0])
    try:
        records.check_task(files[0], lengths, next_sentence_prediction)
    except records.RecordFormatError as error:
        raise InputError(f"--{flag}: {error}") from None
    seq_length = lengths.get("input_ids")
    if packing and seq_length is not None and seq_length > max_seq_length:
        raise InputError(
            f"{files[0]} (--{flag}) holds sequences of length {seq_length}, which cannot be packed into rows of "
            f"--max_seq_length={max_seq_length} (an instance is never split); pass --max_seq_length={seq_length} "
            f"or more, or regenerate the records with --max_seq_length={max_seq_length} or less"
        )
    if packing:
        seq_length = None  # shorter records fill the rows
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
    try:
        fileio.check_path(model_dir)
    except fileio.FileSystemError as error:
        raise InputError(f"--model_dir={model_dir}: {error}") from None
    stored_config = fileio.join(model_dir, CONFIG_FILE)
    if fileio.exists(stored_config):
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
    stored_vocab = fileio.join(model_dir, VOCAB_FILE)
    if vocab_file and fileio.exists(stored_vocab) and not fileio.same_contents(stored_vocab, vocab_file):
        raise InputError(
            f"--model_dir={model_dir} was trained with another vocab ({stored_vocab} differs from "
            f"{vocab_file}); use a new --model_dir or that vocab"
        )
    try:  # the last check: creating the directory is the first write
        fileio.makedirs(model_dir)
    except fileio.FileSystemError as error:
        raise InputError(
            f"--model_dir={model_dir} cannot be written ({error}); pass a directory you can write to"
        ) from None


def check_holdout(files: list[str], flag: str) -> None:
    """--eval_every_steps without --eval_files holds out a slice of the training data: there must be one."""
    every = text_dataset.HELD_OUT_EVERY
    if is_tfrecord(files[0]):
        counts = []
        for path in files:
            counts.append(sum(1 for _ in tf.data.TFRecordDataset(path).take(every)))
            if counts[-1] == every:
                return
        found = f"its files hold {max(counts)} record(s) at most"
        needed = f"a file of at least {every} records (every {every}th record is held out)"
    else:
        blocks = 0
        for _ in text_input.document_blocks(files):
            blocks += 1
            if blocks == every:
                return
        size = text_input.DEFAULT_MIN_DOCUMENTS
        found = f"it holds {blocks} block(s) of {size} documents"
        needed = f"{every} blocks (every {every}th block of {size} documents is held out)"
    raise InputError(
        f"--eval_every_steps without --eval_files evaluates on a slice held out of --{flag}, but the "
        f"corpus is too small to hold some out: {found}, and it needs {needed}; pass --eval_files, "
        f"or a larger --{flag}"
    )


def pretraining_dataset_fn(
    settings,
    files: list[str],
    vocab_file: str | None,
    seq_length: int,
    predictions: int,
    seed: int | None,
    training: bool = True,
    row_predictions: int | None = None,
    held_out: str | None = None,
    service_job: str | None = None,
):
    """The `dataset_fn(input_context)` of the pretraining batches of `files` (`settings`: a
    `PretrainingConfig`): shuffled and repeated for training, else one pass in fixed-size
    batches padded with weight 0. With `service_job`, training batches are made by the
    tf.data service at `settings.data_service_address`, read in that job."""

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        if service_job is not None:
            # Every trainer registers the same whole-corpus pipeline of per-replica batches;
            # the job's dynamic sharding, not the input context, divides the data.
            input_context = tf.distribute.InputContext(1, 0, input_context.num_replicas_in_sync)
        # The global batch size: with input_context, pretraining_dataset yields per-replica batches.
        dataset = pretraining_dataset(
            files,
            vocab_file=vocab_file,
            lower_case=settings.do_lower_case,
            batch_size=settings.train_batch_size,
            max_seq_length=seq_length,
            max_predictions_per_seq=predictions,
            masked_lm_prob=settings.masked_lm_prob,
            whole_word_mask=settings.whole_word_mask,
            # Raw text only: records (eval files may be some) keep no word boundaries.
            word_segmenter=None if is_tfrecord(files[0]) else settings.word_segmenter,
            dupe_factor=settings.dupe_factor,
            shuffle=training,
            seed=seed,
            # Evaluation: one pass, in fixed-size batches padded with weight 0 (exact, static).
            repeat=training,
            drop_remainder=training,
            input_context=input_context,
            packing=settings.packing,
            max_predictions_per_row=row_predictions,
            max_instances_per_row=settings.max_instances_per_row,
            held_out=held_out,
            for_data_service=service_job is not None,
            input_encoding=settings.input_encoding,
            next_sentence_prediction=settings.next_sentence_prediction,
        )
        if service_job is not None:
            return data_service.from_service(dataset, settings.data_service_address, service_job)
        if training:
            return dataset
        return fixed_evaluation_batches(
            dataset, input_context.get_per_replica_batch_size(settings.train_batch_size)
        )

    return dataset_fn
