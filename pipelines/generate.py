"""Offline generation of pretraining TFRecords (the library behind create_pretraining_data).

Example:

>>> from pipelines import corpus, generate
>>> path = corpus.write_corpus("/tmp/pydoc_corpus.txt")
>>> config = generate.GenerationConfig(input_file=path, output_file="/tmp/pydoc.tfrecord",
...                                    vocab_file="tests/fixtures/bert_uncased_vocab.txt", dupe_factor=1,
...                                    overwrite=True)
>>> summary = generate.create_pretraining_data(config, progress=False)
>>> summary.instances > 0
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import time

import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import BertTfError, UsageError
from bert_tf.outputs import check_output
from bert_tf.progress_display import Progress
from bert_tf.tokenization import BertTokenizer
from pipelines import masking, records, segmenters, text_dataset, text_input
from pipelines.settings import GenerationConfig
from pipelines.summary import COUNTERS, Summary, warn_if_single_document

logger = logging.getLogger(__name__)


def finish_block(
    block: dict[str, tf.Tensor], config: GenerationConfig, masking_vocab: masking.MaskingVocab
) -> tuple[tf.Tensor, tf.Tensor]:
    """Masks a block of pairs (unless `config.dynamic_masking`) and serializes it.

    Returns the records (tf.string [pairs]) and the block's counts (int64, one per name
    of COUNTERS).
    """
    names = ("input_ids", "input_mask", "segment_ids")
    # Masked-LM-only records have no next_sentence_labels (see records.check_format).
    names += ("next_sentence_labels",) if config.next_sentence_prediction else ()
    features = {name: block[name] for name in names}
    if not config.dynamic_masking:
        features.update(
            masking.mask_sequences(
                block["input_ids"],
                block["input_mask"],
                block["seed"],
                masking_vocab=masking_vocab,
                max_predictions_per_seq=config.max_predictions_per_seq,
                masked_lm_prob=config.masked_lm_prob,
                whole_word_mask=config.do_whole_word_mask,
                word_continues=block.get("word_continues"),
            )
        )
        predictions = tf.reduce_sum(tf.cast(features["masked_lm_weights"], tf.int64))
    else:
        predictions = tf.constant(0, tf.int64)
    counts = tf.stack(
        [
            tf.shape(block["input_ids"], out_type=tf.int64)[0],
            tf.reduce_sum(block["next_sentence_labels"]),
            tf.reduce_sum(block["input_mask"]),
            predictions,
            block["empty_sentences"],
            block["empty_documents"],
            block["single_sentence_documents"],
        ]
    )
    return records.encode_examples(features), counts


def _check_outputs(output_file: str, overwrite: bool) -> list[str]:
    """The output files, checked before anything is created (see `bert_tf.outputs`)."""
    outputs = [o.strip() for o in output_file.split(",") if o.strip()]
    if len(set(outputs)) != len(outputs):
        raise UsageError(f"--output_file names a file twice: {output_file!r}")
    for path in outputs:
        if "://" in path and tf.io.gfile.isdir(path):
            raise BertTfError(f"--output_file {path!r} is a directory; name a file inside it")
        # A parent that is a file, a folder as the file, a file there without --overwrite.
        check_output(path, "--output_file", overwrite=overwrite, is_file=True)
    return outputs


def _make_output_dirs(outputs: list[str]) -> None:
    for path in outputs:
        directory = os.path.dirname(path)
        if directory and not tf.io.gfile.exists(directory):
            # Creating it is what a user running a long job wants; say so.
            logger.info("creating the output folder %s", directory)
            tf.io.gfile.makedirs(directory)


def create_pretraining_data(config: GenerationConfig, *, progress: bool = True, tokenizer=None) -> Summary:
    """Reads the corpus, writes pretraining TFRecords, returns the summary.

    Output files are written under temporary names and renamed at the end, so an
    interrupted run never leaves a file that looks complete. With `progress`, the bytes
    read by all passes, the rate and the ETA show on stderr (`bert_tf.progress_display`).
    """
    config.validate()
    started = time.monotonic()
    # Every check before anything is created: the outputs, the input, the vocab, the text.
    outputs = _check_outputs(config.output_file, config.overwrite)
    files = fileio.expand_files(config.input_file, "input_file")
    if tokenizer is None:
        tokenizer = BertTokenizer(config.vocab_file, lower_case=config.do_lower_case)
    encoding = text_input.line_encoding(config.input_encoding)
    text_input.check_mostly_text(
        files, tokenizer, "--input_file", accept=config.accept_non_text, encoding=encoding
    )
    _make_output_dirs(outputs)
    masking_vocab = masking.MaskingVocab.from_vocab(tokenizer.vocab)
    word_marker = None
    if config.word_segmenter is not None:
        word_marker = segmenters.WordMarker(config.word_segmenter)
    total_bytes = sum(tf.io.gfile.stat(f).length for f in files)

    read_stats = text_input.ReadStats()
    later_stats = text_input.ReadStats()  # of the passes after the first: for the progress display
    counters = tf.Variable(tf.zeros([len(COUNTERS)], tf.int64), trainable=False)
    blocks = text_dataset.pair_blocks(
        files,
        tokenizer,
        max_seq_length=config.max_seq_length,
        short_seq_prob=config.short_seq_prob,
        seed=config.random_seed,
        num_passes=config.dupe_factor,
        stats=read_stats,
        word_marker=word_marker,
        later_stats=later_stats,
        encoding=encoding,
        next_sentence_prediction=config.next_sentence_prediction,
    )
    serialized = _serialized_records(blocks, config, masking_vocab, counters)
    display = Progress(
        f"generating ({config.dupe_factor} passes)" if config.dupe_factor > 1 else "generating",
        total=config.dupe_factor * total_bytes,
        unit="bytes",
        enabled=progress,
    )
    written = _write_records(serialized, outputs, display, read_stats, later_stats, len(files))

    values = dict(zip(COUNTERS, counters.numpy().tolist(), strict=True))
    summary = Summary(
        **dataclasses.asdict(read_stats),
        empty_sentences=values["empty_sentences"] // config.dupe_factor,
        empty_documents=values["empty_documents"] // config.dupe_factor,
        single_sentence_documents=values["single_sentence_documents"] // config.dupe_factor,
        instances=values["instances"],
        random_next=values["random_next"],
        tokens=values["tokens"],
        masked_lm_predictions=values["masked_lm_predictions"],
        output_files=outputs,
        seconds=time.monotonic() - started,
    )
    warn_if_single_document(summary)
    if written != summary.instances:
        raise RuntimeError(
            f"internal error: wrote {written} records but counted {summary.instances} instances"
        )
    return summary


def _serialized_records(
    blocks: tf.data.Dataset,
    config: GenerationConfig,
    masking_vocab: masking.MaskingVocab,
    counters: tf.Variable,
) -> tf.data.Dataset:
    """The blocks' records, shuffled, in batches of 1024 (tf.string); `counters` adds up
    each block's counts as it is finished."""

    # Plain graph code: skipping AutoGraph's conversion saves seconds of start-up.
    @tf.autograph.experimental.do_not_convert
    def finish(block):
        serialized, counts = finish_block(block, config, masking_vocab)
        with tf.control_dependencies([counters.assign_add(counts)]):
            return tf.identity(serialized)

    serialized = (
        blocks.map(finish, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .unbatch()
        .shuffle(config.shuffle_buffer_size, seed=config.random_seed, reshuffle_each_iteration=False)
        .batch(1024)
        .prefetch(2)
    )
    # No autotuning: the maps run one block per core anyway, and the autotuner's thread
    # sometimes held up the iterator's teardown at the end of a run by almost two seconds.
    options = tf.data.Options()
    options.autotune.enabled = False
    return serialized.with_options(options)


def _write_records(
    serialized: tf.data.Dataset,
    outputs: list[str],
    display: Progress,
    read_stats: text_input.ReadStats,
    later_stats: text_input.ReadStats,
    num_files: int,
) -> int:
    """Writes the records round-robin to `outputs`, returns how many.

    Each output is written under fileio.partial's temporary name and renamed into place
    once all are written; on any error (no record at all included) the temporary files
    are removed. `display` shows the bytes of every pass read so far over the whole job
    (reading runs a shuffle buffer ahead of writing).
    """
    published = contextlib.ExitStack()
    temporary = [published.enter_context(fileio.partial(path)) for path in outputs]
    writers = [tf.io.TFRecordWriter(path) for path in temporary]
    written = 0
    try:
        with display:
            for batch in serialized:
                for record in batch.numpy():
                    writers[written % len(writers)].write(record)
                    written += 1
                display.update(read_stats.bytes + later_stats.bytes, note=f"{written:,} instances written")
        for writer in writers:
            writer.close()
        if written == 0:
            raise text_input.InputFileError(
                f"no training pair could be made from {num_files} input file(s) ({read_stats.documents} documents, "
                f"{read_stats.lines} lines): a pair needs a document of at least two sentences (one sentence per "
                "line, a blank line between documents)"
            )
        published.close()
    except BaseException:
        for writer in writers:
            writer.close()
        published.__exit__(*sys.exc_info())  # removes the temporary files
        raise
    return written
