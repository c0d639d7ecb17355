"""The classification family's raw-text SavedModel: texts (or pairs) in, labels out.

classification (GLUE tasks, own CSV/TSV/JSONL data):
  inputs `text` (single-sentence tasks) or `text_a`, `text_b` (pair tasks such as MRPC);
  the other form is also exported, as `serving_single` / `serving_pair`.
  -> probabilities float32 [batch, num_classes], label string [batch], label_id int32
     [batch], label_names string [batch, num_classes] (the class order).
regression (STS-B, own data): same inputs -> score float32 [batch].
multi_label (own data): same inputs -> probabilities float32 [batch, num_labels] (a
  sigmoid per label), labels string [batch, max labels] (every label whose probability
  is above task.json's threshold, in label order, padded with ""), num_labels int32
  [batch], label_names string [batch, num_labels] (the label order).

A model trained with doc_stride (task.json) reads a long text (of a pair, the second) in
windows as fine-tuning does, and its logits (score) are the mean or max (window_pooling) of
its windows', as evaluation combines them.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.preprocessing.packing import pack_sequences
from bert_tf.preprocessing.windows import pool_windows
from bert_tf.tasks.family import serving_input


def classify(serving, texts: list[tf.Tensor]) -> dict[str, tf.Tensor]:
    """`serving` (a `bert_tf.serving.task.TaskServing`) on a batch of texts ([text]) or pairs
    ([text_a, text_b])."""
    info = serving.info
    features = serving.preprocessor.features(texts[0] if len(texts) == 1 else tuple(texts))
    inputs = {name: features[name] for name in preprocessing.base.MODEL_INPUTS}
    # The batch's texts (or windows) share rows of its padded length, as fine-tuning packs
    # them (bert_tf.preprocessing.packing): the encoder runs on their tokens, not on the
    # padding of short texts beside a long one, and each text's logits are as if alone.
    packed = pack_sequences(inputs, row_length=tf.shape(inputs["input_ids"])[1])
    outputs = tf.cast(serving.model(packed, training=False), tf.float32)
    if "example_index" in features:  # long texts in windows: one output per text, as evaluation's
        outputs = pool_windows(
            outputs, features["example_index"], tf.shape(texts[0])[0], info.option("window_pooling", "mean")
        )
    if info.kind == "regression":
        return {"score": outputs[:, 0]}
    labels = tf.constant(info.label_list, tf.string)
    label_names = tf.tile(labels[None, :], [tf.shape(outputs)[0], 1])
    if info.kind == "multi_label":
        probabilities = tf.sigmoid(outputs)
        chosen = probabilities > info.option("threshold", 0.5)  # [batch, num_labels]
        return {
            "probabilities": probabilities,
            "labels": tf.ragged.boolean_mask(label_names, chosen).to_tensor(default_value=""),
            "num_labels": tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1),
            "label_names": label_names,
        }
    probabilities = tf.nn.softmax(outputs, axis=-1)
    label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    return {
        "probabilities": probabilities,
        "label_id": label_id,
        "label": tf.gather(labels, label_id),
        "label_names": label_names,
    }


def signatures(serving, default_pair: bool) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """`serving_default` (pairs when `default_pair`), `serving_single` and `serving_pair`."""
    single = tf.function(lambda text: classify(serving, [text])).get_concrete_function(serving_input("text"))
    pair = tf.function(lambda text_a, text_b: classify(serving, [text_a, text_b])).get_concrete_function(
        serving_input("text_a"), serving_input("text_b")
    )
    return {
        "serving_default": pair if default_pair else single,
        "serving_single": single,
        "serving_pair": pair,
    }
