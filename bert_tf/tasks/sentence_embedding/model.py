"""`BertSentenceEncoder`: one vector per text, pooled from the encoder's last layer."""

from __future__ import annotations

import os

import keras
import numpy as np
from keras import ops

from bert_tf.errors import UsageError
from bert_tf.models.encoder import ENCODER_INPUTS, BertEncoder
from bert_tf.preprocessing.packing import PACKED_POSITIONS, pack_sequences
from bert_tf.tasks import keras_api, python_inputs
from bert_tf.tasks.sentence_embedding import folder
from bert_tf.tasks.task_model import TaskModel, encoder_inputs


class _Encoding:
    """The task description `encode` last ran on, and its family (with its traced predictor)."""

    def __init__(self, info, family):
        self.info, self.family = info, family


@keras.saving.register_keras_serializable(package="bert_tf")
class TextRows(keras.layers.Layer):
    """[batch, texts, length] -> [batch * texts, length]: one encoder row per text."""

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, input_shape):
        return (None, input_shape[-1])


@keras.saving.register_keras_serializable(package="bert_tf")
class SentencePooling(keras.layers.Layer):
    """A text's vector from its tokens' outputs, as sentence-transformers' Pooling (and Normalize).

    [sequence [rows, length, hidden], token_mask [rows, length], input_ids [batch, texts, length]]
    -> float32 [batch, texts, hidden]. `pooling`: "mean" (over the non-padding tokens, [CLS]
    and [SEP] included), "cls" (the [CLS] token's output), "max" (per dimension, over the
    non-padding tokens), "mean_sqrt_len" (the sum over sqrt(tokens)); `normalize`: unit length.
    """

    def __init__(self, pooling: str = "mean", normalize: bool = True, **kwargs):
        super().__init__(**kwargs)
        if pooling not in folder.POOLINGS:
            raise ValueError(f"pooling={pooling!r}; use one of {', '.join(folder.POOLINGS)}")
        self.pooling, self.normalize = pooling, normalize

    def call(self, sequence, token_mask, input_ids):
        sequence = ops.cast(sequence, "float32")
        mask = ops.expand_dims(ops.cast(token_mask > 0, "float32"), -1)  # [rows, length, 1]
        if self.pooling == "cls":
            vectors = sequence[:, 0]
        elif self.pooling == "max":  # padding's outputs below any real one, as sentence-transformers
            vectors = ops.max(sequence * mask + (mask - 1.0) * 1e9, axis=1)
        else:
            total = ops.sum(sequence * mask, axis=1)  # [rows, hidden]
            count = ops.maximum(ops.sum(mask, axis=1), 1e-9)  # [rows, 1]
            vectors = total / (count if self.pooling == "mean" else ops.sqrt(count))
        if self.normalize:  # torch's F.normalize: x / max(|x|, 1e-12)
            vectors = vectors / ops.maximum(ops.norm(vectors, axis=-1, keepdims=True), 1e-12)
        return ops.reshape(vectors, (*ops.shape(input_ids)[:2], ops.shape(vectors)[-1]))

    def pool_packed(self, sequence, input_mask, positions):
        """The vectors of packed rows' texts, float32 [texts, 1, hidden], each as if it had a row of
        its own: sequence [rows, seq, hidden]; input_mask [rows, seq] numbering a row's texts 1, 2,
        ... (0 on padding); positions [texts], each text's [CLS] in the rows flattened."""
        sequence = ops.cast(sequence, "float32")
        rows, length, hidden = ops.shape(sequence)[0], ops.shape(sequence)[1], ops.shape(sequence)[2]
        tokens = ops.reshape(sequence, (-1, hidden))  # [rows * seq, hidden]
        numbers = ops.reshape(ops.cast(input_mask, "int32"), (-1,))  # [rows * seq]
        positions = ops.cast(positions, "int32")
        count = ops.shape(positions)[0]
        if self.pooling == "cls":
            vectors = ops.take(tokens, positions, axis=0)
        else:
            # Each token's text: (row, number) -> the text's index; padding -> `count`, a spare segment.
            keys = (positions // length) * (length + 1) + ops.take(numbers, positions)  # [texts]
            table = ops.scatter(
                ops.expand_dims(keys, -1), ops.arange(1, count + 1, dtype="int32"), (rows * (length + 1),)
            )
            token_keys = (ops.arange(rows * length, dtype="int32") // length) * (length + 1) + numbers
            text_of_token = ops.take(table, token_keys) - 1
            text_of_token = ops.where(numbers > 0, text_of_token, count)  # [rows * seq]
            if self.pooling == "max":
                vectors = ops.segment_max(tokens, text_of_token, num_segments=count + 1)[:count]
            else:
                real = ops.expand_dims(ops.cast(numbers > 0, "float32"), -1)
                total = ops.segment_sum(tokens * real, text_of_token, num_segments=count + 1)[:count]
                tokens_per_text = ops.segment_sum(real, text_of_token, num_segments=count + 1)[:count]
                tokens_per_text = ops.maximum(tokens_per_text, 1e-9)
                vectors = total / (tokens_per_text if self.pooling == "mean" else ops.sqrt(tokens_per_text))
        if self.normalize:
            vectors = vectors / ops.maximum(ops.norm(vectors, axis=-1, keepdims=True), 1e-12)
        return ops.expand_dims(vectors, 1)

    def compute_output_shape(self, sequence_shape, token_mask_shape, input_ids_shape):
        return (*input_ids_shape[:2], sequence_shape[-1])

    def get_config(self) -> dict:
        return {**super().get_config(), "pooling": self.pooling, "normalize": self.normalize}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSentenceEncoder(TaskModel):
    """Texts [batch, texts, seq] -> their vectors, float32 [batch, texts, hidden].

    Every text is encoded on its own and pooled (`pooling`: mean, cls, max, mean_sqrt_len;
    `normalize`: unit vectors), as sentence-transformers' Transformer -> Pooling -> Normalize.
    Training takes several texts per example (anchor, positive[, hard negative]; or a scored
    pair); `encode` takes single texts.

    Example (a random tiny model; `from_pretrained` reads a checkpoint or a
    sentence-transformers folder):

    >>> import numpy as np
    >>> from bert_tf.config import load_config
    >>> from bert_tf.models import BertEncoder
    >>> model = BertSentenceEncoder(BertEncoder(load_config("bert_tiny").replace(vocab_size=100)))
    >>> ids = np.array([[[1, 7, 2, 0], [1, 7, 9, 2]]])
    >>> vectors = model({"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids})
    >>> vectors.shape, np.round(np.linalg.norm(vectors, axis=-1), 4).tolist()
    (TensorShape([1, 2, 128]), [[1.0, 1.0]])
    """

    config_fields = ("pooling", "normalize")
    uses_pooler = False

    def __init__(
        self,
        encoder: BertEncoder,
        pooling: str = "mean",
        normalize: bool = True,
        name: str = "bert_sentence_encoder",
        **kwargs,
    ):
        inputs = encoder_inputs(encoder, extra_dims=1)  # [batch, texts, seq]
        rows = TextRows(name="text_rows")
        flat = {name: rows(tensor) for name, tensor in inputs.items()}
        sequence = encoder(flat)["sequence_output"]  # [batch * texts, seq, hidden]
        vectors = SentencePooling(pooling, normalize, name="pooling", dtype="float32")(
            sequence, flat["input_mask"], inputs["input_ids"]
        )
        super().__init__(inputs=inputs, outputs=vectors, name=name, **kwargs)
        self.encoder = encoder
        self.pooling, self.normalize = pooling, normalize

    def call(self, inputs, training=None, mask=None):
        """Texts [batch, texts, seq] -> [batch, texts, hidden]; packed rows (an input dict with
        `cls_positions`, see `bert_tf.preprocessing.packing.pack_sequences`) -> [texts, 1,
        hidden], each text's vector as if it had a row of its own.

        Training and the scoring of pairs (on TensorFlow) pack a batch's texts into rows here,
        as the export packs a served batch: a batch's short queries then cost their own tokens,
        not the length of its longest passage, and each text's vector is still as if it were
        alone. (Single texts come packed from the preprocessor, or, in a LiteRT file's
        `serving_default`, one row each.) Compiled with XLA (`jit_compile=True`), whose shapes
        must not depend on the data, they run unpacked."""
        if isinstance(inputs, dict) and PACKED_POSITIONS in inputs:
            return self._call_packed(inputs, training)
        texts = inputs["input_ids"].shape[1]
        packs = keras.backend.backend() == "tensorflow" and not getattr(self, "jit_compile", False)
        if packs and (training or (texts or 1) > 1):
            shape = ops.shape(inputs["input_ids"])  # [batch, texts, seq]
            rows = {name: ops.reshape(inputs[name], (-1, shape[-1])) for name in ENCODER_INPUTS}
            vectors = self._call_packed(pack_sequences(rows, row_length=shape[-1]), training)
            return ops.reshape(vectors, (shape[0], shape[1], -1))  # [batch, texts, hidden]
        return super().call(inputs, training=training, mask=mask)

    def _call_packed(self, inputs, training):
        # Rows may come as [rows, 1, seq] (a LiteRT file's inputs have one shape for both signatures).
        inputs = {
            name: ops.reshape(value, (-1, ops.shape(value)[-1])) if name in ENCODER_INPUTS else value
            for name, value in inputs.items()
        }
        sequence = self.encoder.call_packed(inputs, training=training)[
            "sequence_output"
        ]  # [rows, seq, hidden]
        # Found by name: new attributes would change where a saved model's weights are.
        return self.get_layer("pooling").pool_packed(sequence, inputs["input_mask"], inputs[PACKED_POSITIONS])

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """The encoder of a checkpoint, pooled: a sentence-transformers folder (its pooling,
        normalization, max_seq_length and casing), any checkpoint the toolkit reads (mean
        pooling, normalized: as sentence-transformers builds a model of a plain BERT; `pooling=`
        and `normalize=` change that), or a fine-tuned folder of this family (`save`).

        Options (keyword arguments, the command line's flags): `loss=` ("mnrl", the default for
        pairs; "mnrl_symmetric"; "cosent" and "cosine" for scored pairs), `max_seq_length=`,
        `pooling=`, `normalize=`.
        """
        path = os.fspath(path)
        if folder.is_folder(path):
            found = folder.read(path)
            kwargs.setdefault("pooling", found.pooling)
            kwargs.setdefault("normalize", found.normalize)
            if found.max_seq_length is not None:
                kwargs.setdefault("max_seq_length", found.max_seq_length)
            if found.lower_case:
                kwargs.setdefault("lower_case", True)
            path = found.checkpoint
        return keras_api.from_pretrained(cls, path, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None, **kwargs):
        """Keras' fit; on raw text, `x` (anchor, positive) pairs or (anchor, positive, hard
        negative) triples, without `y` (in-batch negatives), or (text_a, text_b) pairs with
        `y` their scores in [0, 1] (a model built with loss="cosent" or "cosine")."""
        if y is None and keras_api.is_raw(x):  # in-batch negatives: the texts are the labels
            y = [None] * len(python_inputs.rows(x, "x"))
        if isinstance(validation_data, list):
            validation_data = (validation_data, [None] * len(validation_data))
        return super().fit(
            x, y, batch_size=batch_size, epochs=epochs, validation_data=validation_data, **kwargs
        )

    def encode(self, texts, batch_size: int = 32) -> np.ndarray:
        """The vectors of `texts` (a list of strings): float32 [n, hidden], each text's the same
        whatever the batch it is in."""
        texts = python_inputs.rows(texts, "texts")
        if not all(isinstance(text, str) for text in texts):
            raise UsageError("encode takes a list of texts (strings)")
        if not texts:
            return np.zeros([0, self.encoder.config.hidden_size], np.float32)
        # One family per model and task description: its traced predictor serves every call.
        cached = getattr(self, "_encoding", None)
        if cached is None or cached.info is not self.task_info:
            # A plain object: Keras would track a tuple attribute's contents as the model's own.
            cached = self._encoding = _Encoding(self.task_info, keras_api.family_of(self))
        family = cached.family
        data = family.python_data([(text,) for text in texts], None, "predict")
        return np.asarray(family.predict(self, data, batch_size).outputs)[:, 0]

    def export(self, filepath, format="bert_tf", overwrite=False, **kwargs):
        """As the other task models' (`TaskModel.export`); `format="sentence_transformers"` also:
        a folder `SentenceTransformer(filepath)` loads with the same vectors
        (`bert_tf.export --kind=sentence_transformers`)."""
        if format == "sentence_transformers":
            keras_api._preprocessor_of(self, "export")
            return folder.export(self, os.fspath(filepath), overwrite)
        return super().export(filepath, format=format, overwrite=overwrite, **kwargs)
