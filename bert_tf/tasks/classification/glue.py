"""GLUE: the TSV files as distributed, the TFDS `glue/*` datasets, and submission files.

Each task knows its files, columns, labels and metrics. The TSVs are read as the
original run_classifier.py reads them (tab-separated, no quoting). Labels are kept as
the strings GLUE uses in its files and submissions ("0"/"1", "entailment", ...), so a
model trained from the TSVs and one trained from TFDS write the same submission.

Example:

>>> from bert_tf.tasks.classification import glue
>>> glue.GLUE_TASKS["mrpc"].metrics, glue.GLUE_TASKS["mrpc"].label_list
(('accuracy', 'f1'), ('0', '1'))
"""

from __future__ import annotations

import csv
import dataclasses
import os
import sys
from collections.abc import Iterator, Sequence

import numpy as np

from bert_tf import fileio
from bert_tf.tasks.classification.tables import InputExample
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.tfds_sources import load_tfds

_NLI = ("entailment", "not_entailment")


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """Layout of one GLUE task's TSV files and how it is scored."""

    name: str
    label_list: tuple[str, ...] | None  # None: regression (STS-B)
    metrics: tuple[str, ...]
    text_a: int  # column of the first text in train/dev
    text_b: int | None  # column of the second text, None for single sentences
    label: int  # column of the label in train/dev
    test_text_a: int
    test_text_b: int | None
    has_header: bool = True  # CoLA's train/dev files have no header (its test file has)
    eval_splits: tuple[str, ...] = ("dev",)
    test_splits: tuple[str, ...] = ("test",)
    submission_names: tuple[str, ...] = ()
    tfds_columns: tuple[str, ...] = ()
    tfds_eval_splits: tuple[str, ...] = ("validation",)
    tfds_test_splits: tuple[str, ...] = ("test",)

    @property
    def is_regression(self) -> bool:
        return self.label_list is None


# Column numbers are 0-based; -1 is the last column (the labels of STS-B and MNLI).
# fmt: off
GLUE_TASKS: dict[str, GlueTask] = {
    task.name: task
    for task in (
        GlueTask("cola", label_list=("0", "1"), metrics=("matthews_corrcoef",),
                 text_a=3, text_b=None, label=1, test_text_a=1, test_text_b=None, has_header=False,
                 submission_names=("CoLA",), tfds_columns=("sentence",)),
        GlueTask("sst2", label_list=("0", "1"), metrics=("accuracy",),
                 text_a=0, text_b=None, label=1, test_text_a=1, test_text_b=None,
                 submission_names=("SST-2",), tfds_columns=("sentence",)),
        GlueTask("mrpc", label_list=("0", "1"), metrics=("accuracy", "f1"),
                 text_a=3, text_b=4, label=0, test_text_a=3, test_text_b=4,
                 submission_names=("MRPC",), tfds_columns=("sentence1", "sentence2")),
        GlueTask("stsb", label_list=None, metrics=("pearson", "spearman"),
                 text_a=7, text_b=8, label=-1, test_text_a=7, test_text_b=8,
                 submission_names=("STS-B",), tfds_columns=("sentence1", "sentence2")),
        GlueTask("qqp", label_list=("0", "1"), metrics=("accuracy", "f1"),
                 text_a=3, text_b=4, label=5, test_text_a=1, test_text_b=2,
                 submission_names=("QQP",), tfds_columns=("question1", "question2")),
        GlueTask("mnli", label_list=("contradiction", "entailment", "neutral"), metrics=("accuracy",),
                 text_a=8, text_b=9, label=-1, test_text_a=8, test_text_b=9,
                 eval_splits=("dev_matched", "dev_mismatched"),
                 test_splits=("test_matched", "test_mismatched"),
                 submission_names=("MNLI-m", "MNLI-mm"), tfds_columns=("premise", "hypothesis"),
                 tfds_eval_splits=("validation_matched", "validation_mismatched"),
                 tfds_test_splits=("test_matched", "test_mismatched")),
        GlueTask("qnli", label_list=_NLI, metrics=("accuracy",),
                 text_a=1, text_b=2, label=3, test_text_a=1, test_text_b=2,
                 submission_names=("QNLI",), tfds_columns=("question", "sentence")),
        GlueTask("rte", label_list=_NLI, metrics=("accuracy",),
                 text_a=1, text_b=2, label=3, test_text_a=1, test_text_b=2,
                 submission_names=("RTE",), tfds_columns=("sentence1", "sentence2")),
        GlueTask("wnli", label_list=("0", "1"), metrics=("accuracy",),
                 text_a=1, text_b=2, label=3, test_text_a=1, test_text_b=2,
                 submission_names=("WNLI",), tfds_columns=("sentence1", "sentence2")),
    )
}
# fmt: on
# Names as GLUE and the original scripts spell them.
_ALIASES = {"sst-2": "sst2", "sts-b": "stsb"}


def get_task(name: str) -> GlueTask:
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in GLUE_TASKS:
        raise TaskDataError(f"unknown GLUE task {name!r}; use one of {sorted(GLUE_TASKS)}")
    return GLUE_TASKS[key]


# --- TSV files ---------------------------------------------------------------------------


