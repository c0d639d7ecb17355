"""Sentence and sentence-pair classification (and regression) data: examples → features.

Users' own data comes from CSV, TSV or JSON-lines files (chosen by extension) with
named columns; the label set is taken from the training data. GLUE readers
(`bert_tf.tasks.classification.glue`) produce the same `InputExample`s. Multi-label data
(`label_separator` given) holds a set of labels per example: a JSON list in JSONL, one
cell joined by the separator in CSV/TSV.

Example:

>>> import tempfile, os
>>> from bert_tf.tasks.classification import tables
>>> path = os.path.join(tempfile.mkdtemp(), "train.csv")
>>> _ = open(path, "w").write("review,stars\\ngreat film,pos\\ndull plot,neg\\n")
>>> examples = tables.read_table(path, text_column="review", label_column="stars")
>>> examples[0]
InputExample(guid='/.../train.csv line 2', text_a='great film', text_b=None, label='pos')
>>> tables.label_list_from(examples)
['neg', 'pos']
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence

from bert_tf import fileio
from bert_tf.tasks.features import TaskDataError


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example; `guid` says where it came from so errors can point at it."""

    guid: str
    text_a: str
    text_b: str | None = None
    # None for unlabelled (test) data; a tuple of label names for multi-label data.
    label: str | float | tuple[str, ...] | None = None


def read_table(
    path: str | os.PathLike,
    text_column: str,
    text_b_column: str | None = None,
    label_column: str | None = None,
    label_separator: str | None = None,
) -> list[InputExample]:
    """All examples of a CSV, TSV or JSONL file (see `iter_table`)."""
    return list(iter_table(path, text_column, text_b_column, label_column, label_separator))


