"""A fine-tuned task model as a LiteRT (TFLite) file: token ids in, the head's outputs out.

`python -m bert_tf.export --kind=tflite --init_checkpoint=runs/mrpc/model --export_dir=DIR`
writes into DIR:

  - `model.tflite`: signature `serving_default` taking `input_ids`, `input_mask`,
    `segment_ids` int32 [batch, length] (multiple choice: [batch, choices, length]), any
    batch and any length up to max_seq_length (pad a batch to its longest text: the
    interpreter resizes to what it is given), and returning the head's float32 outputs:
    `logits` [batch, classes] (classification; regression: [batch, 1]; multi-label: apply a
    sigmoid), [batch, length, tags] (NER), `start_logits` / `end_logits` [batch, length]
    (SQuAD), [batch, choices] (multiple choice).
    Classification, regression and multi-label models also have `serving_packed`, for
    batches: the same inputs as rows of several texts one after another (`input_mask`
    numbering a row's texts 1, 2, ..., 0 on padding) and `cls_positions` int32 [texts], each
    text's [CLS] in the rows flattened row by row -> `logits` [texts, classes], each text's as
    if alone (`bert_tf.preprocessing.packing`). `bert_tf.serving.litert` packs and calls it
    from Python without TensorFlow.
  - `vocab.txt` and `labels.txt` (one label name per line, in the order of the logits).
  - `export_info.json`: kind "tflite", task, task_kind, label_list, seq_length (the longest),
    lower_case, quantize, the inputs and signatures; a multi-label model's threshold; the
    doc_stride of a model fine-tuned on windows (the file reads one window).

The text is not tokenized in the model: tensorflow-text's TFLite-ready `FastBertTokenizer`
normalizes differently from BERT's basic tokenizer (it writes "…" as "...", for one), so its
word pieces are not the ones the model was fine-tuned on. An app tokenizes with the vocab
(the TFLite Support library's `BertTokenizer`, or `BertNLClassifier` which also packs
`[CLS] text [SEP]` and pads), as `bert_tf.serving.preprocessor` packs.

Variants (`quantize`): None (float32), "float16" (float16 weights, computed in float32),
"int8" (dynamic range: int8 weights, activations quantized on the fly: LiteRT's fast CPU
path). The model is converted from the frozen Keras graph, so the file holds no variables.
"""

from __future__ import annotations

import contextlib
import logging
import re

import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from bert_tf import fileio
from bert_tf.models.encoder import ENCODER_INPUTS
from bert_tf.preprocessing.packing import PACKED_POSITIONS
from bert_tf.serving import quantize as int8
from bert_tf.serving.saving import ExportError, atomic_export_dir, check_seq_length
from bert_tf.tasks import registry
from bert_tf.tasks.finetuned import load_finetuned
from bert_tf.tasks.info import FinetunedModelInfo

logger = logging.getLogger(__name__)

MODEL_NAME = "model.tflite"
LABELS_NAME = "labels.txt"
INFO_NAME = "export_info.json"


@contextlib.contextmanager
def _dense_layers_as_fully_connected():
    """While the model is traced for the converter, a Dense layer on [batch, length, width]
    is one broadcast MatMul, which the converter turns into a FULLY_CONNECTED op with its
    bias fused. Keras' TensorFlow backend traces it as `tf.tensordot`: a chain of SHAPE,
    GATHER, REDUCE_PROD, PACK and RESHAPE ops around every dense layer, and the bias as an
    ADD of its own. The same numbers either way (within 2e-6); measured on a 6-layer encoder,
    654 ops become 396 and one short text runs ~6% faster in the interpreter.

    Keras' backend module is private; where it has no `matmul`, nothing is changed.
    """
    try:
        from keras.src.backend.tensorflow import numpy as backend_numpy
    except ImportError:
        yield
        return
    tensordot_matmul = getattr(backend_numpy, "matmul", None)
    if tensordot_matmul is None:
        yield
        return

    def matmul(x1, x2):
        if isinstance(x1, tf.Tensor) and x1.shape.rank == 3 and x1.dtype.is_floating:
            x2 = tf.convert_to_tensor(x2)
            if x2.shape.rank == 2 and x2.dtype == x1.dtype:
                return tf.matmul(x1, x2)
        return tensordot_matmul(x1, x2)

    backend_numpy.matmul = matmul
    try:
        yield
    finally:
        backend_numpy.matmul = tensordot_matmul


PACKED_SIGNATURE = "serving_packed"  # rows of several texts (`TaskFamily.litert_packed`)


def _signatures(model, info: FinetunedModelInfo) -> list[tf.types.experimental.ConcreteFunction]:
    """The model on token ids, frozen (weights as constants), with named outputs: one
    concrete function per signature of the file, each named as its signature."""
    # Any batch and any length up to seq_length: a caller pads to its longest text, not to seq_length.
    family = registry.family_of_info(info)
    shape = [None] * family.litert_input_rank  # [batch, length], or [batch, choices, length]
    spec = [tf.TensorSpec(shape, tf.int32, name=name) for name in ENCODER_INPUTS]

    def frozen(function, input_signature, name):
        with _dense_layers_as_fully_connected():
            traced = tf.function(function, input_signature=input_signature).get_concrete_function()
        names = sorted(traced.structured_outputs)  # the frozen function returns them flat, in this order
        constants = convert_variables_to_constants_v2(traced)

        def signature(*inputs):
            flat = constants(
                **{spec.name: value for spec, value in zip(input_signature, inputs, strict=True)}
            )
            return dict(zip(names, flat, strict=True))

        signature.__name__ = name  # the converter names each signature after its function
        return tf.function(signature, input_signature=input_signature).get_concrete_function()

    def head(input_ids, input_mask, segment_ids):
        outputs = model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids})
        outputs = outputs if isinstance(outputs, dict) else {"logits": outputs}
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}

    functions = [frozen(head, spec, "serving_default")]
    if family.litert_packed(info):

        def packed(input_ids, input_mask, segment_ids, cls_positions):
            inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
            return {"logits": tf.cast(model({**inputs, PACKED_POSITIONS: cls_positions}), tf.float32)}

        positions = tf.TensorSpec([None], tf.int32, name=PACKED_POSITIONS)
        functions.append(frozen(packed, [*spec, positions], PACKED_SIGNATURE))
    return functions


