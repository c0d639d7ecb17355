"""A task family of your own, in one file: how similar two texts are, as the cosine of their vectors.

Sentence-pair regression scored by cosine similarity: each text is encoded on its own, its
vector is the mean of its word pieces' outputs, and the model's score is the cosine of the
two vectors, trained towards the pair's score. It works wherever a built-in family does:

    python -m bert_tf.finetune --task=pair_similarity:CosineSimilarityFamily \
      --init_checkpoint=CHECKPOINT --train_file=pairs.csv --eval_file=dev.csv --output_dir=runs/sim

(pairs.csv: columns text, text_b and label, the score), in Python through `CosineSimilarity`,
and `bert_tf.export --kind=task` serves it as text_a, text_b -> score.
"""

from __future__ import annotations

import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert_tf import fileio
from bert_tf.cli import setting
from bert_tf.preprocessing.base import MODEL_INPUTS, Preprocessor
from bert_tf.preprocessing.segments import combine_segments
from bert_tf.tasks import metrics, python_inputs, registry
from bert_tf.tasks.classification import tables
from bert_tf.tasks.family import TEXT, TaskData, TaskFamily, serving_input, split_file
from bert_tf.tasks.features import ConversionStats
from bert_tf.tasks.task_model import TaskModel, encoder_inputs


class PairPreprocessor(Preprocessor):
    """(text_a [batch], text_b [batch]) -> features [batch, 2, length]: each text packed alone."""

    def features(self, x) -> dict[str, tf.Tensor]:
        texts = tf.reshape(tf.stack(list(x), axis=1), [-1])  # [batch * 2]: a, b, a, b, ...
        packed = combine_segments(
            [self.tokenizer.tokenize(texts)],
            self.sequence_length,
            *self.special_ids,
            self.pad_to_multiple_of,
            return_trimmed=True,
        )
        length = tf.shape(packed["input_ids"])[1]
        features = {name: tf.reshape(packed[name], [-1, 2, length]) for name in MODEL_INPUTS}
        features["trimmed"] = tf.reduce_any(tf.reshape(packed["trimmed"], [-1, 2]), axis=1)
        return features

    def labels(self, y, features=None) -> tf.Tensor:
        return tf.cast(y, tf.float32)


@keras.saving.register_keras_serializable(package="pair_similarity")
class Texts(keras.layers.Layer):
    """[batch, 2, length] -> [batch * 2, length]: one row per text."""

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, input_shape):
        return (None, input_shape[-1])


@keras.saving.register_keras_serializable(package="pair_similarity")
class Cosine(keras.layers.Layer):
    """The cosine of each pair's mean-pooled vectors: [sequence [batch * 2, length, hidden],
    mask [batch * 2, length]] -> [batch]."""

    def call(self, inputs):
        sequence, mask = inputs
        mask = ops.cast(mask > 0, sequence.dtype)[:, :, None]
        vectors = ops.sum(sequence * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)
        vectors = ops.reshape(ops.cast(vectors, "float32"), (-1, 2, ops.shape(vectors)[-1]))
        a, b = vectors[:, 0], vectors[:, 1]
        norms = ops.maximum(ops.norm(a, axis=-1) * ops.norm(b, axis=-1), 1e-9)
        return ops.sum(a * b, axis=-1) / norms

    def compute_output_shape(self, input_shape):
        return (None,)


@keras.saving.register_keras_serializable(package="pair_similarity")
class CosineSimilarity(TaskModel):
    """A pair's score [batch]: the cosine of its two texts' mean-pooled encoder outputs."""

    uses_pooler = False

    def __init__(self, encoder, name: str = "cosine_similarity", **kwargs):
        inputs = encoder_inputs(encoder, extra_dims=1)  # [batch, 2, length]
        texts = Texts(name="texts")
        flat = {name: texts(tensor) for name, tensor in inputs.items()}
        sequence = encoder(flat)["sequence_output"]
        score = Cosine(name="cosine", dtype="float32")([sequence, flat["input_mask"]])
        super().__init__(inputs=inputs, outputs=score, name=name, **kwargs)
        self.encoder = encoder


