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

import random
from collections.abc import Sequence

import tensorflow as tf

from pipelines import masking, records, segmenters, text_dataset, text_input

DEFAULT_SHUFFLE_BUFFER_SIZE = 10_000


def _model_features(
    features: dict[str, tf.Tensor], max_seq_length: int, max_predictions_per_seq: int
) -> dict:
    """Casts to the dtypes the model takes and pins the static shapes."""
    out = {}
    for name in records.FEATURE_ORDER:
        length = max_seq_length if name in records.SEQUENCE_FEATURES else max_predictions_per_seq
        if name == "next_sentence_labels":
            length = 1
        dtype = tf.float32 if name in records.FLOAT_FEATURES else tf.int32
        out[name] = tf.ensure_shape(tf.cast(features[name], dtype), [None, length])
    return out


def _detect_format(files: Sequence[str], max_seq_length: int, max_predictions_per_seq: int) -> str:
    """'text', 'masked' or 'unmasked'; all files must agree."""
    kinds = {}
    for path in files:
        lengths = records.peek_format(path)
        if lengths is None:
            kinds[path] = "text"
        elif lengths:
            masked = records.check_format(path, lengths, max_seq_length, max_predictions_per_seq)
            kinds[path] = "masked" if masked else "unmasked"
    found = set(kinds.values())
    if not found:
        raise text_input.InputFileError(f"every input file is empty: {list(files)}")
    if len(found) > 1:
        examples = {kind: next(p for p, k in kinds.items() if k == kind) for kind in found}
        raise records.RecordFormatError(
            f"input files mix formats ({', '.join(f'{k}: {p}' for k, p in sorted(examples.items()))}); "
            "pass raw text files or TFRecord files of one kind"
        )
    return found.pop()


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
    word_segmenter: str | segmenters.Segmenter | None = None,
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
      word_segmenter: raw text with `whole_word_mask`: a segmenter name ("jieba") or a
        callable from text to (start, end) word spans; the CJK characters of a word are
        masked together (see `pipelines.segmenters`).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if dupe_factor < 1:
        raise ValueError(f"dupe_factor must be >= 1, got {dupe_factor}")
    if not 1 <= max_predictions_per_seq <= max_seq_length:
        raise ValueError(
            f"max_predictions_per_seq must be in [1, max_seq_length={max_seq_length}], got {max_predictions_per_seq}"
        )
    problems = segmenters.setting_problems(
        word_segmenter, whole_word_mask=whole_word_mask, whole_word_setting="whole_word_mask=True"
    )
    if problems:
        raise segmenters.SegmenterError("; ".join(problems))
    files = text_input.expand_input_patterns(input_files)
    num_pipelines, pipeline_id = 1, 0
    if input_context is not None:
        num_pipelines, pipeline_id = input_context.num_input_pipelines, input_context.input_pipeline_id
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    shard_files = num_pipelines > 1 and len(files) >= num_pipelines
    if shard_files:
        files = files[pipeline_id::num_pipelines]
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 62)
    input_format = _detect_format(files, max_seq_length, max_predictions_per_seq)
    if word_segmenter is not None and input_format != "text":
        raise segmenters.SegmenterError(
            f"word_segmenter applies to raw text input, but {files[0]} holds {input_format} TFRecords "
            "(records keep only token ids, not word boundaries); drop word_segmenter or pass the raw text"
        )

    masking_vocab = None
    if input_format != "masked":
        if vocab_file is None:
            raise ValueError(
                f"{files[0]} holds {input_format} data: pass vocab_file= to tokenize and mask it"
            )
        from bert_tf.tokenization import BertTokenizer

        tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)
        masking_vocab = masking.MaskingVocab.from_vocab(tokenizer.vocab)

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
                max_predictions_per_seq=max_predictions_per_seq,
                masked_lm_prob=masked_lm_prob,
                whole_word_mask=whole_word_mask,
                word_continues=word_continues,
            )
        )
        return features

    if input_format == "text":
        word_marker = None
        if word_segmenter is not None:
            word_marker = segmenters.WordMarker(word_segmenter, tokenizer.vocab, lower_case)
        blocks = text_dataset.pair_blocks(
            files,
            tokenizer,
            max_seq_length=max_seq_length,
            short_seq_prob=short_seq_prob,
            seed=seed,
            num_passes=None if repeat else dupe_factor,
            num_shards=1 if shard_files else num_pipelines,
            shard_index=0 if shard_files else pipeline_id,
            word_marker=word_marker,
        )
        names = (*records.SEQUENCE_FEATURES, "next_sentence_labels")
        if word_marker is not None:
            names += ("word_continues",)
        dataset = blocks.map(
            lambda block: mask({name: block[name] for name in names}, block["seed"]),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        ).unbatch()
        if shuffle:
            dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    else:
        file_dataset = tf.data.Dataset.from_tensor_slices(files)
        if shuffle:
            file_dataset = file_dataset.shuffle(len(files), seed=seed)
        dataset = file_dataset.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(len(files), 8),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        if num_pipelines > 1 and not shard_files:
            dataset = dataset.shard(num_pipelines, pipeline_id)
        if shuffle:
            dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
        if repeat:
            dataset = dataset.repeat()
        spec = records.feature_spec(max_seq_length, max_predictions_per_seq, masked=input_format == "masked")
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder).map(
            lambda serialized: tf.io.parse_example(serialized, spec), num_parallel_calls=tf.data.AUTOTUNE
        )
        if input_format == "unmasked":
            # A fresh stateless seed for every batch: new masks every epoch.
            mask_seeds = tf.data.Dataset.random(seed=seed).batch(2)
            dataset = tf.data.Dataset.zip(dataset, mask_seeds).map(
                mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
            )
    dataset = dataset.map(
        lambda features: _model_features(features, max_seq_length, max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)
