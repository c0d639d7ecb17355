"""Domain words for a released vocab: the words a corpus uses often that the vocab splits badly.

Continuing a released BERT on a domain's text (domain-adaptive pretraining: BioBERT,
FinBERT, LegalBERT; Gururangan et al. 2020) works better when the domain's frequent words
are single tokens instead of strings of pieces. The original release keeps placeholder
tokens for exactly this (the uncased vocab: 994 `[unusedN]` lines): replacing them keeps
every id and the embedding matrix's shape, so every tool still reads the checkpoint.

`words_to_add` ranks the corpus' words (split as the tokenizer splits them) by the pieces
they would save, count × (pieces - 1), among those seen at least `min_count` times that
the vocab cuts into two or more pieces or cannot spell at all ([UNK], counted as two);
`extend` writes them into the `[unusedN]` slots in order, and past the end of the vocab
only when asked (`append`).

Example:

>>> import os, tempfile
>>> from pipelines import vocab_extension
>>> vocab = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "k", "##u", "##be"]
>>> extended, placed = vocab_extension.extend(vocab, ["kube"], append=False)
>>> extended[1], placed
('kube', {1: 'kube'})
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bert_tf.errors import UsageError

UNUSED = re.compile(r"^\[unused\d+\]$")
# A word must be seen this often to earn a token (the vocab learner's threshold too).
MIN_COUNT = 10


def free_slots(vocab: Sequence[str]) -> list[int]:
    """The ids of the `[unusedN]` placeholders, in order."""
    return [index for index, token in enumerate(vocab) if UNUSED.match(token)]


def check_room(vocab: Sequence[str], count: int, append: bool, vocab_file: str) -> None:
    """Refuses `--extend_vocab=count` that would need rows beyond the vocab without `append`."""
    slots = len(free_slots(vocab))
    if append or count <= slots:
        return
    if not slots:
        raise UsageError(
            f"--extend_vocab={count}: the vocab {vocab_file} has no [unusedN] slots to put new words in; pass "
            "--extend_vocab_append to add them as rows after its last token (the embedding matrix grows)"
        )
    raise UsageError(
        f"--extend_vocab={count} is more than the {slots} [unusedN] slots of {vocab_file}; pass "
        f"--extend_vocab={slots} or less to keep every id and the embedding shape, or --extend_vocab_append to add "
        "the rest as new rows"
    )


def words_to_add(
    word_counts: dict[str, int], tokenizer, count: int, min_count: int = MIN_COUNT
) -> list[tuple]:
    """Up to `count` (word, times seen, pieces) that save the most pieces, best first.

    `word_counts`: the corpus' words as the tokenizer's basic step splits them
    (`pipelines.build_vocab.count_words`); `tokenizer`: a `BertTokenizer` of the vocab to extend.
    """
    import numpy as np

    candidates = sorted(word for word, seen in word_counts.items() if seen >= min_count)
    if not candidates:
        return []
    pieces = tokenizer.tokenize(candidates)  # [words, (pieces)]
    lengths = pieces.row_lengths().numpy()
    unknown = np.array([tokenizer.unk_id in row for row in pieces.numpy()], bool) if len(candidates) else []
    ranked = []
    for word, length, is_unknown in zip(candidates, lengths, unknown, strict=True):
        cost = 2 if is_unknown else int(length)
        if cost >= 2:
            ranked.append((word_counts[word] * (cost - 1), word, word_counts[word], cost))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return [(word, seen, cost) for _, word, seen, cost in ranked[:count]]


def extend(vocab: Sequence[str], words: Sequence[str], append: bool) -> tuple[list[str], dict[int, str]]:
    """(the vocab with `words` in its `[unusedN]` slots, then appended if `append`; {id: word})."""
    slots = free_slots(vocab)
    extended = list(vocab)
    placed: dict[int, str] = {}
    for index, word in enumerate(words):
        if index < len(slots):
            extended[slots[index]] = word
            placed[slots[index]] = word
        elif append:
            placed[len(extended)] = word
            extended.append(word)
        else:
            raise UsageError(
                f"{len(words)} words do not fit the {len(slots)} [unusedN] slots; pass append=True"
            )
    return extended, placed
