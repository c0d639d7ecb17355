"""Named-entity recognition on CoNLL-2003-format files (BIO/IOB tags).

One word per line with its tag in the last column (`EU NNP B-NP B-ORG`), a blank line
between sentences, `-DOCSTART-` lines ignored. Each word is word-piece tokenized; its
tag is the label of its first piece, and the other pieces (and `[CLS]`/`[SEP]`/padding)
get label -1, which the loss and metrics ignore. Predictions are read back at each
word's first piece, so they are per word, as seqeval and conlleval score them.

Example:

>>> import tempfile, os
>>> from bert_tf.tasks import ner
>>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
>>> _ = open(path, "w").write("-DOCSTART- -X- O O\\n\\nEU NNP B-NP B-ORG\\nrejects VBZ B-VP O\\n")
>>> sentences = ner.read_conll(path)
>>> sentences[0].words, sentences[0].tags
(['EU', 'rejects'], ['B-ORG', 'O'])
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import numpy as np

from bert_tf import fileio
from bert_tf.tasks.features import ConversionStats, TaskDataError, tokenize_texts

IGNORE_LABEL = -1


@dataclasses.dataclass
class Sentence:
    words: list[str]
    tags: list[str] | None  # None for unlabelled data
    line: int  # line number of the first word, for error messages


def read_conll(path: str | os.PathLike, labelled: bool = True) -> list[Sentence]:
    """Sentences of a CoNLL file; a line with a word but no tag column is an error."""
    if not os.path.isfile(path):
        raise TaskDataError(f"CoNLL file not found: {path}")
    sentences: list[Sentence] = []
    words: list[str] = []
    tags: list[str] = []
    first_line = 0

    def flush() -> None:
        if words:
            sentences.append(Sentence(list(words), list(tags) if labelled else None, first_line))
            words.clear()
            tags.clear()

    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            columns = line.split()
            if not columns:
                flush()
                continue
            if columns[0] == "-DOCSTART-":
                flush()
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
    flush()
    if not sentences:
        raise TaskDataError(f"{path} has no sentences")
    return sentences


def label_list_from(sentences: Sequence[Sentence]) -> list[str]:
    """Tags of the training data, "O" first, then sorted."""
    tags = {tag for sentence in sentences for tag in (sentence.tags or [])}
    if not tags:
        raise TaskDataError("the training data has no tags")
    return ["O", *sorted(tags - {"O"})] if "O" in tags else sorted(tags)


@dataclasses.dataclass
class NerFeatures:
    arrays: dict[str, np.ndarray]  # input_ids, input_mask, segment_ids, label_ids [n, seq]
    first_piece: list[list[int | None]]  # per sentence and word: position of its first piece
    stats: ConversionStats


def convert_sentences(
    tokenizer,
    sentences: Sequence[Sentence],
    label_list: Sequence[str],
    max_seq_length: int,
) -> NerFeatures:
    """One feature per sentence; words beyond `max_seq_length` are cut (counted)."""
    index = {tag: i for i, tag in enumerate(label_list)}
    all_words = [word for sentence in sentences for word in sentence.words]
    all_pieces = iter(tokenize_texts(tokenizer, all_words))
    stats = ConversionStats(num_examples=len(sentences))
    columns: dict[str, list] = {"input_ids": [], "input_mask": [], "segment_ids": [], "label_ids": []}
    first_piece: list[list[int | None]] = []
    for sentence in sentences:
        input_ids, label_ids, positions = [tokenizer.cls_id], [IGNORE_LABEL], []
        truncated = False
        for word_index, word in enumerate(sentence.words):
            # A word of only removed characters (control chars) still needs a position.
            pieces = next(all_pieces) or [tokenizer.unk_id]
            if truncated or len(input_ids) + len(pieces) > max_seq_length - 1:
                truncated = True
                positions.append(None)
                continue
            positions.append(len(input_ids))
            input_ids.extend(pieces)
            label = IGNORE_LABEL
            if sentence.tags is not None:
                tag = sentence.tags[word_index]
                if tag not in index:
                    raise TaskDataError(
                        f"sentence at line {sentence.line}: tag {tag!r} of word {word!r} is not one "
                        f"of the task's labels {list(label_list)}"
                    )
                label = index[tag]
            label_ids.extend([label] + [IGNORE_LABEL] * (len(pieces) - 1))
        input_ids.append(tokenizer.sep_id)
        label_ids.append(IGNORE_LABEL)
        stats.num_truncated += int(truncated)
        padding = max_seq_length - len(input_ids)
        columns["input_ids"].append(input_ids + [tokenizer.pad_id] * padding)
        columns["input_mask"].append([1] * len(input_ids) + [0] * padding)
        columns["segment_ids"].append([0] * max_seq_length)
        columns["label_ids"].append(label_ids + [IGNORE_LABEL] * padding)
        first_piece.append(positions)
    stats.num_features = len(sentences)
    arrays = {
        name: np.asarray(values, dtype=np.int32).reshape(-1, max_seq_length)
        for name, values in columns.items()
    }
    return NerFeatures(arrays, first_piece, stats)


def word_predictions(
    logits: np.ndarray, first_piece: Sequence[Sequence[int | None]], label_list: Sequence[str]
) -> list[list[str]]:
    """Per-word tags from per-piece logits [n, seq, labels]; cut-off words get "O"."""
    best = np.asarray(logits).argmax(axis=-1)
    return [
        [label_list[best[row, position]] if position is not None else "O" for position in positions]
        for row, positions in enumerate(first_piece)
    ]


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
