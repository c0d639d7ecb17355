"""Raw text files → a tf.data stream of unmasked NSP pairs, one element per document block.

The Python side only reads lines and groups them into documents (`text_input`); word
pieces, pairs and everything after are graph ops run by parallel `tf.data` maps. Every
random draw is a stateless op seeded by (seed, pass, block index), so the stream is the
same whatever the parallelism, and each pass over the files (dupe_factor, epochs) draws
new pairs.

Example:

>>> from bert_tf.tokenization import BertTokenizer
>>> from pipelines import corpus, text_dataset
>>> path = corpus.write_corpus("/tmp/pydoc_corpus.txt")
>>> tokenizer = BertTokenizer("tests/fixtures/bert_uncased_vocab.txt")
>>> blocks = text_dataset.pair_blocks([path], tokenizer, max_seq_length=128, seed=1)
>>> block = next(iter(blocks))
>>> block["input_ids"].shape[1]
128
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from pipelines import instances, segmenters, text_input

# The held-out evaluation slice: every 20th block of documents (5%), every 20th record.
HELD_OUT_EVERY = 20
COUNTERS = ("documents_in_blocks", "empty_sentences", "empty_documents", "single_sentence_documents")


def block_seed(seed: int, pass_index: tf.Tensor, block_index: tf.Tensor) -> tf.Tensor:
    """The stateless seed [2] of one block of one pass."""
    base = tf.constant([seed % (1 << 63), 0x5EED], tf.int64)
    return tf.random.experimental.stateless_fold_in(
        tf.random.experimental.stateless_fold_in(base, pass_index), block_index
    )


@dataclasses.dataclass(frozen=True)
class _Reading:
    """What one shard reads: its blocks of `files`, `num_passes` times (None: forever).

    `held_out="exclude"` leaves out every HELD_OUT_EVERY-th block (an evaluation slice of
    the documents), `"only"` keeps just those; None keeps everything. `stats` is filled
    by the first pass, `later_stats` by the passes after it (summed).
    """

    files: Sequence[str]
    num_passes: int | None
    stats: text_input.ReadStats | None
    min_documents: int
    num_shards: int
    shard_index: int
    held_out: str | None
    later_stats: text_input.ReadStats | None = None
    encoding: str = "utf-8"

    def pass_stats(self, pass_index) -> text_input.ReadStats:
        """Where a pass counts what it reads: `stats` for the first, `later_stats` after
        (a throwaway where either is None)."""
        kept = self.stats if pass_index == 0 else self.later_stats
        return kept if kept is not None else text_input.ReadStats()

    def wants(self, block_index):
        return _in_shard(block_index, self.num_shards, self.shard_index, self.held_out)


def _block_stream(reading: _Reading) -> tf.data.Dataset:
    """Elements (pass, block, lines, sentences_per_document) of this shard, read in order.

    The reader's position (pass, block, file, byte offset) is the state of a `scan`, so
    tf.data's iterator checkpoint holds it: a restored iterator reads on from that offset
    instead of re-reading the corpus. The Python read is a pure function of the position,
    which is why the pipeline may ignore its "external state" when it is saved.
    """
    end_file = len(reading.files)

    def read(pass_index, file_index, offset):
        if reading.num_passes is not None and pass_index >= reading.num_passes:
            # The scan's step past the last pass, which take_while drops: nothing to read.
            return np.array([], dtype=object), np.array([], np.int64), np.int64(end_file), np.int64(0)
        lines, lengths, (next_file, next_offset) = text_input.read_block(
            reading.files,
            (int(file_index), int(offset)),
            min_documents=reading.min_documents,
            stats=reading.pass_stats(pass_index),
            encoding=reading.encoding,
        )
        encoded = np.array([line.encode("utf-8") for line in lines], dtype=object).reshape([-1])
        return encoded, np.array(lengths, np.int64), np.int64(next_file), np.int64(next_offset)

    @tf.autograph.experimental.do_not_convert
    def next_block(state, _):
        pass_index, block_index, file_index, offset = state
        lines, lengths, next_file, next_offset = tf.numpy_function(
            read, [pass_index, file_index, offset], [tf.string, tf.int64, tf.int64, tf.int64], stateful=False
        )
        lines.set_shape([None])
        lengths.set_shape([None])
        pass_ends = next_file >= end_file
        zero = tf.constant(0, tf.int64)
        state = (
            tf.where(pass_ends, pass_index + 1, pass_index),
            tf.where(pass_ends, zero, block_index + 1),
            tf.where(pass_ends, zero, next_file),
            tf.where(pass_ends, zero, next_offset),
        )
        return state, (pass_index, block_index, lines, lengths)

    start = tuple(tf.constant(0, tf.int64) for _ in range(4))
    blocks = tf.data.Dataset.from_tensors(0).repeat().scan(start, next_block)
    if reading.num_passes is not None:
        blocks = blocks.take_while(lambda pass_index, *_: pass_index < reading.num_passes)

    def wanted(pass_index, block_index, lines, lengths):
        return tf.logical_and(tf.size(lengths) > 0, reading.wants(block_index))

    return blocks.filter(wanted)


def _graph_block_stream(reading: _Reading) -> tf.data.Dataset:
    """`_block_stream` in graph ops alone, for tf.data service workers in other processes.

    A service worker runs the dataset's graph without this process's Python, so the reader
    cannot be a `numpy_function`. The files are read with `TextLineDataset` and grouped into
    documents by a `scan`; each (pass, file) is one element of a `range`, the unit the
    dispatcher hands out under dynamic sharding. Blocks are `min_documents` documents of one
    file (the last block of a file may be smaller: the pool a "random next" segment is drawn
    from then holds fewer documents); a block's number folds in its file so seeds stay
    distinct. Lines are decoded with U+FFFD for invalid UTF-8 (which the tokenizer deletes)
    and stripped of ASCII whitespace. No held-out slice and no read statistics.
    """
    if reading.held_out is not None or reading.num_shards != 1:
        raise ValueError("the graph reader reads every block of every file: no held_out, no shards")
    if reading.encoding != "utf-8":
        raise ValueError(
            f"tf.data service workers read raw text as UTF-8: convert the corpus from {reading.encoding} "
            f"(iconv -f {reading.encoding} -t utf-8 IN > OUT) and leave --input_encoding out"
        )
    files = tf.constant([str(path) for path in reading.files])
    num_files = len(reading.files)
    passes = (1 << 62) // num_files if reading.num_passes is None else reading.num_passes

    @tf.autograph.experimental.do_not_convert
    def add_line(document, line):
        is_blank = tf.equal(line, "")
        next_document = tf.cond(
            is_blank, lambda: tf.zeros([0], tf.string), lambda: tf.concat([document, [line]], 0)
        )
        return next_document, (is_blank & (tf.size(document) > 0), document)

    @tf.autograph.experimental.do_not_convert
    def read_file(index):
        pass_index, file_index = index // num_files, index % num_files
        # The blank line after the last one ends the file's last document.
        lines = tf.data.TextLineDataset(files[file_index]).concatenate(
            tf.data.Dataset.from_tensors(tf.constant(""))
        )
        lines = lines.map(
            lambda line: tf.strings.strip(
                tf.strings.unicode_transcode(
                    line, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
                )
            )
        )
        documents = (
            lines.scan(tf.zeros([0], tf.string), add_line)
            .filter(lambda ended, document: ended)
            .map(lambda ended, document: document)
        )
        blocks = documents.ragged_batch(reading.min_documents)  # [documents, (lines)]
        return blocks.enumerate().map(
            lambda block_index, block: (
                pass_index,
                file_index * (1 << 32) + block_index,
                block.flat_values,
                block.row_lengths(),
            )
        )

    return tf.data.Dataset.range(passes * num_files).flat_map(read_file)


def _in_shard(block_index, num_shards: int, shard_index: int, held_out: str | None):
    """Whether this shard reads block `block_index` (a tensor or an int).

    Blocks go round-robin to the shards; the held-out blocks (every HELD_OUT_EVERY-th) go
    round-robin by their own number, so that every shard gets some to evaluate on (by block
    number alone, with 2 shards, all of them would fall to one).
    """
    is_held_out = block_index % HELD_OUT_EVERY == HELD_OUT_EVERY - 1
    if held_out == "only":
        return is_held_out & ((block_index // HELD_OUT_EVERY) % num_shards == shard_index)
    in_shard = block_index % num_shards == shard_index
    return in_shard & ~is_held_out if held_out == "exclude" else in_shard


def _document_stream(reading: _Reading, word_marker: segmenters.WordMarker | None):
    """A generator factory yielding (pass, block, lines, sentences_per_document[, word marks]).

    Used with a word segmenter, whose worker processes run a few blocks ahead; unlike
    `_block_stream` its position is not saved with a checkpoint (a resume skips batches).
    """

    def blocks():
        pass_index = 0
        while reading.num_passes is None or pass_index < reading.num_passes:
            blocks = text_input.document_blocks(
                reading.files,
                min_documents=reading.min_documents,
                stats=reading.pass_stats(pass_index),
                encoding=reading.encoding,
            )
            for block_index, (lines, lengths) in enumerate(blocks):
                if reading.wants(block_index):
                    yield pass_index, block_index, lines, lengths
            pass_index += 1

    def generate():
        if word_marker is None:
            yield from blocks()
            return
        # Segmented in worker processes, a few blocks ahead (see segmenters.marked).
        for block, marks in segmenters.marked(blocks(), word_marker, lambda block: block[2]):
            yield (*block, marks)

    return generate


def word_continues(pieces: tf.RaggedTensor, words: tf.RaggedTensor, marks: tf.Tensor) -> tf.Tensor:
    """The segmenter's marks spread over the pieces: bool [pieces of pieces.flat_values].

    `pieces` (int64 [lines, (words), (pieces)]) and `words` (tf.string [lines, (words)]) are
    the tokenizer's; `marks` (bool [CJK characters]) has one entry per CJK character (see
    `segmenters.WordMarker`), which the tokenizer makes a word of one piece: itself or [UNK].
    Other pieces get False.
    """
    word_is_cjk = tf.strings.regex_full_match(words.flat_values, segmenters.cjk_regex())
    is_cjk = tf.repeat(word_is_cjk, pieces.values.row_lengths())  # [pieces]
    count = tf.size(marks, out_type=tf.int64)
    check = tf.debugging.assert_equal(
        tf.reduce_sum(tf.cast(is_cjk, tf.int64)),
        count,
        message="internal error: the word segmenter's marks do not line up with the CJK tokens",
    )
    with tf.control_dependencies([check]):
        index = tf.cumsum(tf.cast(is_cjk, tf.int64), exclusive=True)
    # A False past the end keeps the gather in range for the pieces that are not CJK.
    padded = tf.concat([tf.cast(marks, tf.bool), [False]], axis=0)
    return is_cjk & tf.gather(padded, tf.minimum(index, count))


def tokenize_lines(tokenizer, lines: tf.Tensor, marks: tf.Tensor | None = None):
    """The word pieces of a block's lines (int64 ragged [lines, (pieces)]) and, with a word
    segmenter's `marks`, their `word_continues` (bool [pieces]; else None)."""
    if marks is None:
        return tokenizer.tokenize(lines), None
    # By words: a CJK character is a word of its own, its mark goes to its one piece.
    pieces_of_words = tokenizer.tokenize_with_words(lines)  # [lines, (words), (pieces)]
    continues = word_continues(pieces_of_words, tokenizer.split_words(lines), marks)
    return pieces_of_words.merge_dims(1, 2), continues


