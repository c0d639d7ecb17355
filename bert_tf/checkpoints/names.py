"""Where every weight of our models lives in the original TF1 checkpoints.

One table maps each Keras variable to its original name (`bert/encoder/layer_3/...`) and
says whether the original stores it transposed. The Hugging Face names are derived from
the original names mechanically, so the two formats cannot drift apart.

A fine-tuned model's head (`TaskHead`) is one dense layer, stored as the original
fine-tuning scripts store theirs: `{name}_weights` [units, hidden] and `{name}_bias`
[units]. run_classifier.py names its head `output`, run_squad.py `cls/squad/output`; the
original has no token tagging or multiple-choice script, so those heads are named in the
same style, `cls/token/output` and `cls/multiple_choice/output`. In Hugging Face files
they are transformers' `classifier.*` and `qa_outputs.*`.
"""

from __future__ import annotations

import dataclasses
import re

import keras
import numpy as np

from bert_tf.errors import BertTfError


class CheckpointError(BertTfError, ValueError):
    """A checkpoint that does not fit the model; the message lists what and how to fix it."""


@dataclasses.dataclass(frozen=True)
class Slot:
    """One model weight: its original TF1 name, the Keras variable, whether the TF1 array is
    the transpose of the Keras one (the NSP and task-head weights, stored [units, hidden]),
    and, for a task head's weights, its Hugging Face name (`TaskHead.hf_module`)."""

    name: str
    variable: keras.Variable
    transposed: bool = False
    hf: str | None = None  # a task head's weight: its transformers name

    @property
    def is_head(self) -> bool:
        return self.hf is not None

    @property
    def shape(self) -> tuple[int, ...]:
        shape = tuple(self.variable.shape)
        return shape[::-1] if self.transposed else shape

    def read(self) -> np.ndarray:
        """The value in the TF1 layout."""
        value = keras.ops.convert_to_numpy(self.variable)
        return value.T if self.transposed else value


def _dense(prefix: str, layer) -> list[Slot]:
    return [Slot(f"{prefix}/kernel", layer.kernel), Slot(f"{prefix}/bias", layer.bias)]


def _layer_norm(prefix: str, layer) -> list[Slot]:
    return [Slot(f"{prefix}/gamma", layer.gamma), Slot(f"{prefix}/beta", layer.beta)]


def encoder_slots(encoder) -> list[Slot]:
    """The `bert/` variables of a `BertEncoder`, in the original order."""
    embeddings = encoder.embeddings
    slots = [
        Slot("bert/embeddings/word_embeddings", embeddings.word_embeddings),
        Slot("bert/embeddings/token_type_embeddings", embeddings.token_type_embeddings),
        Slot("bert/embeddings/position_embeddings", embeddings.position_embeddings),
        *_layer_norm("bert/embeddings/LayerNorm", embeddings.layer_norm),
    ]
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/layer_{index}"
        attention = block.attention
        for part in ("query", "key", "value"):
            slots += _dense(f"{prefix}/attention/self/{part}", getattr(attention, part))
        slots += _dense(f"{prefix}/attention/output/dense", attention.output_dense)
        slots += _layer_norm(f"{prefix}/attention/output/LayerNorm", block.attention_layer_norm)
        slots += _dense(f"{prefix}/intermediate/dense", block.intermediate_dense)
        slots += _dense(f"{prefix}/output/dense", block.output_dense)
        slots += _layer_norm(f"{prefix}/output/LayerNorm", block.output_layer_norm)
    return slots + _dense("bert/pooler/dense", encoder.pooler_dense)


def pretrainer_slots(pretrainer) -> list[Slot]:
    """`bert/` plus the `cls/` heads of a `BertPretrainer`."""
    mlm, nsp = pretrainer.masked_lm_head, pretrainer.next_sentence_head
    return [
        *encoder_slots(pretrainer.encoder),
        *_dense("cls/predictions/transform/dense", mlm.transform_dense),
        *_layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm),
        Slot("cls/predictions/output_bias", mlm.output_bias),
        Slot("cls/seq_relationship/output_weights", nsp.dense.kernel, transposed=True),
        Slot("cls/seq_relationship/output_bias", nsp.dense.bias),
    ]


@dataclasses.dataclass(frozen=True)
class TaskHead:
    """Where a task model's head lives: its Keras dense layer (`layer`), its original name
    (`name`: `name_weights`, `name_bias`), the transformers class that has it
    (`architecture`, with `problem_type` for sequence classification) and the module
    that holds it there (`hf_module`: `classifier`, `qa_outputs`, ...), and whether that
    class has a pooler (BertForTokenClassification and BertForQuestionAnswering do not:
    the pooler is then not written). Each task family says its own (`TaskFamily.head`)."""

    layer: str
    name: str
    architecture: str
    problem_type: str | None = None
    pooler: bool = True
    hf_module: str = "classifier"


def transformers_problem_type(problem_type: str | None, units: int) -> str:
    """A sequence classifier's `problem_type` as transformers reads its config: when it is
    missing, "regression" for one output, else "single_label_classification"."""
    return problem_type or ("regression" if units == 1 else "single_label_classification")


def head_slots(model, head: TaskHead) -> list[Slot]:
    """The slots of a task model's encoder and its head."""
    dense = model.get_layer(head.layer)
    return [
        *encoder_slots(model.encoder),
        # [units, hidden], as run_classifier.py's output_weights (logits = x W^T + b)
        Slot(f"{head.name}_weights", dense.kernel, transposed=True, hf=f"{head.hf_module}.weight"),
        Slot(f"{head.name}_bias", dense.bias, hf=f"{head.hf_module}.bias"),
    ]


def model_slots(model, head: TaskHead | None = None) -> list[Slot]:
    """Slots of a `BertPretrainer`, a `BertEncoder`, or any model with an `.encoder`
    (with `head`: a task model's encoder and head)."""
    if head is not None:
        return head_slots(model, head)
    if hasattr(model, "masked_lm_head"):
        return pretrainer_slots(model)
    if hasattr(model, "transformer_layers"):
        return encoder_slots(model)
    if hasattr(model, "encoder"):
        return encoder_slots(model.encoder)
    raise TypeError(f"{type(model).__name__} is not a BERT model (no encoder found)")


# --- Hugging Face names --------------------------------------------------------------

_HF_SPECIAL = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}


def hf_name(name: str, bert_prefix: bool = True) -> str:
    """`bert/encoder/layer_0/attention/self/query/kernel` ->
    `bert.encoder.layer.0.attention.self.query.weight`."""
    if name in _HF_SPECIAL:
        return _HF_SPECIAL[name]
    hf = re.sub(r"layer_(\d+)", r"layer.\1", name).replace("/", ".")
    hf = re.sub(r"\.(kernel|gamma)$", ".weight", hf)
    hf = re.sub(r"\.beta$", ".bias", hf)
    if hf.endswith("_embeddings"):
        hf += ".weight"
    if not bert_prefix and hf.startswith("bert."):
        hf = hf[len("bert.") :]
    return hf


def hf_transposed(name: str) -> bool:
    """PyTorch Linear weights are [out, in]; TF1 kernels are [in, out]."""
    return name.endswith("/kernel")
