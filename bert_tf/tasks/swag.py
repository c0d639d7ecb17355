"""SWAG-style multiple choice: a context and N candidate endings, one of them right.

Files are CSV as SWAG distributes them: a header naming `sent1` (the context), `sent2`
(the start of the ending, shared by the candidates), `ending0` … `ending{N-1}` and, in
labelled files, `label` (the index of the right ending). Each candidate becomes
`[CLS] sent1 [SEP] sent2 ending_i [SEP]`; the model scores the N sequences and is trained
with a softmax over them.

Example:

>>> import tempfile, os
>>> from bert_tf.tasks import swag
>>> path = os.path.join(tempfile.mkdtemp(), "val.csv")
>>> _ = open(path, "w").write("sent1,sent2,ending0,ending1,label\\nShe opens the door.,She,walks in.,flies.,0\\n")
>>> example = swag.read_swag(path)[0]
>>> example.context, example.endings, example.label
('She opens the door.', ['She walks in.', 'She flies.'], 0)
"""

from __future__ import annotations

import csv
import dataclasses
import os
from collections.abc import Sequence

import numpy as np

from bert_tf.tasks.features import ConversionStats, TaskDataError, encode_pairs


@dataclasses.dataclass
class ChoiceExample:
    guid: str
    context: str
    endings: list[str]  # full candidate continuations (sent2 + ending_i)
    label: int | None


def read_swag(path: str | os.PathLike) -> list[ChoiceExample]:
    if not os.path.isfile(path):
        raise TaskDataError(f"multiple-choice file not found: {path}")
    name = os.path.basename(os.fspath(path))
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        ending_columns = sorted((f for f in fields if f.startswith("ending")), key=lambda f: int(f[6:] or 0))
        if "sent1" not in fields or len(ending_columns) < 2:
            raise TaskDataError(
                f"{path}: expected SWAG columns sent1, sent2, ending0, ending1, ... (label); got {fields}"
            )
        examples = []
        for row in reader:
            guid = f"{name} line {reader.line_num}"
            start = (row.get("sent2") or "").strip()
            endings = [f"{start} {row[column] or ''}".strip() for column in ending_columns]
            if not (row["sent1"] or "").strip() or not all(endings):
                raise TaskDataError(f"{guid}: empty context or ending; fill it in or remove the row")
            label = None
            if (row.get("label") or "").strip():
                try:
                    label = int(row["label"])
                except ValueError:
                    label = -1
                if not 0 <= label < len(ending_columns):
                    raise TaskDataError(
                        f"{guid}: label {row['label']!r} is not an ending index 0..{len(ending_columns) - 1}"
                    )
            examples.append(ChoiceExample(guid, row["sent1"], endings, label))
    if not examples:
        raise TaskDataError(f"{path} has no examples")
    return examples


def convert_examples(
    tokenizer, examples: Sequence[ChoiceExample], max_seq_length: int
) -> tuple[dict[str, np.ndarray], np.ndarray | None, ConversionStats]:
    """Features [n, choices, seq] and labels [n] (None when unlabelled)."""
    num_choices = len(examples[0].endings)
    for example in examples:
        if len(example.endings) != num_choices:
            raise TaskDataError(f"{example.guid}: {len(example.endings)} endings, expected {num_choices}")
    stats = ConversionStats()
    contexts = [example.context for example in examples for _ in range(num_choices)]
    endings = [ending for example in examples for ending in example.endings]
    truncated: list[bool] = []
    flat = encode_pairs(tokenizer, contexts, endings, max_seq_length, truncated_rows=truncated)
    # Count examples (an example is truncated when any of its choices is), not sequences.
    stats.num_examples = stats.num_features = len(examples)
    stats.num_truncated = int(np.asarray(truncated).reshape(-1, num_choices).any(axis=1).sum())
    features = {
        name: array.reshape(len(examples), num_choices, max_seq_length) for name, array in flat.items()
    }
    if any(example.label is None for example in examples):
        return features, None, stats
    return features, np.asarray([example.label for example in examples], dtype=np.int32), stats
