"""`create_pretraining_data` as an Apache Beam pipeline: the same records, any number of machines.

The steps, each Beam's own transform over the one-process generator's functions:

1. The input files are cut into byte ranges (64 MB); each range yields the documents
   that begin in it (`text_input.documents_in_range`), so a single large file is read
   in parallel too.
2. Each document is identified by a hash of its text and the seed. The hash puts it in
   one of N blocks, N = documents // 256, so a block is a random sample of about 256
   documents of the whole corpus (a `GroupByKey`).
3. Each block, its documents sorted by hash, goes through the one-process generator's
   graph code (`text_dataset.block_pairs`, `generate.finish_block`) once per pass
   (`--dupe_factor`), seeded by (seed, pass, block); its records are shuffled (seeded)
   and written to PREFIX-00000-of-000NN by Beam's file sink (temporary files renamed
   when all are written).

The random "next segment". The original draws it from the whole corpus; the one-process
generator from the other documents of its block of about 256 neighbouring documents.
Here a block is a hash-chosen sample of the whole corpus, so the draw is from another
document of the whole corpus, through a pool of about 256 (the same for every pass).
Everything else is per block with the same code and the same block size, so the
statistics (instances per document, 50/50 next sentence, 80/10/10, truncation) are the
one-process generator's (tests/pipelines/test_beam_generate.py).

The process that builds and submits the pipeline imports no TensorFlow (seconds of a
run): its checks reach files through `pipelines.beam.files`, and the steps import what
they run in the workers.

Determinism: every random draw follows from the seed and the documents' text, never
from the order or number of workers, so two runs, or runs with 1 and 20 workers, write
the same records (which shard holds a record is the runner's choice).
"""

from __future__ import annotations

import collections
import hashlib
import logging
import math
import time
from collections.abc import Iterable, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io import filebasedsink
from apache_beam.io.filesystem import CompressionTypes

from bert_tf import fileio
from bert_tf.errors import UsageError
from bert_tf.outputs import check_output
from bert_tf.vocab import load_vocab
from pipelines import segmenters, text_input
from pipelines.beam import files, runner
from pipelines.settings import GenerationConfig
from pipelines.summary import COUNTERS, Summary, warn_if_single_document

logger = logging.getLogger(__name__)

# Bytes of input text one worker reads as a unit.
RANGE_BYTES = 64 << 20
# Bytes of input text (per pass) per output shard, when --num_output_shards is not given.
SHARD_TEXT_BYTES = 100_000_000
SHARD_NAME_TEMPLATE = "-SSSSS-of-NNNNN"
_READ_COUNTERS = ("lines", "documents", "invalid_utf8_lines", "long_lines_cut")
# Of COUNTERS, those that count the input (once, not once per pass).
_INPUT_COUNTERS = ("empty_sentences", "empty_documents", "single_sentence_documents")


def _counter(name: str):
    return beam.metrics.Metrics.counter(runner.NAMESPACE, name)


class _ReadDocuments(beam.DoFn):
    """(path, start, end) → (the document's hash, its lines) for each document of the range."""

    def __init__(self, seed: int, encoding: str = "utf-8"):
        self.seed = seed
        self.encoding = encoding

    def process(self, file_range: tuple[str, int, int]) -> Iterable[tuple[int, tuple[str, ...]]]:
        path, start, end = file_range
        stats = text_input.ReadStats()
        for document in text_input.documents_in_range(path, start, end, stats=stats, encoding=self.encoding):
            yield document_hash(self.seed, document), tuple(document)
        for name in _READ_COUNTERS:
            _counter(name).inc(getattr(stats, name))


def document_hash(seed: int, document: Sequence[str]) -> int:
    """A document's identity under a seed: 63 bits of a hash of the seed and its text."""
    digest = hashlib.blake2b("\n".join(document).encode("utf-8"), digest_size=8, key=str(seed).encode())
    return int.from_bytes(digest.digest(), "big") >> 1


def _to_block(document: tuple[int, tuple[str, ...]], num_blocks: int):
    return document[0] % num_blocks, document


