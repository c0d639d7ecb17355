"""TFDS builders as task data: `squad/v1.1`, `squad/v2.0` and `conll2003`.

GLUE lives in `bert_tf.tasks.glue`. `data_dir` is passed to TFDS unchanged, so a
directory prepared once (`tfds build` or an earlier download) works offline.

Example:

>>> from bert_tf.tasks import tfds_sources
>>> tfds_sources.squad_version("squad/v2.0")
True
"""

from __future__ import annotations

from collections.abc import Iterator

from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.glue import load_tfds
from bert_tf.tasks.ner import Sentence


def _load(name: str, split: str, data_dir: str | None):
    import tensorflow_datasets as tfds

    dataset, info = load_tfds(name, split, data_dir)
    return tfds.as_numpy(dataset), info


def squad_version(name: str) -> bool:
    """Whether a TFDS SQuAD name is version 2.0 (unanswerable questions)."""
    return name.split("/")[-1].startswith("v2")


def squad_dataset(name: str, split: str, data_dir: str | None = None) -> list[dict]:
    """A TFDS SQuAD split as the `data` list of the official JSON files."""
    records, _ = _load(name, split, data_dir)
    articles: dict[str, dict[str, list]] = {}
    for record in records:
        title = record["title"].decode("utf-8")
        context = record["context"].decode("utf-8")
        answers = [
            {"text": text.decode("utf-8"), "answer_start": int(start)}
            for text, start in zip(record["answers"]["text"], record["answers"]["answer_start"], strict=False)
        ]
        qa = {
            "id": record["id"].decode("utf-8"),
            "question": record["question"].decode("utf-8"),
            "answers": answers,
        }
        if "is_impossible" in record:
            qa["is_impossible"] = bool(record["is_impossible"])
        articles.setdefault(title, {}).setdefault(context, []).append(qa)
    return [
        {
            "title": title,
            "paragraphs": [{"context": context, "qas": qas} for context, qas in contexts.items()],
        }
        for title, contexts in articles.items()
    ]


def conll_sentences(name: str, split: str, data_dir: str | None = None) -> list[Sentence]:
    """A TFDS CoNLL-2003 split as sentences with tag strings (see `iter_conll_sentences`)."""
    return list(iter_conll_sentences(name, split, data_dir))


def iter_conll_sentences(name: str, split: str, data_dir: str | None = None) -> Iterator[Sentence]:
    """Streams a TFDS CoNLL-2003 split as sentences with tag strings."""
    records, info = _load(name, split, data_dir)
    tag_names = info.features["ner"].feature.names
    for index, record in enumerate(records):
        words = [token.decode("utf-8") for token in record["tokens"]]
        tags = [tag_names[int(tag)] for tag in record["ner"]]
        if len(words) != len(tags):
            raise TaskDataError(
                f"{name} {split} record {index}: {len(words)} tokens but {len(tags)} ner tags"
            )
        if words:
            yield Sentence(words, tags, line=index)