def convert(model, info: FinetunedModelInfo, quantize: str | None = None) -> bytes:
    """The `.tflite` bytes of a task model (see the module docstring); ExportError naming the
    op when the model has one that LiteRT's built-in ops cannot run."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions(_signatures(model, info), tf.Module())
    if quantize in ("int8", "float16"):
        converter.optimizations = [tf.lite.Optimize.DEFAULT]  # alone: dynamic-range int8
    if quantize == "float16":
        converter.target_spec.supported_types = [tf.float16]
    try:
        return converter.convert()
    except Exception as error:  # the converter's ConverterError holds the MLIR dump
        ops = sorted(set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", str(error))))
        if not ops:
            raise
        raise ExportError(
            f"the {info.kind} model has ops LiteRT's built-in ops cannot run ({', '.join(ops)}); "
            "export it with --kind=task (a SavedModel, served by TensorFlow) instead"
        ) from None


class LiteRTModel:
    """A converted file as fine-tuning's evaluation calls a model: a dict of numpy inputs (packed
    rows with `cls_positions` go to `serving_packed`) -> the head's outputs, as the Keras model
    returns them (the logits array, or SQuAD's dict)."""

    def __init__(self, content: bytes) -> None:
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError:  # TensorFlow's own copy of the interpreter
            Interpreter = tf.lite.Interpreter  # noqa: N806
        interpreter = Interpreter(model_content=content)
        self._runners = {
            key: interpreter.get_signature_runner(key) for key in interpreter.get_signature_list()
        }

    def __call__(self, inputs: dict) -> dict | object:
        names = list(ENCODER_INPUTS)
        key = "serving_default"
        if PACKED_POSITIONS in inputs:
            names, key = [*names, PACKED_POSITIONS], PACKED_SIGNATURE
        outputs = self._runners[key](**{name: inputs[name].astype("int32") for name in names})
        return outputs["logits"] if set(outputs) == {"logits"} else outputs


def check_quantized(
    model, tokenizer, info: FinetunedModelInfo, content: bytes, quantize: str, dev_file: str, accept: bool
) -> str:
    """Scores the Keras model and its quantized file on `dev_file` with fine-tuning's evaluation:
    the line comparing them, or AccuracyLossError when the file loses more than a point."""
    before = int8.score(model, tokenizer, info, dev_file)
    after = int8.score(LiteRTModel(content), tokenizer, info, dev_file)
    return int8.check_accuracy(before, after, dev_file, accept, variant=quantize)


def export_tflite(
    init_checkpoint: str,
    export_dir: str,
    seq_length: int | None = None,
    quantize: str | None = None,
    overwrite: bool = False,
    dev_file: str | None = None,
    accept_accuracy_loss: bool = False,
) -> str:
    """Writes the fine-tuned model folder `init_checkpoint` as `export_dir`/model.tflite with
    its vocab, labels and export_info.json, all at once or not at all; returns the folder.
    A quantized file is scored against the float model on `dev_file` when given, and refused
    if it loses more than a point (unless `accept_accuracy_loss`)."""
    model = load_finetuned(init_checkpoint, compile=False)
    tokenizer, info = model.tokenizer, model.task_info
    family = registry.family_of_info(info)
    seq_length = seq_length or info.max_seq_length
    check_seq_length(seq_length, model.encoder.config)
    content = convert(model, info, quantize)
    if quantize and dev_file:
        logger.info(
            "%s", check_quantized(model, tokenizer, info, content, quantize, dev_file, accept_accuracy_loss)
        )
    elif quantize:
        logger.info("%s accuracy not checked: pass --dev_file to score it against the float model", quantize)
    labels = info.label_list or []
    export_info = {
        "kind": "tflite",
        "task": info.task,
        "task_kind": info.kind,
        "family": info.family,
        "label_list": info.label_list,
        "seq_length": seq_length,
        "lower_case": bool(tokenizer.lower_case),
        "quantize": quantize or "float32",
        "inputs": list(ENCODER_INPUTS),
        "signatures": ["serving_default", *([PACKED_SIGNATURE] if family.litert_packed(info) else [])],
        # The TensorFlow-free client of the family's files (bert_tf.serving.litert.load).
        **({"client": family.litert_client} if family.litert_client else {}),
        # What a client needs beyond the outputs (a multi-label model's decision threshold, ...).
        **family.litert_info(info),
        "init_checkpoint": fileio.abspath(init_checkpoint),
    }
    with atomic_export_dir(export_dir, overwrite) as staging:
        fileio.write_bytes(fileio.join(staging, MODEL_NAME), content)
        fileio.copy(tokenizer.vocab_file, fileio.join(staging, "vocab.txt"))
        fileio.write_text(fileio.join(staging, LABELS_NAME), "".join(f"{label}\n" for label in labels))
        fileio.write_json(fileio.join(staging, INFO_NAME), export_info)
    return fileio.abspath(export_dir)
