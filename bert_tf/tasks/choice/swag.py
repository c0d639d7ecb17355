"""SWAG-style multiple choice: a context and N candidate endings, one of them right.

Files are CSV as SWAG distributes them: a header naming `sent1` (the context), `sent2`
(the start of the ending, shared by the candidates), `ending0` … `ending{N-1}` and, in
labelled files, `label` (the index of the right ending). Each candidate becomes
`[CLS] sent1 [SEP] sent2 ending_i [SEP]` (`bert_tf.preprocessing.MultipleChoicePreprocessor`);
the model scores the N sequences and is trained with a softmax over them.

Example:

>>> import tempfile, os
>>> from bert_tf.tasks.choice import swag
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
from collections.abc import Iterator

from bert_tf import fileio
from bert_tf.tasks.features import TaskDataError


@dataclasses.dataclass
class ChoiceExample:
    guid: str
    context: str
    endings: list[str]  # full candidate continuations (sent2 + ending_i)
    label: int | None


def read_swag(path: str | os.PathLike) -> list[ChoiceExample]:
    """All examples of a SWAG CSV file (see `iter_swag`)."""
    return list(iter_swag(path))


def iter_swag(path: str | os.PathLike) -> Iterator[ChoiceExample]:
    """Streams a SWAG CSV file; a row without a context or ending, or with a bad label, is
    an error naming its line."""
    if not fileio.isfile(path):
        raise TaskDataError(f"multiple-choice file not found: {path}")
    name = fileio.basename(path)
    with fileio.open_text(path, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        ending_columns = sorted((f for f in fields if f.startswith("ending")), key=lambda f: int(f[6:] or 0))
        if "sent1" not in fields or len(ending_columns) < 2:
            raise TaskDataError(
                f"{path}: expected SWAG columns sent1, sent2, ending0, ending1, ... (label); got {fields}"
            )
        count = 0
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
            count += 1
            yield ChoiceExample(guid, row["sent1"], endings, label)
    if not count:
        raise TaskDataError(f"{path} has no examples")
