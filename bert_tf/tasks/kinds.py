"""`TaskKind`: what a fine-tuned model predicts.

A saved model's kind names its task family (`bert_tf.tasks.families.family_for_kind`),
which decides the head, the loss and metrics (`bert_tf.tasks.models.compile_args`) and
the signatures of the raw-text export (`bert_tf.serving.task`). A `StrEnum`, so a kind
equals its string: task.json files written before the enum read back unchanged.

>>> TaskKind("span") is TaskKind.SPAN, TaskKind.SPAN == "span"
(True, True)
"""

from __future__ import annotations

import enum


class TaskKind(enum.StrEnum):
    CLASSIFICATION = "classification"  # GLUE, own data: logits [batch, num_classes]
    REGRESSION = "regression"  # STS-B, own data: one score [batch]
    SPAN = "span"  # SQuAD: start and end logits [batch, seq]
    TOKEN = "token"  # NER: logits [batch, seq, num_tags]
    MULTIPLE_CHOICE = "multiple_choice"  # SWAG: logits [batch, num_choices]
    MULTI_LABEL = "multi_label"  # own data, a set of labels each: logits [batch, num_labels], sigmoid
