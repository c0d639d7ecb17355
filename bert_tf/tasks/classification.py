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
InputExample(guid='/.../train.csv line 2', text_a='great film', text_b=None, label='pos')
>>> classification.label_list_from(examples)
['neg', 'pos']
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Iterable, Iterator, Sequence

from bert_tf import fileio
from bert_tf.tasks.features import TaskDataError


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
    """All examples of a CSV, TSV or JSONL file (see `iter_table`)."""
    return list(iter_table(path, text_column, text_b_column, label_column))


def iter_table(
    path: str | os.PathLike,
    text_column: str,
    text_b_column: str | None = None,
    label_column: str | None = None,
) -> Iterator[InputExample]:
    """Streams a CSV, TSV or JSONL file (by extension) with a header / named fields."""
    path = os.fspath(path)
    extension = os.path.splitext(path)[1].lower()
    if not fileio.isfile(path):
        raise TaskDataError(f"data file not found: {path}")
    if extension not in (".csv", ".tsv", ".jsonl", ".json"):
        raise TaskDataError(f"{path}: unknown extension {extension!r}; use .csv, .tsv or .jsonl")
    wanted = [c for c in (text_column, text_b_column, label_column) if c is not None]
    count = 0
    for line_number, row in _rows(path, extension):
        missing = [c for c in wanted if c not in row]
        if missing:
            raise TaskDataError(
                f"{path} line {line_number}: no column {missing[0]!r}; the columns are {sorted(row)} "
                f"(set --text_column/--text_b_column/--label_column)"
            )
        label = row[label_column] if label_column is not None else None
        if label_column is not None and (label is None or not str(label).strip()):
            raise TaskDataError(
                f"{path} line {line_number}: no label in column {label_column!r}; fill it in or remove the row"
            )
        count += 1
        yield InputExample(
            guid=f"{path} line {line_number}",
            text_a=_text(row[text_column]),
            text_b=_text(row[text_b_column]) if text_b_column is not None else None,
            label=None if label is None else str(label),
        )
    if not count:
        raise TaskDataError(f"{path} has no examples")


def _rows(path: str, extension: str) -> Iterator[tuple[int, dict]]:
    """(line number, row) of a table, read as it goes."""
    if extension in (".csv", ".tsv"):
        with fileio.open_text(path, newline="") as handle:
            reader = csv.DictReader(handle, delimiter="," if extension == ".csv" else "\t")
            # The header is line 1; csv reports the line a record ends on.
            for row in reader:
                if None in row:  # more fields than the header names
                    raise TaskDataError(
                        f"{path} line {reader.line_num}: {len(reader.fieldnames or []) + len(row[None])} "
                        f"fields, the header has {len(reader.fieldnames or [])}; quote fields that hold "
                        "the delimiter"
                    )
                yield reader.line_num, row
        return
    with fileio.open_text(path) as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise TaskDataError(f"{path} line {line_number} is not valid JSON: {error}") from None
            if not isinstance(row, dict):
                raise TaskDataError(f"{path} line {line_number}: expected a JSON object per line")
            yield line_number, row


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


def validate(
    examples: Iterable[InputExample], label_list: Sequence[str] | None, regression: bool = False
) -> Iterator[InputExample]:
    """Passes the examples on, rejecting empty texts, labels outside `label_list` (not
    checked when it is None) and, for `regression`, labels that are not numbers."""
    known = set(label_list) if label_list is not None else None
    for example in examples:
        if not example.text_a.strip():
            raise TaskDataError(f"{example.guid}: the text is empty; remove the row or fill it in")
        if example.text_b is not None and not example.text_b.strip():
            raise TaskDataError(f"{example.guid}: the second text is empty; remove the row or fill it in")
        if example.label is None:
            yield example
            continue
        if regression:
            try:
                float(example.label)
            except ValueError:
                raise TaskDataError(
                    f"{example.guid}: regression label {example.label!r} is not a number"
                ) from None
        elif known is not None and str(example.label) not in known:
            raise TaskDataError(
                f"{example.guid}: label {example.label!r} is not one of the task's labels "
                f"{list(label_list)}; fix the row or train with a label set that includes it"
            )
        yield example