class _BlockRecords(beam.DoFn):
    """(block, documents) → the block's serialized records, all passes, shuffled."""

    def __init__(self, config: GenerationConfig):
        self.config = config

    def setup(self) -> None:
        # In the worker: the launcher imports none of TensorFlow.
        import tensorflow as tf

        from bert_tf.tokenization import BertTokenizer
        from pipelines import generate, masking, text_dataset

        config = self.config
        tokenizer = BertTokenizer(config.vocab_file, lower_case=config.do_lower_case)
        masking_vocab = masking.MaskingVocab.from_vocab(tokenizer.vocab)
        self.word_marker = segmenters.WordMarker(config.word_segmenter) if config.word_segmenter else None
        with_marks = self.word_marker is not None

        @tf.function(
            input_signature=[
                tf.TensorSpec([None], tf.string),
                tf.TensorSpec([None], tf.int64),
                tf.TensorSpec([], tf.int64),
                tf.TensorSpec([], tf.int64),
                tf.TensorSpec([None], tf.bool),
            ],
            autograph=False,
        )
        def records_of_pass(lines, sentences_per_document, block_index, pass_index, marks):
            pieces, continues = text_dataset.tokenize_lines(tokenizer, lines, marks if with_marks else None)
            block = text_dataset.block_pairs(
                pieces,
                sentences_per_document,
                text_dataset.block_seed(config.random_seed, pass_index, block_index),
                max_seq_length=config.max_seq_length,
                short_seq_prob=config.short_seq_prob,
                cls_id=int(tokenizer.cls_id),
                sep_id=int(tokenizer.sep_id),
                continues=continues,
                next_sentence_prediction=config.next_sentence_prediction,
            )
            return generate.finish_block(block, config, masking_vocab)

        self.records_of_pass = records_of_pass

    def process(self, block: tuple[int, Iterable[tuple[int, tuple[str, ...]]]]) -> Iterable[bytes]:
        import tensorflow as tf  # loaded by setup

        block_index, documents = block
        documents = sorted(documents)  # by hash: the same block whatever order they came in
        lines = [line for _, document in documents for line in document]
        lengths = tf.constant([len(document) for _, document in documents], tf.int64)
        marks = self.word_marker(lines) if self.word_marker is not None else np.zeros([0], bool)
        lines = tf.constant(lines, tf.string)
        records, totals = [], collections.Counter()
        for pass_index in range(self.config.dupe_factor):
            serialized, counts = self.records_of_pass(
                lines, lengths, tf.constant(block_index, tf.int64), tf.constant(pass_index, tf.int64), marks
            )
            records.extend(serialized.numpy().tolist())
            for name, value in zip(COUNTERS, counts.numpy().tolist(), strict=True):
                if pass_index == 0 or name not in _INPUT_COUNTERS:
                    totals[name] += value
        for name, value in totals.items():
            _counter(name).inc(value)
        order = np.random.default_rng([self.config.random_seed % (1 << 63), block_index]).permutation(
            len(records)
        )
        for index in order:
            yield records[index]


class _TFRecordSink(filebasedsink.FileBasedSink):
    """Beam's file sink (temporary files, renamed into place at the end) writing through TensorFlow's
    TFRecordWriter (its native CRCs: Beam's own TFRecord sink needs a CRC32C package)."""

    def __init__(self, prefix: str, num_shards: int):
        super().__init__(
            prefix,
            coder=beam.coders.BytesCoder(),
            file_name_suffix="",
            num_shards=num_shards,
            shard_name_template=SHARD_NAME_TEMPLATE,
            mime_type="application/octet-stream",
            compression_type=CompressionTypes.UNCOMPRESSED,
        )

    def open(self, temp_path: str):
        import tensorflow as tf  # in the worker

        return tf.io.TFRecordWriter(temp_path)

    def write_encoded_record(self, file_handle, encoded_value: bytes) -> None:
        file_handle.write(encoded_value)


def shard_names(prefix: str, num_shards: int) -> list[str]:
    return [f"{prefix}-{index:05d}-of-{num_shards:05d}" for index in range(num_shards)]


def _check_output_prefix(prefix: str, overwrite: bool) -> list[str]:
    """The shards of an earlier run under `prefix` (refused without --overwrite)."""
    if "," in prefix:
        raise UsageError(
            f"--output_file={prefix}: with --runner it is one name, the prefix of the shards "
            "(PREFIX-00000-of-000NN); set their number with --num_output_shards"
        )
    check_output(prefix, "--output_file", overwrite=overwrite, is_file=True, filesystem=files)
    existing = sorted(files.glob(f"{prefix}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]"))
    if existing and not overwrite:
        raise UsageError(
            f"--output_file={prefix}: {len(existing)} shard(s) of an earlier run exist ({existing[0]}, ...); "
            "pass --overwrite to replace them, or choose a new prefix"
        )
    return existing


def byte_ranges(paths: Sequence[str], sizes: Sequence[int], range_bytes: int = RANGE_BYTES):
    """(path, start, end) units of `range_bytes` covering each file, for `documents_in_range`."""
    return [
        (path, start, min(start + range_bytes, size))
        for path, size in zip(paths, sizes, strict=True)
        for start in range(0, size, range_bytes)
    ]


