"""Sentence and sentence-pair classification (and regression) data: examples → features.

Users' own data comes from CSV, TSV or JSON-lines files (chosen by extension) with
named columns; the label set is taken from the training data. GLUE readers
(`bert_tf.tasks.glue`) produce the same `InputExample`s.

Example:

>>> import tempfile, os
>>> from bert_tf.tasks import classification
>>> path = os.path.join(tempfile.mkdtemp(), "train.csv")
>>> _ = open(path, "w").write("review,stars\\ngreat film,pos\\ndull plot,neg\\n")
>>> examples = classification.read_table(path, text_column="review", label_column="stars")
>>> examples[0]
InputExample(guid='train.csv line 2', text_a='great film', text_b=None, label='pos')
>>> classification.label_list_from(examples)
['neg', 'pos']
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Sequence

import numpy as np

from bert_tf.tasks.features import ConversionStats, TaskDataError, encode_pairs


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example; `guid` says where it came from so errors can point at it."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None  # None for unlabelled (test) data


def read_table(
    path: str | os.PathLike,
    text_column: str,
    text_b_column: str | None = None,
    label_column: str | None = None,
) -> list[InputExample]:
    """Reads a CSV, TSV or JSONL file (by extension) with a header / named fields."""
    path = os.fspath(path)
    name = os.path.basename(path)
    extension = os.path.splitext(path)[1].lower()
    if not os.path.isfile(path):
        raise TaskDataError(f"data file not found: {path}")
    if extension in (".csv", ".tsv"):
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle, delimiter="," if extension == ".csv" else "\t")
            # The header is line 1; csv reports the line a record ends on.
            rows = [(reader.line_num, row) for row in reader]
            fields = reader.fieldnames or []
    elif extension in (".jsonl", ".json"):
        rows, fields = [], []
        with open(path, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise TaskDataError(f"{path} line {line_number} is not valid JSON: {error}") from None
                if not isinstance(row, dict):
                    raise TaskDataError(f"{path} line {line_number}: expected a JSON object per line")
                rows.append((line_number, row))
                fields = fields or list(row)
    else:
        raise TaskDataError(f"{path}: unknown extension {extension!r}; use .csv, .tsv or .jsonl")

    wanted = [c for c in (text_column, text_b_column, label_column) if c is not None]
    examples = []
    for line_number, row in rows:
        missing = [c for c in wanted if c not in row]
        if missing:
            raise TaskDataError(
                f"{path} line {line_number}: no column {missing[0]!r}; the columns are {sorted(row)} "
                f"(set --text_column/--text_b_column/--label_column)"
            )
        label = row[label_column] if label_column is not None else None
        examples.append(
            InputExample(
                guid=f"{name} line {line_number}",
                text_a=_text(row[text_column]),
                text_b=_text(row[text_b_column]) if text_b_column is not None else None,
                label=None if label is None else str(label),
            )
        )
    if not examples:
        raise TaskDataError(f"{path} has no examples (columns: {fields})")
    return examples


def _text(value) -> str:
    return "" if value is None else str(value)


def label_list_from(examples: Sequence[InputExample]) -> list[str]:
    """The sorted set of labels in the data (numerically when every label is an integer)."""
    labels = {str(example.label) for example in examples if example.label is not None}
    if not labels:
        raise TaskDataError("the training data has no labels; set --label_column")
    if all(label.lstrip("-").isdigit() for label in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def validate(examples: Sequence[InputExample], label_list: Sequence[str] | None) -> None:
    """Rejects empty texts and labels outside `label_list` (None = regression: floats)."""
    known = set(label_list) if label_list is not None else None
    for example in examples:
        if not example.text_a.strip():
            raise TaskDataError(f"{example.guid}: the text is empty; remove the row or fill it in")
        if example.text_b is not None and not example.text_b.strip():
            raise TaskDataError(f"{example.guid}: the second text is empty; remove the row or fill it in")
        if example.label is None:
            continue
        if known is None:
            try:
                float(example.label)
            except ValueError:
                raise TaskDataError(
                    f"{example.guid}: regression label {example.label!r} is not a number"
                ) from None
        elif str(example.label) not in known:
            raise TaskDataError(
                f"{example.guid}: label {example.label!r} is not one of the task's labels "
                f"{list(label_list)}; fix the row or train with a label set that includes it"
            )


def convert_examples(
    tokenizer,
    examples: Sequence[InputExample],
    label_list: Sequence[str] | None,
    max_seq_length: int,
) -> tuple[dict[str, np.ndarray], np.ndarray | None, ConversionStats]:
    """Features (`input_ids`, `input_mask`, `segment_ids`) and labels of the examples.

    Labels are class indices into `label_list` (int32), or floats when `label_list` is
    None (regression); None when the examples are unlabelled.
    """
    validate(examples, label_list)
    stats = ConversionStats()
    is_pair = any(example.text_b is not None for example in examples)
    features = encode_pairs(
        tokenizer,
        [example.text_a for example in examples],
        [example.text_b or "" for example in examples] if is_pair else None,
        max_seq_length,
        stats,
    )
    if any(example.label is None for example in examples):
        return features, None, stats
    if label_list is None:
        labels = np.asarray([float(example.label) for example in examples], dtype=np.float32)
    else:
        index = {label: i for i, label in enumerate(label_list)}
        labels = np.asarray([index[str(example.label)] for example in examples], dtype=np.int32)
    return features, labels, stats