def block_pairs(
    pieces: tf.RaggedTensor,
    sentences_per_document: tf.Tensor,
    seed_of_block: tf.Tensor,
    *,
    max_seq_length: int,
    short_seq_prob: float,
    cls_id: int,
    sep_id: int,
    continues: tf.Tensor | None = None,
    next_sentence_prediction: bool = True,
) -> dict[str, tf.Tensor]:
    """The unmasked pairs of one block of tokenized lines: an element of `pair_blocks`
    (`next_sentence_prediction=False`: full-length segments, `instances.build_segments`)."""
    block = tf.RaggedTensor.from_row_lengths(pieces, sentences_per_document)  # [docs, (sentences), (pieces)]
    if next_sentence_prediction:
        pairs = instances.build_pairs(
            block,
            seed_of_block,
            max_seq_length=max_seq_length,
            cls_id=cls_id,
            sep_id=sep_id,
            short_seq_prob=short_seq_prob,
            word_continues=continues,
        )
    else:
        pairs = instances.build_segments(
            block, max_seq_length=max_seq_length, cls_id=cls_id, sep_id=sep_id, word_continues=continues
        )
    result = {
        "input_ids": pairs["input_ids"],
        "input_mask": pairs["input_mask"],
        "segment_ids": pairs["segment_ids"],
        "next_sentence_labels": pairs["next_sentence_labels"][:, tf.newaxis],
        "seed": tf.random.experimental.stateless_fold_in(seed_of_block, 1),
        "documents_in_blocks": tf.size(sentences_per_document, out_type=tf.int64),
        "empty_sentences": pairs["empty_sentences"],
        "empty_documents": pairs["empty_documents"],
        "single_sentence_documents": pairs["single_sentence_documents"],
    }
    if continues is not None:
        result["word_continues"] = pairs["word_continues"]
    return result


