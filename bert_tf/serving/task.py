"""Task SavedModels: a fine-tuned model that takes raw strings and returns what a client wants.

Built from a model directory written by `bert_tf.finetune` (`model.keras`,
`bert_config.json`, `vocab.txt`, `task.json`), or from a task model in memory. Every export
has `serving_default`; inputs are tf.string [batch] (multiple choice: also [batch,
num_choices]), outputs have the batch as first dimension. The signatures are the task
family's (`TaskFamily.serving_signatures`): its inputs and outputs are documented in its
package's `signatures` module (classification: text or a pair -> probabilities and label;
span: question, context -> answer with its offsets; token: text -> entities with their
offsets; multiple choice: context, endings -> choice).

Text becomes features with the same preprocessors (`bert_tf.preprocessing`) that
fine-tuning maps over its data, traced into the SavedModel.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf import fileio
from bert_tf.serving.saving import ExportError, check_seq_length, export_module
from bert_tf.tasks import registry
from bert_tf.tasks.finetuned import is_finetuned_dir, load_finetuned
from bert_tf.tasks.info import FinetunedModelInfo
from bert_tf.tokenization import BertTokenizer


class _NotSaved:
    """Holds an object a tf.Module calls but does not save: neither tracked nor walked."""

    def __init__(self, value) -> None:
        self.value = value


class TaskServing(tf.Module):
    """Raw strings -> predictions for a fine-tuned task model: what a family's serving
    programs read (`model`, `preprocessor`, `tokenizer`, `info`, `seq_length`).

    Args:
      model: the Keras task model.
      tokenizer: its `BertTokenizer`.
      info: the fine-tuned folder's task.json (`FinetunedModelInfo`).
      seq_length: packed length.
    """

    def __init__(self, model, tokenizer, info: FinetunedModelInfo, seq_length: int) -> None:
        super().__init__(name="bert_task")
        # The SavedModel keeps the model's variables, which the signatures read, not the Keras
        # object graph: saving that would trace the model's own functions again and walk all
        # its layers (it halved the time to write the MiniLM's task export).
        self._keras_model = _NotSaved(model)
        self.model_variables = list(model.variables)
        self.tokenizer = tokenizer
        self.vocab_file = tf.saved_model.Asset(tokenizer.vocab_file)
        self._info = _NotSaved(info)
        self.seq_length = seq_length
        self._family = _NotSaved(registry.family_of_info(info))
        # The fine-tuning preprocessor of the task family: the same rules, traced here.
        self.preprocessor = self._family.value.serving_preprocessor(tokenizer, info, seq_length)

    @property
    def model(self):
        """The Keras task model."""
        return self._keras_model.value

    @property
    def info(self) -> FinetunedModelInfo:
        return self._info.value

    def trace(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        """Returns the signatures dict for tf.saved_model.save: the task family's."""
        return self._family.value.serving_signatures(self, self.info, self.seq_length)


def check_finetuned_dir(init_checkpoint: str, kind: str) -> None:
    """A clear error for an --init_checkpoint that holds no fine-tuned model."""
    if not is_finetuned_dir(init_checkpoint):
        raise ExportError(
            f"--kind={kind} needs a fine-tuned model: the model/ folder that bert_tf.finetune writes, or a "
            f"Hugging Face or original checkpoint with a task head (BertForSequenceClassification, ...); "
            f"{init_checkpoint} is neither"
        )


def export_task(
    init_checkpoint: str, export_dir: str, seq_length: int | None = None, overwrite: bool = False
) -> str:
    """Exports the fine-tuned model directory `init_checkpoint` (see module docstring):
    a folder bert_tf.finetune wrote, or a Hugging Face or original checkpoint with a task head."""
    check_finetuned_dir(init_checkpoint, "task")
    model = load_finetuned(init_checkpoint, compile=False)
    tokenizer, info = model.tokenizer, model.task_info
    return export_task_model(
        model, tokenizer, info, export_dir, seq_length, overwrite, source=fileio.abspath(init_checkpoint)
    )


def export_task_model(
    model,
    tokenizer,
    info: FinetunedModelInfo,
    export_dir: str,
    seq_length: int | None = None,
    overwrite: bool = False,
    source: str | None = None,
    extra_info: dict | None = None,
) -> str:
    """Exports a fine-tuned task model held in memory (`model.export` of the task models).

    `info` is its task.json; `source` the folder it was read from, if any, and `extra_info`
    (e.g. {"quantize": "int8"}) are recorded in assets.extra/export_info.json.
    """
    seq_length = seq_length or info.max_seq_length
    config = model.encoder.config
    check_seq_length(seq_length, config)

    def build(vocab_file: str) -> TaskServing:
        return TaskServing(
            model, BertTokenizer(vocab_file, lower_case=tokenizer.lower_case), info, seq_length
        )

    extra = {
        "task": info.task,
        "task_kind": info.kind,
        "family": info.family,
        "label_list": info.label_list,
        "pair_input": None,  # classification and regression: whether the default input is a pair
        **registry.family_of_info(info).export_info(info),  # e.g. pair_input, the span settings
        **({"init_checkpoint": source} if source else {}),
        **(extra_info or {}),
    }
    return export_module(
        build,
        "task",
        config,
        tokenizer.vocab_file,
        tokenizer.lower_case,
        export_dir,
        seq_length,
        overwrite,
        extra,
    )
