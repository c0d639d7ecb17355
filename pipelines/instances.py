"""Documents → next-sentence-prediction pairs, as graph ops over a block of documents.

Semantics of the original `create_pretraining_data.py`, vectorized over the documents
of a block (one `tf.while_loop` step makes one chunk of every document):

- Per document, target length = max_seq_length - 3, or with probability
  `short_seq_prob` a uniform length in [2, max_seq_length - 3].
- Sentences accumulate into a chunk until the target length or the document end.
- A = the first k sentences of the chunk, k uniform in [1, n - 1] (k = 1 for n = 1).
- B = the rest of the chunk ("actual next", label 0), or with probability 0.5
  ("random next", label 1) sentences from a uniformly chosen start sentence of another
  document of the block, accumulated up to the target length minus len(A); the unused
  sentences of the chunk are put back and start the next chunk.
- The pair is truncated to max_seq_length - 3 by repeatedly trimming the longer side
  (B on ties) from its front or back with equal probability.
- Layout `[CLS] A [SEP] B [SEP]`; segment ids 0 up to the first [SEP], 1 after it.

Improvement (fair NSP labels): the label is a fair coin drawn for every chunk *before*
looking at the chunk, and an "actual next" B always exists, so labels are 50/50 in
expectation whatever the document lengths (by Wald's identity, even though random
pairs put sentences back). The original forces a random B on every one-sentence chunk
(64% random labels on a corpus of short documents). Here:

- a one-sentence chunk that did not reach the end of its document (one long sentence
  filled the target) takes the following sentences of the document as its actual B,
  up to the target length;
- a one-sentence chunk at the end of its document takes the preceding sentence as A
  and itself as B;
- a document of one sentence has no next sentence at all: it never provides an A, and
  is used only as the source of random B segments (counted in the summary).

A random B comes from another document of the same block (blocks hold hundreds of
documents). When a block holds a single document (a one-document corpus) it comes from
the same document, as the original does after ten failed draws.

Example:

>>> import tensorflow as tf
>>> from pipelines import instances
>>> documents = tf.ragged.constant([[[5, 6], [7]], [[8, 9, 10]]], dtype=tf.int64)
>>> pairs = instances.build_pairs(documents, tf.constant([1, 2], tf.int64),
...                                max_seq_length=16, cls_id=101, sep_id=102)
>>> pairs["input_ids"].shape[0] >= 1, pairs["input_ids"].shape[1]
(True, 16)
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf


def _uniform_index(uniform: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
    """Maps uniforms in [0, 1) to integers uniform in [0, count) (count >= 1)."""
    index = tf.cast(tf.floor(uniform * tf.cast(count, tf.float64)), tf.int64)
    return tf.minimum(index, count - 1)


def _seeds(seed: tf.Tensor, count: int) -> list[tf.Tensor]:
    return tf.unstack(tf.random.experimental.stateless_split(seed, num=count))


def truncation_counts(
    length_a: tf.Tensor, length_b: tf.Tensor, max_num_tokens: int
) -> tuple[tf.Tensor, tf.Tensor]:
    """How many tokens the original truncation loop removes from A and from B.

    The loop trims the longer side (B on ties) one token at a time until the pair fits,
    so the longer side first comes down to the shorter one, then B and A alternate,
    B first. Returns (trim_a, trim_b).
    """
    excess = tf.maximum(length_a + length_b - max_num_tokens, 0)
    a_longer = length_a > length_b
    first = tf.minimum(tf.abs(length_a - length_b), excess)
    rest = excess - first
    trim_a = tf.where(a_longer, first, tf.zeros_like(first)) + rest // 2
    trim_b = tf.where(a_longer, tf.zeros_like(first), first) + (rest + 1) // 2
    return trim_a, trim_b


def _chain_starts(next_start: tf.Tensor, first_starts: tf.Tensor, longest: tf.Tensor) -> tf.Tensor:
    """The starts reached from `first_starts` by following `next_start` (int64 [n]; n or more
    ends a chain), sorted: int64 [starts]. `longest` bounds a chain's length.

    Pointer jumping finds them in log2(longest) vectorized rounds instead of one round per
    chunk: after a round, `visited` holds the starts at distance < 2 × reach.
    """
    count = tf.size(next_start, out_type=tf.int64)
    jump = tf.concat([tf.minimum(next_start, count), [count]], axis=0)  # [n + 1]: n is the sink
    visited = tf.scatter_nd(first_starts[:, tf.newaxis], tf.ones_like(first_starts), [count + 1]) > 0

    def jump_round(reach, visited, jump):
        landed = tf.math.unsorted_segment_max(tf.cast(visited, tf.int32), jump, count + 1) > 0
        return reach * 2, visited | landed, tf.gather(jump, jump)

    _, visited, _ = tf.while_loop(
        lambda reach, visited, jump: reach < longest,
        jump_round,
        (tf.constant(1, tf.int64), visited, jump),
    )
    return tf.where(visited[:-1])[:, 0]


def build_segments(
    documents: tf.RaggedTensor,
    *,
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
    word_continues: tf.Tensor | None = None,
) -> dict[str, tf.Tensor]:
    """Masked-LM-only instances: `[CLS]` + whole sentences + `[SEP]`, as full as they fit.

    RoBERTa's FULL-SENTENCES: the block's documents are one stream of sentences, a `[SEP]`
    after each document, cut greedily into instances of whole sentences (and document
    ends) of at most max_seq_length - 2 pieces; a sentence longer than that is cut into
    pieces that fit. So instances cross document ends, and every instance but a block's
    last is nearly full (no `short_seq_prob`, no second segment: segment ids are all 0).

    Args and returns as `build_pairs`, less `length_a`; `next_sentence_labels` are 0 (there
    is no next-sentence task: the training pipeline gives them weight 0).

    Example:

    >>> documents = tf.ragged.constant([[[5, 6], [7]], [[8, 9, 10]]], dtype=tf.int64)
    >>> segments = build_segments(documents, max_seq_length=7, cls_id=101, sep_id=102)
    >>> segments["input_ids"].numpy().tolist()
    [[101, 5, 6, 7, 102, 102, 0], [101, 8, 9, 10, 102, 0, 0]]
    """
    capacity = max_seq_length - 2
    if capacity < 1:
        raise ValueError(f"max_seq_length must be >= 3 ([CLS] x [SEP]), got {max_seq_length}")
    sentence_lengths = documents.row_lengths(axis=2)  # [docs, (sentences)]
    empty_sentences = tf.reduce_sum(tf.cast(sentence_lengths.flat_values == 0, tf.int64))
    document_pieces = documents.merge_dims(1, 2)  # [docs, (pieces)]
    empty_documents = tf.reduce_sum(tf.cast(document_pieces.row_lengths() == 0, tf.int64))
    num_documents = documents.nrows()
    # The stream: each document's pieces and a [SEP]; units: its sentences, then the [SEP]
    # (none after the block's last document: the instance's own [SEP] ends it).
    separators = tf.fill([num_documents, 1], tf.constant(sep_id, tf.int64))
    stream = tf.concat([document_pieces, separators], axis=1).flat_values  # [tokens]
    separator_units = tf.cast(tf.range(num_documents) < num_documents - 1, tf.int64)[:, tf.newaxis]
    unit_lengths = tf.concat([sentence_lengths, separator_units], axis=1).flat_values
    unit_lengths = tf.boolean_mask(unit_lengths, unit_lengths > 0)
    # Units longer than an instance are cut into pieces of `capacity` (the last one shorter).
    pieces = (unit_lengths + capacity - 1) // capacity
    unit = tf.repeat(tf.range(tf.size(unit_lengths, out_type=tf.int64)), pieces)
    piece = tf.range(tf.size(unit, out_type=tf.int64)) - tf.repeat(tf.cumsum(pieces, exclusive=True), pieces)
    unit_lengths = tf.minimum(tf.gather(unit_lengths, unit) - piece * capacity, capacity)
    offsets = tf.concat([[0], tf.cumsum(unit_lengths)], axis=0)  # [units + 1]
    # An instance from unit s takes the units up to the last that keeps it within capacity.
    next_start = tf.searchsorted(offsets, offsets[:-1] + capacity, side="right", out_type=tf.int64) - 1
    count = tf.size(unit_lengths, out_type=tf.int64)
    starts = _chain_starts(next_start, tf.zeros([tf.minimum(count, 1)], tf.int64), tf.maximum(count, 1))
    token_start = tf.gather(offsets, starts)
    length = tf.gather(offsets, tf.gather(tf.concat([next_start, [count]], 0), starts)) - token_start

    position = tf.range(max_seq_length, dtype=tf.int64)[tf.newaxis, :]
    inside = (position >= 1) & (position <= length[:, tf.newaxis])
    source = tf.where(inside, token_start[:, tf.newaxis] + position - 1, 0)
    input_ids = tf.where(inside, tf.gather(stream, source), 0)
    input_ids = tf.where(position == 0, tf.constant(cls_id, tf.int64), input_ids)
    input_ids = tf.where(position == length[:, tf.newaxis] + 1, tf.constant(sep_id, tf.int64), input_ids)
    result = {
        "input_ids": input_ids,
        "input_mask": tf.cast(position <= length[:, tf.newaxis] + 1, tf.int64),
        "segment_ids": tf.zeros_like(input_ids),
        "next_sentence_labels": tf.zeros_like(length),
        "empty_sentences": empty_sentences,
        "empty_documents": empty_documents,
        "single_sentence_documents": tf.constant(0, tf.int64),
    }
    if word_continues is not None:
        marks = tf.RaggedTensor.from_row_lengths(
            tf.cast(word_continues, tf.bool), document_pieces.row_lengths()
        )
        stream_marks = tf.concat([marks, tf.zeros([num_documents, 1], tf.bool)], axis=1).flat_values
        result["word_continues"] = inside & tf.gather(stream_marks, source)
    return result


def build_pairs(
    documents: tf.RaggedTensor,
    seed: tf.Tensor,
    *,
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
    short_seq_prob: float = 0.1,
    word_continues: tf.Tensor | None = None,
) -> dict[str, tf.Tensor]:
    """Builds NSP pairs from a block of tokenized documents.

    Args:
      documents: int64 ragged [documents, (sentences), (pieces)]. Sentences with no
        pieces and documents with no sentences are dropped (and counted).
      seed: int64 [2], the stateless seed of this block.
      word_continues: optional bool [pieces], one per piece of `documents.flat_values`
        (segmented-word marks, see `pipelines.segmenters`); laid out like the ids.

    Returns a dict: `input_ids`, `input_mask`, `segment_ids` (int64 [pairs,
    max_seq_length], zero padded), `next_sentence_labels` (int64 [pairs], 1 = random next),
    `length_a` (int64 [pairs]), and counters (int64 scalars) `empty_sentences`,
    `empty_documents`, `single_sentence_documents`; with `word_continues`, also
    `word_continues` (bool [pairs, max_seq_length], False on [CLS], [SEP] and padding).
    """
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP]), got {max_seq_length}")
    max_num_tokens = max_seq_length - 3
    seeds = _seeds(seed, 4)
    sentence_counts, sentence_lengths, flat_tokens, empty_sentences, empty_documents = _drop_empty(documents)
    sentences = _locate_sentences(sentence_counts, sentence_lengths)
    has_pairs = sentence_counts >= 2
    target_length = _target_lengths(sentence_counts, seeds[0], seeds[1], short_seq_prob, max_num_tokens)
    record, next_start = _pair_at_every_start(sentences, target_length, seeds[2])

    # The chunk starts actually visited: everything reachable from the first sentence of
    # each document by following next_start.
    first_starts = tf.boolean_mask(sentences.document_start, has_pairs)
    longest = tf.reduce_max(tf.concat([sentence_counts, [1]], axis=0))
    chunk_start = _chain_starts(next_start, first_starts, longest)
    record = {name: tf.gather(value, chunk_start) for name, value in record.items()}

    a_token_start, b_token_start, length_a, length_b = _truncate_pairs(
        record, sentences.offsets, max_num_tokens, seeds[3]
    )
    layout, in_a, in_b, source = _lay_out_pairs(
        flat_tokens, a_token_start, b_token_start, length_a, length_b, max_seq_length, cls_id, sep_id
    )
    pairs = {
        **layout,
        "next_sentence_labels": record["is_random"],
        "length_a": length_a,
        "empty_sentences": empty_sentences,
        "empty_documents": empty_documents,
        "single_sentence_documents": tf.reduce_sum(tf.cast(~has_pairs, tf.int64)),
    }
    if word_continues is not None:
        # Dropped sentences hold no pieces, so the marks line up with flat_tokens as they are.
        marks = tf.ensure_shape(tf.cast(word_continues, tf.bool), [None])
        pairs["word_continues"] = (in_a | in_b) & tf.gather(marks, source)
    return pairs


class _Sentences(NamedTuple):
    """Where the kept sentences of a block lie (int64 tensors)."""

    offsets: tf.Tensor  # [sentences + 1]: tokens before sentence i; strictly increasing
    counts: tf.Tensor  # [docs]: sentences per document
    document_start: tf.Tensor  # [docs]: its first sentence
    last_sentence: tf.Tensor  # [docs]: its last sentence
    document: tf.Tensor  # [sentences]: the document of each sentence


def _drop_empty(
    documents: tf.RaggedTensor,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Drops sentences that tokenize to nothing, then documents left with no sentence.

    Returns sentences per document (int64 [docs]), pieces per sentence (int64
    [sentences]), the pieces (int64 [tokens]: the dropped sentences hold none) and the
    counts of empty sentences and empty documents.
    """
    sentences = documents.values  # [sentences, (pieces)]
    sentence_lengths = sentences.row_lengths()
    keep = sentence_lengths > 0
    kept_before = tf.concat([[0], tf.cumsum(tf.cast(keep, tf.int64))], axis=0)  # kept sentences before i
    kept_per_document = tf.gather(kept_before, documents.row_splits[1:]) - tf.gather(
        kept_before, documents.row_splits[:-1]
    )
    empty_sentences = tf.reduce_sum(tf.cast(~keep, tf.int64))
    empty_documents = tf.reduce_sum(tf.cast(kept_per_document == 0, tf.int64))
    sentence_counts = tf.boolean_mask(kept_per_document, kept_per_document > 0)  # [docs]
    sentence_lengths = tf.boolean_mask(sentence_lengths, keep)  # [sentences]
    return sentence_counts, sentence_lengths, sentences.flat_values, empty_sentences, empty_documents


