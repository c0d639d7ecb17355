"""`pretraining_dataset`: model-ready pretraining batches from text or TFRecords.

Three inputs, told apart by reading the first record of each file:

- raw text (one sentence per line, blank line between documents): pairs and masks are
  made on the fly, different ones every pass (`dupe_factor` passes make an epoch);
- original-format masked TFRecords (written by the original create_pretraining_data.py
  or by ours): read as they are, fixed masks;
- unmasked TFRecords (`create_pretraining_data --dynamic_masking`): masks drawn afresh
  for every batch, so every epoch sees new ones.

Every output batch is a dict with the original feature names: input_ids, input_mask,
segment_ids int32 [batch, max_seq_length]; masked_lm_positions, masked_lm_ids int32
[batch, max_predictions_per_seq]; masked_lm_weights float32 [batch,
max_predictions_per_seq]; next_sentence_labels int32 [batch, 1] (1 = random next).

`packing=True` packs several instances into each row of every input kind
(`bert_tf.preprocessing.packing`): input_mask then holds instance numbers, the masked_lm_* features
have `max_predictions_per_row` slots, and next_sentence_positions,
next_sentence_labels (int32) and next_sentence_weights (float32) have
`max_instances_per_row`. Records may then be shorter than the rows (e.g. records made at
128 packed into rows of 512).

To switch from sequence length 128 to 512 (the last 10% of the original recipe), build a
new dataset with `max_seq_length=512` (from text, or from records written at 512).

Example:

>>> from pipelines import corpus, pretraining_dataset
>>> path = corpus.write_corpus("/tmp/pydoc_corpus.txt")
>>> dataset = pretraining_dataset(path, vocab_file="tests/fixtures/bert_uncased_vocab.txt",
...                               batch_size=8, seed=1)
>>> batch = next(iter(dataset))
>>> batch["input_ids"].shape, batch["next_sentence_labels"].shape
(TensorShape([8, 128]), TensorShape([8, 1]))
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import NamedTuple

import tensorflow as tf

from bert_tf import fileio
from bert_tf.preprocessing import packing as packer
from bert_tf.tokenization import BertTokenizer
from pipelines import masking, records, segmenters, text_dataset, text_input

DEFAULT_SHUFFLE_BUFFER_SIZE = 10_000


def _model_features(
    features: dict[str, tf.Tensor],
    max_seq_length: int,
    max_predictions_per_seq: int,
    next_sentence_prediction: bool = True,
) -> dict:
    """Casts to the dtypes the model takes and pins the static shapes. Without next-sentence
    prediction the labels are 0 and `next_sentence_weights` 0, so the loss leaves them out."""
    out = {}
    if not next_sentence_prediction:
        features = {**features, "next_sentence_labels": tf.zeros_like(features["input_ids"][:, :1])}
        out["next_sentence_weights"] = tf.zeros_like(features["input_ids"][:, :1], tf.float32)
    for name in records.FEATURE_ORDER:
        length = max_seq_length if name in records.SEQUENCE_FEATURES else max_predictions_per_seq
        if name == "next_sentence_labels":
            length = 1
        dtype = tf.float32 if name in records.FLOAT_FEATURES else tf.int32
        out[name] = tf.ensure_shape(tf.cast(features[name], dtype), [None, length])
    return out


def _packed_model_features(
    features: dict, max_seq_length: int, row_predictions: int, row_instances: int
) -> dict:
    out = {}
    for name in packer.PACKED_FEATURES:
        if name in records.SEQUENCE_FEATURES:
            length = max_seq_length
        else:
            length = row_predictions if name.startswith("masked_lm") else row_instances
        dtype = tf.float32 if name in packer.FLOAT_FEATURES else tf.int32
        out[name] = tf.ensure_shape(tf.cast(features[name], dtype), [None, length])
    return out


def _detect_format(
    files: Sequence[str],
    max_seq_length: int,
    max_predictions_per_seq: int,
    packed_rows: int | None = None,
    next_sentence_prediction: bool = True,
) -> tuple[str, int]:
    """('text', 'masked' or 'unmasked'; the sequence length of the records); all files must agree.

    `packed_rows`: records are packed into rows of that length, so they may be shorter.
    """
    kinds, record_lengths = {}, set()
    for path in files:
        lengths = records.peek_format(path)
        if lengths is None:
            kinds[path] = "text"
        elif lengths:
            record_length = lengths.get("input_ids", max_seq_length)
            if packed_rows is not None and record_length > packed_rows:
                raise records.RecordFormatError(
                    f"{path}: records hold sequences of {record_length} tokens, which cannot be packed into "
                    f"rows of max_seq_length={packed_rows} (an instance is never split); pass "
                    f"max_seq_length={record_length} or more, or regenerate the records with "
                    f"--max_seq_length={packed_rows} or less"
                )
            if packed_rows is not None:
                max_seq_length = record_length
            masked = records.check_format(
                path, lengths, max_seq_length, max_predictions_per_seq, next_sentence_prediction
            )
            kinds[path] = "masked" if masked else "unmasked"
            record_lengths.add(record_length)
    found = set(kinds.values())
    if not found:
        raise text_input.InputFileError(f"every input file is empty: {list(files)}")
    if len(found) > 1:
        examples = {kind: next(p for p, k in kinds.items() if k == kind) for kind in found}
        raise records.RecordFormatError(
            f"input files mix formats ({', '.join(f'{k}: {p}' for k, p in sorted(examples.items()))}); "
            "pass raw text files or TFRecord files of one kind"
        )
    if len(record_lengths) > 1:
        raise records.RecordFormatError(
            f"input records have different sequence lengths {sorted(record_lengths)}; pass records of one length"
        )
    return found.pop(), (record_lengths.pop() if record_lengths else max_seq_length)


def pretraining_dataset(
    input_files: str | Sequence[str],
    *,
    vocab_file: str | None = None,
    lower_case: bool = True,
    batch_size: int,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15,
    short_seq_prob: float = 0.1,
    whole_word_mask: bool = False,
    dupe_factor: int = 1,
    shuffle: bool = True,
    seed: int | None = None,
    repeat: bool = True,
    drop_remainder: bool = True,
    input_context: tf.distribute.InputContext | None = None,
    shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER_SIZE,
    held_out: str | None = None,
    word_segmenter: str | segmenters.Segmenter | None = None,
    packing: bool = False,
    max_predictions_per_row: int | None = None,
    max_instances_per_row: int = packer.DEFAULT_MAX_INSTANCES_PER_ROW,
    packing_buffer_size: int = packer.DEFAULT_BUFFER_SIZE,
    for_data_service: bool = False,
    input_encoding: str | None = None,
    next_sentence_prediction: bool = True,
) -> tf.data.Dataset:
    """Batches of pretraining features from raw text or TFRecord files.

    Args:
      input_files: comma-separated globs, or a list of them.
      vocab_file: needed for raw text and for unmasked records (masking needs the
        special ids); ignored for masked records.
      batch_size: the global batch size. With `input_context` (from
        `strategy.distribute_datasets_from_function`) each input pipeline yields
        batches of `input_context.get_per_replica_batch_size(batch_size)` and reads its
        own share of the files (or of the records / document blocks when there are
        fewer files than pipelines).
      seed: makes the stream reproducible (pairs, masks, shuffles); None draws one.
      repeat: repeat forever (each text pass with new pairs and masks).
      held_out: None for all the data; "exclude" leaves out an evaluation slice (every
        20th block of 256 documents of raw text, every 20th record of each TFRecord
        file), "only" gives just that slice.
      word_segmenter: raw text with `whole_word_mask`: a segmenter name ("jieba") or a
        callable from text to (start, end) word spans; the CJK characters of a word are
        masked together (see `pipelines.segmenters`).
      packing: pack instances into rows (see the module docstring); `batch_size` then
        counts rows. `max_predictions_per_row` defaults to
        `bert_tf.preprocessing.packing.default_max_predictions_per_row`; `packing_buffer_size` instances are
        packed together.
      for_data_service: build a graph that tf.data service workers in other processes can
        run: raw text is read with graph ops (one block of documents per file at least, no
        held-out slice, no word segmenter; see `text_dataset._graph_block_stream`).
      input_encoding: raw text's encoding (None: UTF-8; see `bert_tf.text_encoding`).
      next_sentence_prediction: False trains the masked LM alone: raw text becomes
        full-length segments of whole sentences (`instances.build_segments`), records must
        have no next_sentence_labels, and batches carry labels 0 with
        `next_sentence_weights` 0 (the loss leaves them out). Not with `packing` (the
        segments fill their rows already).
    """
    settings = _Settings(**locals())  # the first statement: locals() holds just the arguments
    row_predictions = _check_settings(settings)
    share = _share(fileio.expand_files(input_files, "input_files"), input_context, batch_size)
    seed = random.SystemRandom().randrange(1 << 62) if seed is None else seed
    packed_rows = max_seq_length if packing else None
    input_format, record_length = _detect_format(
        share.files, max_seq_length, max_predictions_per_seq, packed_rows, next_sentence_prediction
    )
    _check_input(settings, share.files, input_format)
    tokenizer = _tokenizer(settings, share.files[0], input_format)
    mask = _masker(settings, tokenizer)
    if input_format == "text":
        dataset = _text_instances(settings, share, tokenizer, mask, seed)
    else:
        dataset = _record_instances(settings, share, input_format, record_length, mask, seed)
    dataset = _model_batches(dataset, settings, share.batch_size, row_predictions, seed)
    return dataset.prefetch(tf.data.AUTOTUNE)


@dataclasses.dataclass(frozen=True)
class _Settings:
    """The arguments of `pretraining_dataset`, as its steps read them."""

    input_files: str | Sequence[str]
    vocab_file: str | None
    lower_case: bool
    batch_size: int
    max_seq_length: int
    max_predictions_per_seq: int
    masked_lm_prob: float
    short_seq_prob: float
    whole_word_mask: bool
    dupe_factor: int
    shuffle: bool
    seed: int | None
    repeat: bool
    drop_remainder: bool
    input_context: tf.distribute.InputContext | None
    shuffle_buffer_size: int
    held_out: str | None
    word_segmenter: str | segmenters.Segmenter | None
    packing: bool
    max_predictions_per_row: int | None
    max_instances_per_row: int
    packing_buffer_size: int
    for_data_service: bool
    input_encoding: str | None
    next_sentence_prediction: bool


class _Share(NamedTuple):
    """What one input pipeline reads: its files, and its share of their records or blocks."""

    files: list[str]
    num_pipelines: int
    pipeline_id: int
    shard_files: bool  # each pipeline reads its own files (else its share of every file's data)
    batch_size: int  # per replica


def _check_settings(settings: _Settings) -> int | None:
    """Refuses settings that cannot work together; returns the predictions per packed row."""
    if settings.packing and not settings.next_sentence_prediction:
        raise ValueError(
            "packing packs next-sentence pairs; masked-LM-only segments fill their rows already: drop packing"
        )
    if settings.held_out not in (None, "exclude", "only"):
        raise ValueError(f"held_out must be None, 'exclude' or 'only', got {settings.held_out!r}")
    if settings.batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {settings.batch_size}")
    if settings.dupe_factor < 1:
        raise ValueError(f"dupe_factor must be >= 1, got {settings.dupe_factor}")
    max_seq_length, max_predictions_per_seq = settings.max_seq_length, settings.max_predictions_per_seq
    if not 1 <= max_predictions_per_seq <= max_seq_length:
        raise ValueError(
            f"max_predictions_per_seq must be in [1, max_seq_length={max_seq_length}], got {max_predictions_per_seq}"
        )
    problems = segmenters.setting_problems(
        settings.word_segmenter,
        whole_word_mask=settings.whole_word_mask,
        whole_word_setting="whole_word_mask=True",
    )
    if problems:
        raise segmenters.SegmenterError("; ".join(problems))
    row_predictions = settings.max_predictions_per_row
    if settings.packing:
        row_predictions = row_predictions or packer.default_max_predictions_per_row(
            max_predictions_per_seq, settings.max_instances_per_row
        )
        check_packing_budget(
            max_predictions_per_seq,
            row_predictions,
            settings.max_instances_per_row,
            settings.packing_buffer_size,
        )
    return row_predictions


def _share(files: list[str], input_context: tf.distribute.InputContext | None, batch_size: int) -> _Share:
    """This input pipeline's share: its own files when there are enough to go round."""
    num_pipelines, pipeline_id = 1, 0
    if input_context is not None:
        num_pipelines, pipeline_id = input_context.num_input_pipelines, input_context.input_pipeline_id
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    shard_files = num_pipelines > 1 and len(files) >= num_pipelines
    if shard_files:
        files = files[pipeline_id::num_pipelines]
    return _Share(files, num_pipelines, pipeline_id, shard_files, batch_size)