def pair_blocks(
    files: Sequence[str],
    tokenizer,
    *,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    seed: int = 12345,
    num_passes: int | None = 1,
    min_documents: int = text_input.DEFAULT_MIN_DOCUMENTS,
    num_shards: int = 1,
    shard_index: int = 0,
    stats: text_input.ReadStats | None = None,
    held_out: str | None = None,
    word_marker: segmenters.WordMarker | None = None,
    later_stats: text_input.ReadStats | None = None,
    graph_reader: bool = False,
    encoding: str = "utf-8",
    next_sentence_prediction: bool = True,
) -> tf.data.Dataset:
    """A dataset of blocks of unmasked pairs (num_passes=None: forever).

    Each element is a dict: `input_ids`, `input_mask`, `segment_ids` (int64 [pairs,
    max_seq_length], zero padded), `next_sentence_labels` (int64 [pairs, 1]), `seed`
    (int64 [2], for masking the block), and the int64 counters named in COUNTERS.
    With a `word_marker` (built on the tokenizer's vocab), also `word_continues` (bool
    [pairs, max_seq_length]) for whole-word masking of segmented words.
    `stats` is filled by the first pass over the files, `later_stats` by the passes after
    it (their bytes tell how far a run of several passes has read). `graph_reader` reads
    the files with graph ops only (`_graph_block_stream`), so that tf.data service workers
    can run the pipeline. `encoding`: the files' text encoding (Python's name; see
    `text_input.line_encoding`). `next_sentence_prediction=False` makes masked-LM-only
    instances of whole sentences across documents (`instances.build_segments`) instead of
    pairs; their `next_sentence_labels` are 0.
    """
    cls_id, sep_id = int(tokenizer.cls_id), int(tokenizer.sep_id)
    reading = _Reading(
        files, num_passes, stats, min_documents, num_shards, shard_index, held_out, later_stats, encoding
    )
    if graph_reader:  # no Python in the graph: it can run on tf.data service workers
        if word_marker is not None:
            raise ValueError("the graph reader cannot run a word segmenter (Python)")
        documents = _graph_block_stream(reading)
    elif word_marker is None:
        documents = _block_stream(reading)
    else:
        signature = (
            tf.TensorSpec([], tf.int64),
            tf.TensorSpec([], tf.int64),
            tf.TensorSpec([None], tf.string),
            tf.TensorSpec([None], tf.int64),
            tf.TensorSpec([None], tf.bool),
        )
        documents = tf.data.Dataset.from_generator(
            _document_stream(reading, word_marker),
            output_signature=signature,
        )

    # Plain graph code: skipping AutoGraph's conversion saves seconds of start-up.
    @tf.autograph.experimental.do_not_convert
    def make_pairs(pass_index, block_index, lines, sentences_per_document, marks=None):
        pieces, continues = tokenize_lines(tokenizer, lines, marks)
        return block_pairs(
            pieces,
            sentences_per_document,
            block_seed(seed, pass_index, block_index),
            max_seq_length=max_seq_length,
            short_seq_prob=short_seq_prob,
            cls_id=cls_id,
            sep_id=sep_id,
            continues=continues,
            next_sentence_prediction=next_sentence_prediction,
        )

    return documents.map(make_pairs, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).with_options(
        single_threaded_ops()
    )


def single_threaded_ops() -> tf.data.Options:
    """tf.data options for the text pipelines: each op on one thread, blocks in parallel.

    The work is already parallel across blocks (parallel maps); letting each string op
    also shard its batch over the same cores only adds hand-offs, which cost most when
    the cores are busy: on 2 cores shared with another process the offline generator
    took 10.4 s instead of 6.0 s with the default.
    """
    options = tf.data.Options()
    options.threading.max_intra_op_parallelism = 1
    # The one Python step (reading a block at a position) is a pure function of its input:
    # an iterator checkpoint may leave it out (see _block_stream).
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return options
