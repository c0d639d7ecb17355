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

    # Drop sentences that tokenize to nothing, then documents left with no sentence.
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
    flat_tokens = sentences.flat_values  # [tokens]: the dropped sentences hold none

    num_documents = tf.size(sentence_counts, out_type=tf.int64)
    # offsets[i] = tokens before sentence i; strictly increasing.
    offsets = tf.concat([[0], tf.cumsum(sentence_lengths)], axis=0)
    document_end = tf.cumsum(sentence_counts)  # exclusive, in sentences
    document_start = document_end - sentence_counts
    last_sentence = document_end - 1
    has_pairs = sentence_counts >= 2

    uniform_short = tf.random.stateless_uniform(tf.shape(sentence_counts), seeds[0], dtype=tf.float64)
    uniform_length = tf.random.stateless_uniform(tf.shape(sentence_counts), seeds[1], dtype=tf.float64)
    target_length = tf.where(
        uniform_short < short_seq_prob,
        2 + _uniform_index(uniform_length, tf.constant(max_num_tokens - 1, tf.int64)),
        tf.constant(max_num_tokens, tf.int64),
    )  # [docs]
    num_sentences = tf.size(sentence_lengths, out_type=tf.int64)
    sentence_document = tf.repeat(tf.range(num_documents), sentence_counts)  # [sentences]

    def accumulate(start: tf.Tensor, wanted: tf.Tensor, last: tf.Tensor) -> tf.Tensor:
        """Last sentence index of the run from `start` that reaches `wanted` tokens (or `last`)."""
        reached = tf.searchsorted(offsets, tf.gather(offsets, start) + wanted, side="left", out_type=tf.int64)
        return tf.minimum(reached - 1, last)

    # Every sentence is treated as a possible chunk start, with its own random draws:
    # the chunk it would start, its pair, and where the next chunk would start. Starts
    # strictly increase along a document, so each draw is used at most once and the
    # pairs have the distribution of the original sequential loop.
    start = tf.range(num_sentences)
    target = tf.gather(target_length, sentence_document)
    last = tf.gather(last_sentence, sentence_document)
    draws = tf.random.stateless_uniform([4, num_sentences], seeds[2], dtype=tf.float64)
    chunk_last = accumulate(start, target, last)
    chunk_size = chunk_last - start + 1
    is_random = draws[0] < 0.5
    a_count = tf.where(
        chunk_size >= 2, 1 + _uniform_index(draws[1], tf.maximum(chunk_size - 1, 1)), tf.ones_like(chunk_size)
    )
    a_end = start + a_count
    length_a = tf.gather(offsets, a_end) - tf.gather(offsets, start)
    wanted_b = tf.maximum(target - length_a, 1)

    # Random next: B from another document, the chunk's unused sentences put back.
    other = _uniform_index(draws[2], tf.maximum(num_documents - 1, 1))
    other = tf.where(
        num_documents > 1, other + tf.cast(other >= sentence_document, tf.int64), sentence_document
    )
    random_start = tf.gather(document_start, other) + _uniform_index(
        draws[3], tf.gather(sentence_counts, other)
    )
    random_end = accumulate(random_start, wanted_b, tf.gather(last_sentence, other)) + 1

    # Actual next of a one-sentence chunk: the following sentences, or at the document
    # end the preceding sentence as A.
    single = chunk_size == 1
    at_end = chunk_last == last
    follow_start = tf.minimum(chunk_last + 1, last)
    follow_end = accumulate(follow_start, wanted_b, last) + 1
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

    # The chunk starts actually visited: everything reachable from the first sentence of
    # each document by following next_start.
    next_start = tf.where(next_start > last, num_sentences, next_start)
    first_starts = tf.boolean_mask(document_start, has_pairs)
    longest = tf.reduce_max(tf.concat([sentence_counts, [1]], axis=0))
    chunk_start = _chain_starts(next_start, first_starts, longest)
    record = {name: tf.gather(value, chunk_start) for name, value in record.items()}

    a_token_start = tf.gather(offsets, record["a_start"])
    b_token_start = tf.gather(offsets, record["b_start"])
    length_a = tf.gather(offsets, record["a_end"]) - a_token_start
    length_b = tf.gather(offsets, record["b_end"]) - b_token_start
    trim_a, trim_b = truncation_counts(length_a, length_b, max_num_tokens)
    # Each trimmed token comes off the front or the back with equal probability.
    front_a = tf.random.stateless_binomial(
        tf.shape(trim_a),
        seeds[3],
        tf.cast(trim_a, tf.float64),
        tf.constant(0.5, tf.float64),
        output_dtype=tf.int64,
    )
    front_b = tf.random.stateless_binomial(
        tf.shape(trim_b),
        tf.random.experimental.stateless_fold_in(seeds[3], 1),
        tf.cast(trim_b, tf.float64),
        tf.constant(0.5, tf.float64),
        output_dtype=tf.int64,
    )
    a_token_start += front_a
    b_token_start += front_b
    length_a -= trim_a
    length_b -= trim_b

    # Lay out [CLS] A [SEP] B [SEP] and padding directly as dense [pairs, max_seq_length].
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
    input_mask = tf.cast(position <= end_b, tf.int64)
    segment_ids = tf.cast((position > end_a) & (position <= end_b), tf.int64)
    pairs = {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": segment_ids,
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