def iter_table(
    path: str | os.PathLike,
    text_column: str,
    text_b_column: str | None = None,
    label_column: str | None = None,
    label_separator: str | None = None,
) -> Iterator[InputExample]:
    """Streams a CSV, TSV or JSONL file (by extension) with a header / named fields.

    With `label_separator` (multi-label data) each label is a tuple of names: a JSON list
    in JSONL, the cell split on the separator in CSV/TSV (an empty list or cell: no label
    applies). Without it, a label is one value and a JSON list is refused.
    """
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
        where = f"{path} line {line_number}"
        if label_column is not None:
            label = _label(label, label_column, label_separator, where, extension in (".csv", ".tsv"))
        count += 1
        yield InputExample(
            guid=where,
            text_a=_text(row[text_column]),
            text_b=_text(row[text_b_column]) if text_b_column is not None else None,
            label=label,
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
                row = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as error:  # its own "line 1" would be the line itself
                raise TaskDataError(
                    f"{path} line {line_number} is not valid JSON: {error.msg} at column {error.colno}"
                ) from None
            if not isinstance(row, dict):
                raise TaskDataError(f"{path} line {line_number}: expected a JSON object per line")
            yield line_number, row


def _text(value) -> str:
    return "" if value is None else str(value)


def _label(value, column: str, separator: str | None, where: str, joined: bool) -> str | tuple[str, ...]:
    """A row's label: one name, or (`separator` given: multi-label) a tuple of names."""
    if separator is None:
        if isinstance(value, list):
            raise TaskDataError(
                f"{where}: the label in column {column!r} is a list ({value!r}), but this task takes one "
                "label per example; for several labels per example use --task=multi_label"
            )
        if value is None or not str(value).strip():
            raise TaskDataError(f"{where}: no label in column {column!r}; fill it in or remove the row")
        return str(value)
    if joined:  # CSV/TSV: one cell, the labels joined by the separator
        value = str(value).split(separator) if value is not None and str(value).strip() else []
    elif not isinstance(value, list):
        raise TaskDataError(
            f"{where}: the label in column {column!r} is {value!r}, not a list; a multi_label example "
            'in JSONL takes a JSON list of labels, e.g. ["sports", "politics"] (or [] for none)'
        )
    names = tuple(dict.fromkeys(str(name).strip() for name in value))  # in order, each once
    if "" in names:
        raise TaskDataError(
            f"{where}: an empty label name in column {column!r} ({value!r}); remove it, or check "
            f"the separator (--label_separator={separator!r})"
        )
    return names


def label_names(label) -> tuple[str, ...]:
    """The label names of one example's label: a multi-label tuple, or one name."""
    return label if isinstance(label, tuple) else (str(label),)


def label_list_from(examples: Sequence[InputExample]) -> list[str]:
    """The sorted set of labels in the data (numerically when every label is an integer)."""
    labels = {
        name for example in examples if example.label is not None for name in label_names(example.label)
    }
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
        elif known is not None:
            unknown = [name for name in label_names(example.label) if name not in known]
            if unknown:
                raise TaskDataError(
                    f"{example.guid}: label {unknown[0]!r} is not one of the task's labels "
                    f"{list(label_list)}; fix the row or train with a label set that includes it"
                )
        yield example


# --- class weights ----------------------------------------------------------------------------


def count_labels(examples: Iterable[InputExample]) -> tuple[collections.Counter, int]:
    """(examples per label name, number of labelled examples)."""
    counts: collections.Counter = collections.Counter()
    total = 0
    for example in examples:
        if example.label is not None:
            counts.update(label_names(example.label))
            total += 1
    return counts, total


def class_weights(
    spec, label_list: Sequence[str], counts: Mapping[str, int], num_examples: int, multi_label: bool = False
) -> list[float]:
    """One positive weight per label of `label_list`, from `spec`:

    - "balanced": scikit-learn's `compute_class_weight("balanced")`, n_samples /
      (n_classes * count) from the training counts; multi-label: each label's binary
      "balanced" weights with its negatives at 1, i.e. negatives / positives (the
      `pos_weight` of PyTorch's BCEWithLogitsLoss);
    - a list (or a comma-separated string: the command line's) of one weight per label, in
      label order;
    - a dict of label name (or id) -> weight, others 1.0 (Keras' `class_weight`).
    """
    names = list(label_list)
    if isinstance(spec, str) and spec.strip().lower() == "balanced":
        missing = [name for name in names if not counts.get(name)]
        if missing:
            raise TaskDataError(
                f"class weights 'balanced': label {missing[0]!r} has no training example, so its "
                "weight is undefined; give the weights as a list, one per label"
            )
        if not multi_label:
            return [num_examples / (len(names) * counts[name]) for name in names]
        everywhere = [name for name in names if counts[name] >= num_examples]
        if everywhere:
            raise TaskDataError(
                f"class weights 'balanced': label {everywhere[0]!r} is on every training example, "
                "which would weigh its positives 0; give the weights as a list, one per label"
            )
        return [(num_examples - counts[name]) / counts[name] for name in names]
    if isinstance(spec, Mapping):
        weights = dict.fromkeys(names, 1.0)
        for key, value in spec.items():
            name = (
                names[key]
                if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(names)
                else key
            )
            if name not in weights:
                raise TaskDataError(
                    f"class weights: {key!r} is not one of the labels {names} (nor an id into them)"
                )
            weights[name] = value
        values = [weights[name] for name in names]
    elif isinstance(spec, str):
        values = [part.strip() for part in spec.split(",")]
    else:
        values = list(spec)
    try:
        values = [float(value) for value in values]
    except (TypeError, ValueError):
        raise TaskDataError(
            f"class weights {spec!r}: give 'balanced' or numbers, one per label of {names}"
        ) from None
    if len(values) != len(names):
        raise TaskDataError(
            f"class weights: {len(values)} given for {len(names)} labels {names}; give one per label, "
            "in that order (or 'balanced')"
        )
    bad = [
        (name, value)
        for name, value in zip(names, values, strict=True)
        if not value > 0 or value == float("inf")
    ]
    if bad:
        raise TaskDataError(
            f"class weights: label {bad[0][0]!r} has weight {bad[0][1]}; weights must be positive numbers"
        )
    return values
