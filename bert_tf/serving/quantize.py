"""int8 weights for the encoder's dense layers, and the dev-set check that an int8 model still scores.

`quantize_encoder` stores the kernel of every Dense layer of the encoder (query, key, value,
attention output, intermediate, output, pooler) as int8 with one float scale per output
unit: Keras' own `quantize("int8")` with weight-only quantization (no activation
quantizer, so no calibration data). The embeddings, LayerNorms and the task head stay
float32. Each kernel is dequantized when the layer runs, so outputs differ from the float
model's by the rounding of the weights alone (about 1e-3 of the logits' scale).

Measured on a 2-core CPU (a MiniLM-sized classifier, batch 32 x 64 tokens, TensorFlow
graph): float32 2.6 s, weight-only int8 3.5 s, Keras' full int8 (int8 activations too)
11.9 s, the same with XLA 4.3 s. TensorFlow's CPU kernels have no faster int8 matmul for
these graphs, so an int8 SavedModel is smaller (dense kernels 4x), not faster. The int8
matmuls are LiteRT's dynamic-range model's (`--kind=tflite --quantize=int8`,
`bert_tf.serving.litert_conversion`), whose speed the serving benchmark measures.

`check_accuracy` scores the float and the int8 model on the same labelled data with the
fine-tuning evaluation (the task family's, `bert_tf.tasks.family`) and refuses an int8 model that loses more
than `MAX_LOSS` (one point) unless told to accept it.

Example:

>>> import numpy as np
>>> from bert_tf.config import load_config
>>> from bert_tf.models import BertEncoder
>>> encoder = BertEncoder(load_config("bert_tiny").replace(vocab_size=100))
>>> ids = np.array([[1, 7, 8, 2]])
>>> inputs = {"input_ids": ids, "input_mask": ids > 0, "segment_ids": 0 * ids}
>>> before = encoder(inputs)["pooled_output"]
>>> quantize_encoder(encoder)
>>> after = encoder(inputs)["pooled_output"]
>>> bool(np.abs(after - before).max() < 1e-2), encoder.get_layer("pooler_dense").kernel.dtype
(True, 'int8')
"""

from __future__ import annotations

import logging

import keras

from bert_tf.errors import BertTfError
from bert_tf.tasks import registry
from bert_tf.tasks.info import FinetunedModelInfo

logger = logging.getLogger(__name__)

MAX_LOSS = 0.01  # one point of accuracy (or of the task's main score)


class AccuracyLossError(BertTfError):
    """A quantized model that scores more than a point below the float model."""


def quantize_encoder(model: keras.Model) -> None:
    """Stores the encoder's Dense kernels as int8 (weight-only), in place.

    `model` is a `BertEncoder` or a task model (its `encoder` is quantized, its head kept
    float32).
    """
    encoder = getattr(model, "encoder", model)
    config = keras.quantizers.Int8QuantizationConfig(
        weight_quantizer=keras.quantizers.AbsMaxQuantizer(axis=0),  # a scale per output unit
        activation_quantizer=None,
    )
    encoder.quantize("int8", config=config, filters=lambda layer: isinstance(layer, keras.layers.Dense))


def score(
    model, tokenizer, info: FinetunedModelInfo, dev_file: str, batch_size: int = 32
) -> dict[str, float]:
    """The fine-tuning evaluation's scores of `model` on the labelled `dev_file` (read as
    --eval_file is)."""
    family = registry.family_of_info(info).for_model(info, tokenizer, eval_file=dev_file)
    [data] = family.load("eval")
    family.count(data)
    return {
        name: float(value)
        for name, value in family.score(data, family.predict(model, data, batch_size)).items()
    }


def main_score(scores: dict[str, float]) -> str:
    """The score an int8 model is judged by: accuracy where the task has it, else its first."""
    return "accuracy" if "accuracy" in scores else next(name for name in scores if name != "eval_loss")


def check_accuracy(
    float_scores: dict[str, float],
    quantized_scores: dict[str, float],
    dev_file: str,
    accept: bool = False,
    variant: str = "int8",
) -> str:
    """One line comparing the two models' main score; raises AccuracyLossError when the
    quantized model (`variant`: "int8", "float16") loses more than MAX_LOSS and `accept` is False."""
    name = main_score(float_scores)
    before, after = float_scores[name], quantized_scores[name]
    line = f"{name} on {dev_file}: float32 {before:.4f}, {variant} {after:.4f} ({after - before:+.4f})"
    if round(before - after, 6) > MAX_LOSS:  # exactly a point (0.9 - 0.89) is not more
        if not accept:
            raise AccuracyLossError(
                f"{line}: {variant} loses more than {MAX_LOSS:.2f}; nothing written. Export the float "
                f"model (no --quantize), or pass --accept_accuracy_loss to write the {variant} one anyway"
            )
        logger.warning("%s: more than %.2f lost (--accept_accuracy_loss)", line, MAX_LOSS)
    return line