def _locate_sentences(sentence_counts: tf.Tensor, sentence_lengths: tf.Tensor) -> _Sentences:
    """The offsets of the sentences and the sentence ranges of the documents."""
    num_documents = tf.size(sentence_counts, out_type=tf.int64)
    offsets = tf.concat([[0], tf.cumsum(sentence_lengths)], axis=0)
    document_end = tf.cumsum(sentence_counts)  # exclusive, in sentences
    document_start = document_end - sentence_counts
    return _Sentences(
        offsets=offsets,
        counts=sentence_counts,
        document_start=document_start,
        last_sentence=document_end - 1,
        document=tf.repeat(tf.range(num_documents), sentence_counts),
    )


def _target_lengths(
    sentence_counts: tf.Tensor,
    short_seed: tf.Tensor,
    length_seed: tf.Tensor,
    short_seq_prob: float,
    max_num_tokens: int,
) -> tf.Tensor:
    """Per document (int64 [docs]): max_num_tokens, or with probability `short_seq_prob` a
    uniform length in [2, max_num_tokens]."""
    uniform_short = tf.random.stateless_uniform(tf.shape(sentence_counts), short_seed, dtype=tf.float64)
    uniform_length = tf.random.stateless_uniform(tf.shape(sentence_counts), length_seed, dtype=tf.float64)
    return tf.where(
        uniform_short < short_seq_prob,
        2 + _uniform_index(uniform_length, tf.constant(max_num_tokens - 1, tf.int64)),
        tf.constant(max_num_tokens, tf.int64),
    )