def _check_input(settings: _Settings, files: list[str], input_format: str) -> None:
    """Refuses settings that the input's format cannot take."""
    if (
        settings.for_data_service
        and input_format == "text"
        and (settings.word_segmenter is not None or settings.held_out is not None)
    ):
        raise ValueError(
            "raw text on tf.data service is read in graph ops: no word_segmenter (Python) and no held_out "
            "slice; evaluate on separate eval files"
        )
    if settings.word_segmenter is not None and input_format != "text":
        raise segmenters.SegmenterError(
            f"word_segmenter applies to raw text input, but {files[0]} holds {input_format} TFRecords "
            "(records keep only token ids, not word boundaries); drop word_segmenter or pass the raw text"
        )


def _tokenizer(settings: _Settings, first_file: str, input_format: str) -> BertTokenizer | None:
    """The tokenizer that raw text and unmasked records need (masking needs the special ids);
    None for masked records."""
    if input_format == "masked":
        return None
    if settings.vocab_file is None:
        raise ValueError(f"{first_file} holds {input_format} data: pass vocab_file= to tokenize and mask it")
    return BertTokenizer(settings.vocab_file, lower_case=settings.lower_case)


def _masker(settings: _Settings, tokenizer: BertTokenizer | None) -> Callable:
    """The function that masks a batch of features under a stateless seed (int64 [2])."""
    masking_vocab = None if tokenizer is None else masking.MaskingVocab.from_vocab(tokenizer.vocab)

    # Plain graph code: skipping AutoGraph's conversion saves seconds of start-up.
    @tf.autograph.experimental.do_not_convert
    def mask(features, mask_seed):
        features = dict(features)
        word_continues = features.pop("word_continues", None)
        features.update(
            masking.mask_sequences(
                features["input_ids"],
                features["input_mask"],
                mask_seed,
                masking_vocab=masking_vocab,
                max_predictions_per_seq=settings.max_predictions_per_seq,
                masked_lm_prob=settings.masked_lm_prob,
                whole_word_mask=settings.whole_word_mask,
                word_continues=word_continues,
            )
        )
        return features

    return mask