@dataclasses.dataclass(frozen=True)
class SimilarityOptions:
    """The family's own settings: its flags, `from_pretrained` arguments and task.json fields."""

    text_column: str = setting("text", "The column of a pair's first text.")
    text_b_column: str = setting("text_b", "The column of a pair's second text.")
    label_column: str = setting("label", "The column of a pair's score.")


class CosineSimilarityFamily(TaskFamily):
    """Pairs of texts from a CSV, TSV or JSONL file, each with a score, learnt as the cosine
    of the two texts' vectors; scored by Spearman correlation."""

    tasks = ("pair_similarity",)
    kinds = ("cosine_similarity",)
    kind = "cosine_similarity"
    model_class = CosineSimilarity
    default_task = "pair_similarity"
    Options = SimilarityOptions
    task_json_fields = ("text_column", "text_b_column", "label_column")
    main_metric = "spearman"

    # -- data ------------------------------------------------------------------------------
    def load(self, split: str) -> list[TaskData]:
        file = split_file(self.settings, split)
        if not file:
            return []
        o, labelled = self.options, split != "predict"

        def examples():
            rows = tables.iter_table(
                file, o.text_column, o.text_b_column, o.label_column if labelled else None
            )
            return tables.validate(rows, None, regression=labelled)

        return [TaskData(split, examples, labelled, ConversionStats())]

    def preprocessor(self):
        return PairPreprocessor(self.tokenizer, self.settings.max_seq_length, self.pad_to_multiple_of)

    def signature(self, labelled: bool) -> tuple:
        x = (TEXT, TEXT)
        return (x, tf.TensorSpec([], tf.float32)) if labelled else (x,)

    def record(self, example, labelled: bool) -> tuple:
        x = (example.text_a, example.text_b)
        return (x, float(example.label)) if labelled else (x,)

    def python_data(self, x, y, split: str) -> TaskData:
        """(text_a, text_b) pairs, with scores."""
        pairs, scores = (
            python_inputs.rows(x, "x"),
            python_inputs.labels_for(y, len(python_inputs.rows(x, "x"))),
        )
        examples = [
            tables.InputExample(f"x[{i}]", a, b, None if score is None else float(score))
            for i, ((a, b), score) in enumerate(zip(pairs, scores, strict=True))
        ]
        return TaskData(split, lambda: iter(examples), y is not None, ConversionStats())

    def python_labels(self, outputs) -> list[float]:
        return np.asarray(outputs).tolist()

    def task_json_values(self) -> dict:
        return dataclasses.asdict(self.options)

    # -- the model, its loss and its scores -----------------------------------------------------
    def build_model(self, encoder, preprocessor=None):
        return CosineSimilarity(encoder, preprocessor=preprocessor)

    @classmethod
    def compile_args(cls, kind: str) -> dict:
        return {
            "loss": keras.losses.MeanSquaredError(),
            "metrics": [keras.metrics.MeanAbsoluteError(name="mae")],
        }

    def score(self, data: TaskData, predictions) -> dict[str, float]:
        return metrics.regression_metrics(predictions.labels, predictions.outputs)

    def write(self, data: TaskData, predictions, output_dir: str) -> list[str]:
        path = os.path.join(output_dir, f"{data.name}_predictions.tsv")
        with fileio.writing(path) as handle:
            handle.write("id\tscore\n")
            for example, score in zip(data.examples(), predictions.outputs, strict=True):
                handle.write(f"{example.guid}\t{float(score):.6g}\n")
        return [path]

    # -- serving: text_a, text_b -> score --------------------------------------------------------
    @classmethod
    def serving_preprocessor(cls, tokenizer, info, seq_length: int):
        return PairPreprocessor(tokenizer, seq_length, pad_to_multiple_of=1)

    @classmethod
    def serving_signatures(cls, serving, info, seq_length: int) -> dict:
        def score(text_a, text_b):
            return {"score": tf.cast(serving.model(serving.preprocessor((text_a, text_b))), tf.float32)}

        traced = tf.function(score).get_concrete_function(serving_input("text_a"), serving_input("text_b"))
        return {"serving_default": traced}


# Known to the registry as soon as this module is imported (Python fine-tuning needs it; the
# command line's --task=pair_similarity:CosineSimilarityFamily imports and registers it itself).
registry.register(CosineSimilarityFamily)