def _accumulate(offsets: tf.Tensor, start: tf.Tensor, wanted: tf.Tensor, last: tf.Tensor) -> tf.Tensor:
    """Last sentence index of the run from `start` that reaches `wanted` tokens (or `last`)."""
    reached = tf.searchsorted(offsets, tf.gather(offsets, start) + wanted, side="left", out_type=tf.int64)
    return tf.minimum(reached - 1, last)


def _pair_at_every_start(
    sentences: _Sentences, target_length: tf.Tensor, seed: tf.Tensor
) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    """The pair each sentence would make as a chunk start, and where the next chunk would start.

    Every sentence is treated as a possible chunk start, with its own random draws: the
    chunk it would start, its pair, and where the next chunk would start. Starts strictly
    increase along a document, so each draw is used at most once and the pairs have the
    distribution of the original sequential loop.

    Returns the pair's sentence ranges `a_start`, `a_end`, `b_start`, `b_end` and
    `is_random` (int64 [sentences]), and the next start (int64 [sentences]; the number of
    sentences past a document's end).
    """
    offsets = sentences.offsets
    num_sentences = tf.size(sentences.document, out_type=tf.int64)
    start = tf.range(num_sentences)
    target = tf.gather(target_length, sentences.document)
    last = tf.gather(sentences.last_sentence, sentences.document)
    draws = tf.random.stateless_uniform([4, num_sentences], seed, dtype=tf.float64)
    chunk_last = _accumulate(offsets, start, target, last)
    chunk_size = chunk_last - start + 1
    is_random = draws[0] < 0.5
    a_count = tf.where(
        chunk_size >= 2, 1 + _uniform_index(draws[1], tf.maximum(chunk_size - 1, 1)), tf.ones_like(chunk_size)
    )
    a_end = start + a_count
    length_a = tf.gather(offsets, a_end) - tf.gather(offsets, start)
    wanted_b = tf.maximum(target - length_a, 1)
    random_start, random_end = _random_next(sentences, draws[2], draws[3], wanted_b)

    # Actual next of a one-sentence chunk: the following sentences, or at the document
    # end the preceding sentence as A.
    single = chunk_size == 1
    at_end = chunk_last == last
    follow_start = tf.minimum(chunk_last + 1, last)
    follow_end = _accumulate(offsets, follow_start, wanted_b, last) + 1
    actual_next = tf.where(single & ~at_end, follow_end, chunk_last + 1)
    record = {
        "a_start": tf.where(~is_random & single & at_end, start - 1, start),
        "a_end": tf.where(~is_random & single & at_end, start, a_end),
        "b_start": tf.where(
            is_random, random_start, tf.where(single, tf.where(at_end, start, follow_start), a_end)
        ),
        "b_end": tf.where(
            is_random, random_end, tf.where(single, tf.where(at_end, start + 1, follow_end), chunk_last + 1)
        ),
        "is_random": tf.cast(is_random, tf.int64),
    }
    next_start = tf.where(is_random, a_end, actual_next)
    return record, tf.where(next_start > last, num_sentences, next_start)