def _text_instances(
    settings: _Settings, share: _Share, tokenizer: BertTokenizer, mask: Callable, seed: int
) -> tf.data.Dataset:
    """Raw text: masked pairs (or segments) made on the fly, shuffled, in batches (the packing
    buffers with `packing`)."""
    word_marker = None
    if settings.word_segmenter is not None:
        word_marker = segmenters.WordMarker(settings.word_segmenter)
    min_documents = text_input.DEFAULT_MIN_DOCUMENTS
    if share.num_pipelines > 1 and not share.shard_files:
        # Every shard must get a block (a worker with none would wait for data forever).
        min_documents = text_input.block_size_for_shards(share.files, share.num_pipelines)
    blocks = text_dataset.pair_blocks(
        share.files,
        tokenizer,
        min_documents=min_documents,
        max_seq_length=settings.max_seq_length,
        short_seq_prob=settings.short_seq_prob,
        seed=seed,
        num_passes=None if settings.repeat else settings.dupe_factor,
        num_shards=1 if share.shard_files else share.num_pipelines,
        shard_index=0 if share.shard_files else share.pipeline_id,
        held_out=settings.held_out,
        word_marker=word_marker,
        graph_reader=settings.for_data_service,
        encoding=text_input.line_encoding(settings.input_encoding),
        next_sentence_prediction=settings.next_sentence_prediction,
    )
    names = (*records.SEQUENCE_FEATURES, "next_sentence_labels")
    if word_marker is not None:
        names += ("word_continues",)
    dataset = blocks.map(
        lambda block: mask({name: block[name] for name in names}, block["seed"]),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    ).unbatch()
    if settings.shuffle:
        dataset = dataset.shuffle(settings.shuffle_buffer_size, seed=seed)
    buffers = (
        (settings.packing_buffer_size, False)
        if settings.packing
        else (share.batch_size, settings.drop_remainder)
    )
    return dataset.batch(*buffers)


