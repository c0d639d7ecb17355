"""NER tags and entities from logits, as TensorFlow ops: the one post-processing.

Evaluation (`bert_tf.tasks.token.conll.word_predictions`, scored by seqeval) and the task
SavedModel (`bert_tf.serving.task`) choose each word's tag with `word_tag_ids`, and the
SavedModel groups tags into entities with `entity_words`, which reads them as seqeval's
default mode (the scorer) does, so the entities served are those evaluation scores:

- A word's tag is the label of its highest logit at its first piece (the first label on a
  tie); a word cut off by max_seq_length is "O".
- A tag's type is the text after its first "-" ("_" for "O"). An entity begins at a B- or
  S- tag, at an I- or E- tag after O, E- or S-, and wherever the type changes; it ends at
  an E- or S- tag, before O, B- or S-, and before a type change or the sentence's end.

Example:

>>> tags = tf.ragged.constant([[1, 2, 0, 2]])  # B-PER I-PER O I-PER
>>> words = entity_words(tags, ["O", "B-PER", "I-PER"])
>>> words.first_word.numpy().tolist(), words.last_word.numpy().tolist(), words.type_name.numpy().tolist()
([0, 3], [1, 3], [b'PER', b'PER'])
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

_OUTSIDE = "O"


def word_tag_ids(word_logits) -> tf.Tensor:
    """[words, labels] logits -> [words] int32: the label of the highest logit, the first on a tie."""
    word_logits = tf.convert_to_tensor(word_logits)
    top = tf.reduce_max(word_logits, axis=-1, keepdims=True)
    label = tf.range(tf.shape(word_logits)[-1])
    return tf.reduce_min(tf.where(tf.equal(word_logits, top), label, tf.int32.max), axis=-1)


def tag_parts(label_list: Sequence[str]) -> tuple[list[str], list[str]]:
    """(prefix letter, type) of each tag, as seqeval splits them ("B-PER" -> "B", "PER")."""
    prefixes = [label[:1] for label in label_list]
    types = [label[1:].split("-", 1)[-1] or "_" for label in label_list]
    return prefixes, types


class EntityWords(typing.NamedTuple):
    """The entities of a batch, flat in order: [entities] each."""

    row: tf.Tensor  # int64 the sentence (row of the batch)
    first_word: tf.Tensor  # int64 first and last word in the sentence
    last_word: tf.Tensor
    type_name: tf.Tensor  # tf.string
    word_entity: tf.RaggedTensor  # int64 [b, (words)]: each word's entity (in the flat list), -1 outside


def entity_words(tag_ids: tf.RaggedTensor, label_list: Sequence[str]) -> EntityWords:
    """Entities of tag sequences: `tag_ids` int [b, (words)] into `label_list`, -1 for "O"."""
    prefixes, types = tag_parts(label_list)
    names = sorted(set(types) | {"_"})
    # Tag -1 (a cut word) is "O": the tables get one more row at the end.
    prefix = tf.constant(np.array([ord(p or " ") for p in prefixes] + [ord(_OUTSIDE)], np.int32))
    type_id = tf.constant([names.index(t) for t in types] + [names.index("_")], tf.int32)
    outside_type = names.index("_")
    tags = tf.reshape(tf.cast(tag_ids.flat_values, tf.int32), [-1])
    tags = tf.where(tags < 0, len(label_list), tags)
    rows = tag_ids.value_rowids()
    letter, kind = tf.gather(prefix, tags), tf.gather(type_id, tags)  # [all words]
    # The previous and next word of the same sentence; "O" (type "_") beyond its ends.
    first_of_row = tf.gather(tag_ids.row_starts(), rows)
    position = tf.range(tf.size(tags, out_type=tf.int64))
    has_previous = position > first_of_row
    has_next = position + 1 < tf.gather(tag_ids.row_limits(), rows)
    # Index of the word before / after (clipped: has_previous / has_next decide); no words is no error.
    shift_right = tf.maximum(position - 1, 0)
    shift_left = tf.minimum(position + 1, tf.maximum(tf.size(tags, out_type=tf.int64) - 1, 0))
    outside = tf.constant(ord(_OUTSIDE), tf.int32)
    previous_letter = tf.where(has_previous, tf.gather(letter, shift_right), outside)
    previous_kind = tf.where(has_previous, tf.gather(kind, shift_right), outside_type)
    next_letter = tf.where(has_next, tf.gather(letter, shift_left), outside)
    next_kind = tf.where(has_next, tf.gather(kind, shift_left), outside_type)

    def letter_in(value, letters):
        return tf.reduce_any(
            tf.equal(value[:, None], tf.constant([ord(c) for c in letters], tf.int32)), axis=1
        )

    inside = ~letter_in(letter, "O.")
    starts = inside & (
        letter_in(letter, "BS")
        | (letter_in(previous_letter, "ESO") & letter_in(letter, "EI"))
        | tf.not_equal(previous_kind, kind)
    )
    ends = inside & (
        letter_in(letter, "ES")
        | (letter_in(letter, "BI") & letter_in(next_letter, "BSO"))
        | tf.not_equal(next_kind, kind)
    )
    # Every word inside an entity belongs to the last entity begun (seqeval's rules never
    # leave one open across an "O"), and that entity ends at its `ends` word.
    entity = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    word_entity = tf.where(inside, entity, -1)
    first_word = tf.boolean_mask(position - first_of_row, starts)
    last_word = tf.boolean_mask(position - first_of_row, ends)
    return EntityWords(
        row=tf.boolean_mask(rows, starts),
        first_word=first_word,
        last_word=last_word,
        type_name=tf.gather(tf.constant(names), tf.boolean_mask(kind, starts)),
        word_entity=tag_ids.with_flat_values(word_entity),
    )