def read_tsv(path: str | os.PathLike) -> Iterator[list[str]]:
    """The rows of a TSV file, read as it goes."""
    if not fileio.isfile(path):
        raise TaskDataError(f"GLUE file not found: {path}")
    csv.field_size_limit(sys.maxsize)
    with fileio.open_text(path, newline="") as handle:
        yield from csv.reader(handle, delimiter="\t", quotechar=None)


def read_examples(task: GlueTask | str, path: str | os.PathLike, labelled: bool = True) -> list[InputExample]:
    """All examples of a GLUE file (see `iter_examples`)."""
    return list(iter_examples(task, path, labelled))


def iter_examples(
    task: GlueTask | str, path: str | os.PathLike, labelled: bool = True, skipped: list | None = None
) -> Iterator[InputExample]:
    """Streams a train/dev file (`labelled=True`) or a test file of a GLUE task.

    Rows with too few columns are an error naming the line, except in QQP, whose
    distributed train file has a few broken rows that the community skips: their line
    numbers are appended to `skipped`.
    """
    task = get_task(task) if isinstance(task, str) else task
    if not fileio.isfile(path):
        raise TaskDataError(f"GLUE file not found: {path}")
    rows = read_tsv(path)
    name = fileio.basename(path)
    # Test files always have a header; train/dev files have one except CoLA's.
    skip_header = task.has_header or not labelled
    a_col, b_col = (task.text_a, task.text_b) if labelled else (task.test_text_a, task.test_text_b)
    needed = max(c for c in (a_col, b_col, task.label if labelled else 0) if c is not None and c >= 0) + 1
    for line_number, row in enumerate(rows, start=1):
        if skip_header and line_number == 1:
            continue
        if len(row) < needed or (labelled and task.label < 0 and len(row) < needed + 1):
            if task.name == "qqp":
                if skipped is not None:
                    skipped.append(line_number)
                continue
            raise TaskDataError(
                f"{path} line {line_number}: {len(row)} columns, {task.name} needs at least {needed}; "
                f"is this the {task.name} {'train/dev' if labelled else 'test'} file?"
            )
        # Test rows are submitted by their index (first column).
        guid = f"{name} line {line_number}" if labelled else row[0]
        yield InputExample(
            guid=guid,
            text_a=row[a_col],
            text_b=row[b_col] if b_col is not None else None,
            label=row[task.label] if labelled else None,
        )


def split_files(task: GlueTask | str, data_dir: str | os.PathLike) -> dict[str, str]:
    """split name → path of the distributed files in a GLUE task directory."""
    task = get_task(task) if isinstance(task, str) else task
    splits = ("train", *task.eval_splits, *task.test_splits)
    return {split: os.path.join(os.fspath(data_dir), f"{split}.tsv") for split in splits}


# --- TFDS ---------------------------------------------------------------------------------


def tfds_examples(task: GlueTask | str, split: str, data_dir: str | None = None) -> list[InputExample]:
    """All examples of a TFDS `glue/<task>` split (see `iter_tfds_examples`)."""
    return list(iter_tfds_examples(task, split, data_dir))


def iter_tfds_examples(
    task: GlueTask | str, split: str, data_dir: str | None = None
) -> Iterator[InputExample]:
    """Streams a split of TFDS `glue/<task>` as examples with GLUE's label strings."""
    import tensorflow_datasets as tfds

    task = get_task(task) if isinstance(task, str) else task
    dataset, info = load_tfds(f"glue/{task.name}", split, data_dir)
    label_names = None if task.is_regression else info.features["label"].names
    for record in tfds.as_numpy(dataset):
        texts = [record[column].decode("utf-8") for column in task.tfds_columns]
        label = _glue_label(task, record["label"], label_names)
        yield InputExample(
            guid=str(int(record["idx"])),
            text_a=texts[0],
            text_b=texts[1] if len(texts) > 1 else None,
            label=label,
        )


def _glue_label(task: GlueTask, value, label_names: Sequence[str] | None) -> str | None:
    if task.is_regression:
        return None if value < 0 else str(float(value))
    value = int(value)
    if value < 0:  # TFDS marks the unlabelled test splits with -1
        return None
    # TFDS orders 0/1 tasks so that the index is GLUE's label; the NLI tasks use names.
    return str(value) if task.label_list == ("0", "1") else label_names[value]


# --- submissions --------------------------------------------------------------------------


def write_submission(
    path: str | os.PathLike,
    task: GlueTask | str,
    examples: Sequence[InputExample],
    predictions: np.ndarray,
) -> None:
    """Writes a GLUE leaderboard file: `index<TAB>prediction` with GLUE's label strings.

    `predictions` are class indices (or STS-B scores, clipped to GLUE's [0, 5]).
    """
    task = get_task(task) if isinstance(task, str) else task
    predictions = np.asarray(predictions)
    with fileio.writing(path) as handle:
        handle.write("index\tprediction\n")
        for position, (example, prediction) in enumerate(zip(examples, predictions, strict=True)):
            index = example.guid if example.guid.isdigit() else str(position)
            if task.is_regression:
                value = f"{float(np.clip(prediction, 0.0, 5.0)):.3f}"
            else:
                value = task.label_list[int(prediction)]
            handle.write(f"{index}\t{value}\n")
