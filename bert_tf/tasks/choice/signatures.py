"""The multiple-choice family's raw-text SavedModel: context, endings -> the likeliest ending.

context [batch], endings [batch, num_choices] -> probabilities float32 [batch, num_choices]
(softmax over the choices), choice int32 [batch] (the most probable). As fine-tuning
(`bert_tf.tasks.choice.swag`): each choice is packed `[CLS] context [SEP] ending [SEP]` and
trimmed like the original (the longer side from its end); an ending is the whole candidate
continuation, for a SWAG row sent2 + " " + ending<i>, as `read_swag` builds it. Any number
of choices works.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.tasks.family import serving_input


def choose(serving, context: tf.Tensor, endings: tf.Tensor) -> dict[str, tf.Tensor]:
    """`serving` (a `bert_tf.serving.task.TaskServing`) on a batch of contexts and their endings."""
    inputs = serving.preprocessor((context, endings))  # [batch, choices, length]
    logits = tf.cast(serving.model(inputs, training=False), tf.float32)  # [batch, choices]
    probabilities = tf.nn.softmax(logits, axis=-1)
    return {"probabilities": probabilities, "choice": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}


def signatures(serving) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """`serving_default`: context [batch], endings [batch, choices] -> probabilities, choice."""
    endings = tf.TensorSpec([None, None], tf.string, name="endings")
    program = tf.function(lambda context, endings: choose(serving, context, endings))
    return {"serving_default": program.get_concrete_function(serving_input("context"), endings)}
