"""The token family's raw-text SavedModel: text -> entities.

-> entity_text, entity_label string [batch, max_entities], entity_start, entity_end int32
[batch, max_entities] (character offsets, end exclusive), entity_score float32 (mean tag
probability of its words), num_entities int32 [batch]; padding is "" / -1 / 0. Words are
split like the original basic tokenizer (whitespace, punctuation, CJK), tagged and grouped
into entities as evaluation reads them (`bert_tf.tasks.token.entities`: the first piece's
highest logit, seqeval's chunk rules). A model trained with doc_stride (task.json) reads a
long text in windows as fine-tuning does, each word from the window where it has the most
context.

Character offsets come from the words of `BasicTokenizer.split_with_offsets`, the
original's rules: a span may hold characters the original deletes (control and format
characters) inside, never at its ends.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.tasks.family import char_offset, serving_input
from bert_tf.tasks.token import entities as ner_entities


def entities(serving, text: tf.Tensor) -> dict[str, tf.Tensor]:
    """`serving` (a `bert_tf.serving.task.TaskServing`) on a batch of texts."""
    words, begin, end = serving.tokenizer.split_words_with_offsets(text)  # [b, (w)]
    features = serving.preprocessor.features(words)
    inputs = {name: features[name] for name in preprocessing.base.MODEL_INPUTS}
    logits = tf.cast(serving.model(inputs, training=False), tf.float32)  # [rows, length, labels]
    # Each word's first piece (not read: cut by seq_length), as fine-tuning reads
    # predictions (with windows: from the window where it has the most context); tags
    # and entities by evaluation's rules (bert_tf.tasks.token.entities).
    word_logits, kept = preprocessing.tagger.word_logits(logits, features, words)  # [all words, ...]
    tag = tf.where(kept, ner_entities.word_tag_ids(word_logits), -1)
    tag_prob = tf.reduce_max(tf.nn.softmax(word_logits, axis=-1), axis=-1)
    found = ner_entities.entity_words(words.with_flat_values(tag), serving.info.label_list)
    row = found.row
    num = tf.shape(row, out_type=tf.int64)[0]
    member = found.word_entity.flat_values
    inside = member >= 0
    score = tf.math.unsorted_segment_mean(
        tf.boolean_mask(tag_prob, inside), tf.boolean_mask(member, inside), num
    )
    first_byte = tf.gather(begin.flat_values, tf.gather(begin.row_starts(), row) + found.first_word)
    last_byte = tf.gather(end.flat_values, tf.gather(end.row_starts(), row) + found.last_word)
    batch = tf.shape(text, out_type=tf.int64)[0]
    source = tf.gather(text, row)
    start_char = char_offset(source, tf.cast(first_byte, tf.int32))
    end_char = char_offset(source, tf.cast(last_byte, tf.int32))
    entity_text = tf.strings.substr(
        source, tf.cast(first_byte, tf.int32), tf.cast(last_byte - first_byte, tf.int32)
    )

    def per_text(values, default):
        return tf.RaggedTensor.from_value_rowids(values, row, nrows=batch).to_tensor(default_value=default)

    return {
        "entity_text": per_text(entity_text, ""),
        "entity_label": per_text(found.type_name, ""),
        "entity_start": per_text(start_char, -1),
        "entity_end": per_text(end_char, -1),
        "entity_score": per_text(score, 0.0),
        "num_entities": tf.cast(
            tf.math.bincount(tf.cast(row, tf.int32), minlength=tf.cast(batch, tf.int32)), tf.int32
        ),
    }


def signatures(serving) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """`serving_default`: text -> the entities."""
    program = tf.function(lambda text: entities(serving, text))
    return {"serving_default": program.get_concrete_function(serving_input("text"))}