def _random_next(
    sentences: _Sentences, document_draw: tf.Tensor, start_draw: tf.Tensor, wanted_b: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Random next: B from another document (the same one in a one-document block), from a
    uniform start sentence up to `wanted_b` tokens. Returns B's sentence range [start, end)."""
    num_documents = tf.size(sentences.counts, out_type=tf.int64)
    other = _uniform_index(document_draw, tf.maximum(num_documents - 1, 1))
    other = tf.where(
        num_documents > 1, other + tf.cast(other >= sentences.document, tf.int64), sentences.document
    )
    random_start = tf.gather(sentences.document_start, other) + _uniform_index(
        start_draw, tf.gather(sentences.counts, other)
    )
    random_end = (
        _accumulate(sentences.offsets, random_start, wanted_b, tf.gather(sentences.last_sentence, other)) + 1
    )
    return random_start, random_end


def _truncate_pairs(
    record: dict[str, tf.Tensor], offsets: tf.Tensor, max_num_tokens: int, seed: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Truncates each pair to `max_num_tokens` as the original does; each trimmed token comes
    off the front or the back with equal probability.

    Returns the token starts and lengths of A and B (int64 [pairs] each).
    """
    a_token_start = tf.gather(offsets, record["a_start"])
    b_token_start = tf.gather(offsets, record["b_start"])
    length_a = tf.gather(offsets, record["a_end"]) - a_token_start
    length_b = tf.gather(offsets, record["b_end"]) - b_token_start
    trim_a, trim_b = truncation_counts(length_a, length_b, max_num_tokens)
    front_a = tf.random.stateless_binomial(
        tf.shape(trim_a),
        seed,
        tf.cast(trim_a, tf.float64),
        tf.constant(0.5, tf.float64),
        output_dtype=tf.int64,
    )
    front_b = tf.random.stateless_binomial(
        tf.shape(trim_b),
        tf.random.experimental.stateless_fold_in(seed, 1),
        tf.cast(trim_b, tf.float64),
        tf.constant(0.5, tf.float64),
        output_dtype=tf.int64,
    )
    return a_token_start + front_a, b_token_start + front_b, length_a - trim_a, length_b - trim_b


def _lay_out_pairs(
    flat_tokens: tf.Tensor,
    a_token_start: tf.Tensor,
    b_token_start: tf.Tensor,
    length_a: tf.Tensor,
    length_b: tf.Tensor,
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
) -> tuple[dict[str, tf.Tensor], tf.Tensor, tf.Tensor, tf.Tensor]:
    """Lays out [CLS] A [SEP] B [SEP] and padding directly as dense [pairs, max_seq_length].

    Returns `input_ids`, `input_mask` and `segment_ids`, and where A and B lie and the
    token each position takes (bool, bool, int64 [pairs, max_seq_length]).
    """
    position = tf.range(max_seq_length, dtype=tf.int64)[tf.newaxis, :]
    end_a = (length_a + 1)[:, tf.newaxis]  # position of the first [SEP]
    end_b = (length_a + length_b + 2)[:, tf.newaxis]  # position of the last [SEP]
    in_a = (position >= 1) & (position < end_a)
    in_b = (position > end_a) & (position < end_b)
    source = tf.where(
        in_a, a_token_start[:, tf.newaxis] + position - 1, b_token_start[:, tf.newaxis] + position - end_a - 1
    )
    source = tf.where(in_a | in_b, source, 0)
    input_ids = tf.where(in_a | in_b, tf.gather(flat_tokens, source), 0)
    input_ids = tf.where(position == 0, tf.constant(cls_id, tf.int64), input_ids)
    input_ids = tf.where((position == end_a) | (position == end_b), tf.constant(sep_id, tf.int64), input_ids)
    layout = {
        "input_ids": input_ids,
        "input_mask": tf.cast(position <= end_b, tf.int64),
        "segment_ids": tf.cast((position > end_a) & (position <= end_b), tf.int64),
    }
    return layout, in_a, in_b, source
