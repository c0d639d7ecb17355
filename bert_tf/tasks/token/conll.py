"""Named-entity recognition on CoNLL-2003-format files (BIO/IOB tags).

One word per line with its tag in the last column (`EU NNP B-NP B-ORG`), a blank line
between sentences, `-DOCSTART-` lines ignored. The features (the tag on each word's
first piece, -1 on the rest) are `bert_tf.preprocessing.TokenTaggerPreprocessor`'s.
Predictions are read back at each word's first piece, so they are per word, as seqeval
and conlleval score them.

Example:

>>> import tempfile, os
>>> from bert_tf.tasks.token import conll
>>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
>>> _ = open(path, "w").write("-DOCSTART- -X- O O\\n\\nEU NNP B-NP B-ORG\\nrejects VBZ B-VP O\\n")
>>> sentences = conll.read_conll(path)
>>> sentences[0].words, sentences[0].tags
(['EU', 'rejects'], ['B-ORG', 'O'])
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence

import numpy as np

from bert_tf import fileio
from bert_tf.tasks import tfds_sources
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.token import entities as ner_entities


@dataclasses.dataclass
class Sentence:
    words: list[str]
    tags: list[str] | None  # None for unlabelled data
    line: int  # line number of the first word, for error messages


def read_conll(path: str | os.PathLike, labelled: bool = True) -> list[Sentence]:
    """All sentences of a CoNLL file (see `iter_conll`)."""
    return list(iter_conll(path, labelled))


def iter_conll(path: str | os.PathLike, labelled: bool = True) -> Iterator[Sentence]:
    """Streams the sentences of a CoNLL file; a line with a word but no tag column is an error."""
    if not fileio.isfile(path):
        raise TaskDataError(f"CoNLL file not found: {path}")
    words: list[str] = []
    tags: list[str] = []
    first_line = 0
    count = 0

    with fileio.open_text(path) as handle:
        for line_number, line in enumerate(handle, start=1):
            columns = line.split()
            if not columns or columns[0] == "-DOCSTART-":
                if words:
                    count += 1
                    yield Sentence(list(words), list(tags) if labelled else None, first_line)
                    words.clear()
                    tags.clear()
                continue
            if labelled and len(columns) < 2:
                raise TaskDataError(
                    f"{path} line {line_number}: expected 'word ... TAG' (at least 2 columns), "
                    f"got {line.rstrip()!r}"
                )
            if labelled:
                tag = columns[-1]
                if tag != "O" and not (len(tag) > 2 and tag[0] in "BIES" and tag[1] == "-"):
                    raise TaskDataError(
                        f"{path} line {line_number}: tag {tag!r} is not O or a B-/I-/E-/S- tag"
                    )
                tags.append(tag)
            if not words:
                first_line = line_number
            words.append(columns[0])
    if words:
        count += 1
        yield Sentence(list(words), list(tags) if labelled else None, first_line)
    if not count:
        raise TaskDataError(f"{path} has no sentences")


def label_list_from(sentences: Sequence[Sentence]) -> list[str]:
    """Tags of the training data, "O" first, then sorted."""
    tags = {tag for sentence in sentences for tag in (sentence.tags or [])}
    if not tags:
        raise TaskDataError("the training data has no tags")
    return ["O", *sorted(tags - {"O"})] if "O" in tags else sorted(tags)


def word_predictions(word_logits: Sequence[np.ndarray], label_list: Sequence[str]) -> list[list[str]]:
    """Per-word tags from each sentence's word logits [words, labels] (read at each word's
    first piece), by the SavedModel's rule (`ner_entities.word_tag_ids`); words cut off by
    max_seq_length (their row is NaN) get "O"."""
    rows = [np.asarray(logits, np.float64).reshape(-1, len(label_list)) for logits in word_logits]
    flat = np.concatenate(rows) if rows else np.zeros([0, len(label_list)])
    cut = ~np.isfinite(flat).all(axis=1)
    tags = ner_entities.word_tag_ids(np.where(cut[:, None], 0.0, flat)).numpy()
    names = np.asarray([*label_list, "O"], dtype=object)
    tags = names[np.where(cut, len(label_list), tags)].tolist()
    splits = np.cumsum([0, *(len(row) for row in rows)])
    return [tags[splits[i] : splits[i + 1]] for i in range(len(rows))]


def write_predictions(
    path: str | os.PathLike, sentences: Sequence[Sentence], predictions: Sequence[Sequence[str]]
) -> None:
    """CoNLL output, `word gold predicted` per line (what conlleval reads); gold is "O"
    when the data had no tags."""
    with fileio.writing(path) as handle:
        for sentence, predicted in zip(sentences, predictions, strict=True):
            gold = sentence.tags or ["O"] * len(sentence.words)
            for word, gold_tag, tag in zip(sentence.words, gold, predicted, strict=True):
                handle.write(f"{word} {gold_tag} {tag}\n")
            handle.write("\n")


def iter_tfds_sentences(name: str, split: str, data_dir: str | None = None) -> Iterator[Sentence]:
    """Streams a TFDS CoNLL-2003 split (`conll2003`) as sentences with tag strings."""
    records, info = tfds_sources.load_numpy(name, split, data_dir)
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