def _serialized_records(files: list[str], held_out: str | None, shuffle: bool, seed: int) -> tf.data.Dataset:
    """The serialized records of `files` (of the held-out slice, or without it), interleaved."""
    file_dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        file_dataset = file_dataset.shuffle(len(files), seed=seed)

    def read_file(path):
        records = tf.data.TFRecordDataset(path)
        if held_out is None:
            return records
        every = text_dataset.HELD_OUT_EVERY
        only = held_out == "only"
        return (
            records.enumerate()
            .filter(lambda index, _: tf.equal(index % every == every - 1, only))
            .map(lambda _, record: record)
        )

    return file_dataset.interleave(
        read_file,
        cycle_length=min(len(files), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


def _record_instances(
    settings: _Settings, share: _Share, input_format: str, record_length: int, mask: Callable, seed: int
) -> tf.data.Dataset:
    """TFRecords: parsed in batches (the packing buffers with `packing`); unmasked records get
    fresh masks for every batch."""
    dataset = _serialized_records(share.files, settings.held_out, settings.shuffle, seed)
    if share.num_pipelines > 1 and not share.shard_files:
        dataset = dataset.shard(share.num_pipelines, share.pipeline_id)
    if settings.shuffle:
        dataset = dataset.shuffle(settings.shuffle_buffer_size, seed=seed)
    if settings.repeat:
        dataset = dataset.repeat()
    spec = records.feature_spec(
        record_length,
        settings.max_predictions_per_seq,
        masked=input_format == "masked",
        next_sentence_prediction=settings.next_sentence_prediction,
    )
    # With packing, the batches are the packing buffers: never dropped, every instance kept.
    buffers = (
        (settings.packing_buffer_size, False)
        if settings.packing
        else (share.batch_size, settings.drop_remainder)
    )
    dataset = dataset.batch(*buffers).map(
        lambda serialized: tf.io.parse_example(serialized, spec), num_parallel_calls=tf.data.AUTOTUNE
    )
    if input_format == "unmasked":
        # A fresh stateless seed for every batch: new masks every epoch.
        mask_seeds = tf.data.Dataset.random(seed=seed).batch(2)
        dataset = tf.data.Dataset.zip(dataset, mask_seeds).map(
            mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
        )
    return dataset


def _model_batches(
    dataset: tf.data.Dataset, settings: _Settings, batch_size: int, row_predictions: int | None, seed: int
) -> tf.data.Dataset:
    """The model's batches: the instance batches cast and shaped, or with `packing` packed
    into rows that are shuffled and batched here."""
    max_seq_length = settings.max_seq_length
    if settings.packing:
        # Batches of instances above are the packing buffers; rows are shuffled and batched here.
        dataset = packer.pack_instances(
            dataset,
            max_seq_length=max_seq_length,
            max_predictions_per_row=row_predictions,
            max_instances_per_row=settings.max_instances_per_row,
        )
        if settings.shuffle:
            dataset = dataset.shuffle(settings.packing_buffer_size, seed=seed + 1)
        return dataset.batch(batch_size, drop_remainder=settings.drop_remainder).map(
            lambda features: _packed_model_features(
                features, max_seq_length, row_predictions, settings.max_instances_per_row
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    return dataset.map(
        lambda features: _model_features(
            features, max_seq_length, settings.max_predictions_per_seq, settings.next_sentence_prediction
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def fixed_evaluation_batches(dataset: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """Batches of exactly `batch_size` rows for exact evaluation, for ever (static shapes: TPUs).

    `dataset` yields the batches of one pass over the evaluation data (not repeated, the
    last one possibly short). Each batch gets `next_sentence_weights` (1.0 per real
    instance; packed batches have them already); the short last batch is filled with rows
    of weight 0 (no masked-LM weight, no instance), and batches of weight 0 follow it, so a
    loop of a fixed number of steps never runs out of data and nothing is counted twice.
    Weighted by those weights, metrics over the steps are exact.

    Example:

    >>> rows = {"input_ids": tf.ones([5, 4], tf.int32), "masked_lm_weights": tf.ones([5, 2]),
    ...         "next_sentence_labels": tf.zeros([5, 1], tf.int32)}
    >>> batches = fixed_evaluation_batches(tf.data.Dataset.from_tensor_slices(rows).batch(3), 3)
    >>> [float(tf.reduce_sum(b["next_sentence_weights"])) for b in batches.take(4)]
    [3.0, 2.0, 0.0, 0.0]
    """

    def weighted(features):
        features = dict(features)
        if "next_sentence_weights" not in features:  # one instance per row
            features["next_sentence_weights"] = tf.ones_like(features["next_sentence_labels"], tf.float32)
        missing = batch_size - tf.shape(features["input_ids"])[0]
        filled = {}
        for name, value in features.items():
            value = tf.pad(value, [[0, missing]] + [[0, 0]] * (value.shape.rank - 1))
            filled[name] = tf.ensure_shape(value, [batch_size, *value.shape[1:]])
        return filled

    dataset = dataset.map(weighted)
    empty = {
        name: tf.zeros([batch_size, *spec.shape[1:]], spec.dtype)
        for name, spec in dataset.element_spec.items()
    }
    return dataset.concatenate(tf.data.Dataset.from_tensors(empty).repeat())


def check_packing_budget(
    max_predictions_per_seq: int,
    max_predictions_per_row: int,
    max_instances_per_row: int,
    buffer_size: int = 1,
) -> None:
    """A packed row must hold at least one instance with all its predictions."""
    if max_predictions_per_row < max_predictions_per_seq:
        raise ValueError(
            f"max_predictions_per_row={max_predictions_per_row} is too small for packing: one instance alone "
            f"may have max_predictions_per_seq={max_predictions_per_seq} predictions; pass "
            f"max_predictions_per_row={max_predictions_per_seq} or more (default for these settings: "
            f"{packer.default_max_predictions_per_row(max_predictions_per_seq, max_instances_per_row)})"
        )
    if max_instances_per_row < 1 or buffer_size < 1:
        raise ValueError(
            f"max_instances_per_row ({max_instances_per_row}) and packing_buffer_size ({buffer_size}) must be >= 1"
        )