def create_pretraining_data(
    config: GenerationConfig,
    beam_args: Sequence[str] = (),
    *,
    range_bytes: int = RANGE_BYTES,
    min_documents: int = text_input.DEFAULT_MIN_DOCUMENTS,
) -> Summary:
    """Runs the generator as a Beam pipeline on `config.runner` with Beam's options `beam_args`.

    Everything is checked before the pipeline starts: the options, the outputs (shards
    of an earlier run need `overwrite`; they are replaced once the new ones are written),
    the input, the vocab and the text. Returns the summary the one-process run gives.
    """
    config.validate()
    if not config.runner:
        raise UsageError("create_pretraining_data on Beam needs a runner (config.runner)")
    started = time.monotonic()
    pipeline_runner, options = runner.pipeline_options(config.runner, beam_args)
    prefix = fileio.abspath(config.output_file.strip())
    earlier = _check_output_prefix(prefix, config.overwrite)
    input_files = _check_input(config)
    sizes = [files.size(path) for path in input_files]
    num_shards = config.num_output_shards or max(
        1, math.ceil(sum(sizes) * config.dupe_factor / SHARD_TEXT_BYTES)
    )
    ranges = byte_ranges(input_files, sizes, range_bytes)
    directory = fileio.dirname(prefix)
    if directory and not files.exists(directory):
        logger.info("creating the output folder %s", directory)
        files.makedirs(directory)
    logger.info(
        "running on %s: %d file(s), %.1f MB in %d range(s), %d output shard(s)",
        config.runner,
        len(input_files),
        sum(sizes) / 1e6,
        len(ranges),
        num_shards,
    )
    pipeline = beam.Pipeline(runner=pipeline_runner, options=options)
    _add_steps(pipeline, config, ranges, prefix, num_shards, min_documents)
    counts = runner.run(pipeline)

    written = _publish_shards(prefix, num_shards, earlier, counts, len(input_files))
    summary = Summary(
        files=len(input_files),
        bytes=sum(sizes),
        empty_files=[path for path, size in zip(input_files, sizes, strict=True) if size == 0],
        **{name: counts.get(name, 0) for name in (*_READ_COUNTERS, *COUNTERS)},
        output_files=written,
        seconds=time.monotonic() - started,
    )
    warn_if_single_document(summary)
    return summary


def _check_input(config: GenerationConfig) -> list[str]:
    """The input files, once the vocab, the text and the word segmenter are checked."""
    input_files = fileio.expand_files(config.input_file, "input_file", filesystem=files)
    load_vocab(config.vocab_file, filesystem=files)

    def tokenizer():  # made (TensorFlow loaded) only for lines that may give no word piece
        from bert_tf.tokenization import BertTokenizer

        return BertTokenizer(config.vocab_file, lower_case=config.do_lower_case)

    text_input.check_mostly_text(
        input_files,
        tokenizer,
        "--input_file",
        accept=config.accept_non_text,
        filesystem=files,
        encoding=text_input.line_encoding(config.input_encoding),
    )
    if config.word_segmenter is not None:
        segmenters.WordMarker(config.word_segmenter)  # installed and working, before the workers need it
    return input_files


def _add_steps(
    pipeline: beam.Pipeline,
    config: GenerationConfig,
    ranges: Sequence[tuple[str, int, int]],
    prefix: str,
    num_shards: int,
    min_documents: int,
) -> None:
    """The steps of the module docstring: ranges → documents → blocks → records → shards."""
    documents = (
        pipeline
        | "Ranges" >> beam.Create(ranges)
        | "Spread" >> beam.Reshuffle()
        | "ReadDocuments"
        >> beam.ParDo(_ReadDocuments(config.random_seed, text_input.line_encoding(config.input_encoding)))
    )
    num_blocks = (
        documents
        | "CountDocuments" >> beam.combiners.Count.Globally()
        | "NumBlocks" >> beam.Map(lambda count: max(1, count // min_documents))
    )
    _ = (
        documents
        | "ToBlocks" >> beam.Map(_to_block, num_blocks=beam.pvalue.AsSingleton(num_blocks))
        | "GroupBlocks" >> beam.GroupByKey()
        | "Records" >> beam.ParDo(_BlockRecords(config))
        | "Write" >> beam.io.Write(_TFRecordSink(prefix, num_shards))
    )


def _publish_shards(
    prefix: str, num_shards: int, earlier: list[str], counts: dict[str, int], num_files: int
) -> list[str]:
    """The shards written; refused (and removed) if they hold no instance. An earlier run's
    shards that were not replaced are removed."""
    written = shard_names(prefix, num_shards)
    if counts.get("instances", 0) == 0:
        for path in written:
            if files.exists(path):
                files.remove(path)
        raise text_input.InputFileError(
            f"no training pair could be made from {num_files} input file(s) ({counts.get('documents', 0)} "
            f"documents, {counts.get('lines', 0)} lines): a pair needs a document of at least two sentences "
            "(one sentence per line, a blank line between documents)"
        )
    for path in sorted(set(earlier) - set(written)):  # an earlier run's shards that were not replaced
        files.remove(path)
    return written
