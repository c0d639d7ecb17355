"""SQuAD v1.1 / v2.0: reading the JSON files and the original sliding-window features.

The preprocessing is the original run_squad.py's: the context is split on whitespace
into "doc tokens" (answer character offsets become doc-token offsets), each doc token
is word-piece tokenized (keeping the piece → doc-token map), questions are cut to
`max_query_length` pieces, and long contexts become several windows `doc_stride`
pieces apart, each `[CLS] question [SEP] window [SEP]` of `max_seq_length`. A piece
that appears in several windows is scored only in the window where it has the most
context. Training answers whose text is not found in the context are skipped and
counted; a training answer outside a window points that window at `[CLS]` (0, 0), as
does an unanswerable (v2.0) question.

Example:

>>> from bert_tf.tasks import squad
>>> data = [{"title": "t", "paragraphs": [{"context": "Paris is in France.", "qas": [
...     {"id": "q1", "question": "Where is Paris?",
...      "answers": [{"text": "France", "answer_start": 12}]}]}]}]
>>> examples, skipped = squad.read_examples(data, is_training=True)
>>> examples[0].doc_tokens, examples[0].start_position, examples[0].end_position, skipped
(['Paris', 'is', 'in', 'France.'], 3, 3, 0)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping, Sequence

import numpy as np

from bert_tf.tasks.features import ConversionStats, TaskDataError, tokenize_texts

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SquadExample:
    qas_id: str
    question_text: str
    doc_tokens: list[str]
    orig_answer_text: str | None = None
    start_position: int | None = None  # doc-token index of the answer's first word
    end_position: int | None = None
    is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
    """One window of one example, with what post-processing needs to map back."""

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list[str]  # the word pieces of the window, [CLS] ... [SEP] ... [SEP]
    token_to_orig_map: dict[int, int]  # window position → doc-token index (context only)
    token_is_max_context: dict[int, bool]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    start_position: int = 0
    end_position: int = 0
    is_impossible: bool = False


def load_dataset(path: str | os.PathLike) -> list[dict]:
    """The `data` list of a SQuAD JSON file."""
    if not os.path.isfile(path):
        raise TaskDataError(f"SQuAD file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        try:
            content = json.load(handle)
        except json.JSONDecodeError as error:
            raise TaskDataError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(content, dict) or "data" not in content:
        raise TaskDataError(f"{path} has no 'data' list; is it a SQuAD file?")
    return content["data"]


def _is_whitespace(char: str) -> bool:
    # U+202F (narrow no-break space) occurs in SQuAD contexts and counts as a split.
    return char in " \t\r\n" or ord(char) == 0x202F


def read_examples(
    dataset: Sequence[Mapping],
    is_training: bool,
    version_2_with_negative: bool = False,
) -> tuple[list[SquadExample], int]:
    """Examples of a SQuAD `data` list and the number of training answers skipped."""
    examples, skipped = [], 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            doc_tokens: list[str] = []
            char_to_word_offset: list[int] = []
            previous_is_whitespace = True
            for char in context:
                if _is_whitespace(char):
                    previous_is_whitespace = True
                else:
                    if previous_is_whitespace:
                        doc_tokens.append(char)
                    else:
                        doc_tokens[-1] += char
                    previous_is_whitespace = False
                char_to_word_offset.append(len(doc_tokens) - 1)

            for qa in paragraph["qas"]:
                example = SquadExample(qa["id"], qa["question"], doc_tokens)
                if not qa["question"].strip():
                    raise TaskDataError(f"SQuAD question {qa['id']!r} is empty")
                if is_training:
                    example.is_impossible = bool(version_2_with_negative and qa.get("is_impossible", False))
                    if not example.is_impossible:
                        answers = qa.get("answers", [])
                        if len(answers) != 1:
                            raise TaskDataError(
                                f"SQuAD training question {qa['id']!r} has {len(answers)} answers; "
                                "training needs exactly one (mark unanswerable ones is_impossible "
                                "and pass version_2_with_negative)"
                            )
                        answer = answers[0]
                        offset, text = answer["answer_start"], answer["text"]
                        if not text or offset < 0 or offset + len(text) > len(char_to_word_offset):
                            skipped += 1
                            continue
                        start = char_to_word_offset[offset]
                        end = char_to_word_offset[offset + len(text) - 1]
                        # Only keep answers whose text really is in the document: a
                        # misaligned answer_start would teach the model a wrong span.
                        actual = " ".join(doc_tokens[start : end + 1])
                        if " ".join(text.split()) not in actual:
                            logger.warning("answer %r not found in context of %s; skipped", text, qa["id"])
                            skipped += 1
                            continue
                        example.orig_answer_text = text
                        example.start_position, example.end_position = start, end
                    else:
                        example.orig_answer_text = ""
                        example.start_position = example.end_position = -1
                examples.append(example)
    return examples, skipped


def _improve_answer_span(doc_piece_ids, start, end, answer_piece_ids) -> tuple[int, int]:
    """The smallest piece span inside [start, end] that equals the answer's own pieces.

    An answer "1895" in the word "(1895-1943)." maps to the whole word's pieces; searching
    for the answer's tokenization narrows it to the pieces of "1895".
    """
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if doc_piece_ids[new_start : new_end + 1] == answer_piece_ids:
                return new_start, new_end
    return start, end


def _max_context(spans: Sequence[tuple[int, int]], span_index: int, position: int) -> bool:
    """Whether window `span_index` gives `position` the most context (left/right)."""
    best_score, best_index = None, None
    for index, (span_start, span_length) in enumerate(spans):
        span_end = span_start + span_length - 1
        if not span_start <= position <= span_end:
            continue
        score = min(position - span_start, span_end - position) + 0.01 * span_length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index == span_index


def convert_examples(
    tokenizer,
    examples: Sequence[SquadExample],
    is_training: bool,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
) -> tuple[list[SquadFeature], ConversionStats]:
    """Sliding-window features of SQuAD examples (see the module docstring)."""
    vocab = tokenizer.vocab
    cls_id, sep_id, pad_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
    stats = ConversionStats(num_examples=len(examples))
    questions = tokenize_texts(tokenizer, [example.question_text for example in examples])
    # Each distinct context is tokenized once, word by word, all in one batch.
    unique: dict[int, list[str]] = {}
    for example in examples:
        unique.setdefault(id(example.doc_tokens), example.doc_tokens)
    all_words = iter(tokenize_texts(tokenizer, [word for words in unique.values() for word in words]))
    contexts = {key: [next(all_words) for _ in words] for key, words in unique.items()}
    answers = tokenize_texts(tokenizer, [example.orig_answer_text or "" for example in examples])

    features: list[SquadFeature] = []
    for example_index, example in enumerate(examples):
        query_ids = questions[example_index][:max_query_length]
        stats.num_truncated += int(len(questions[example_index]) > max_query_length)
        tok_to_orig, orig_to_tok, doc_ids = [], [], []
        for word_index, word_pieces in enumerate(contexts[id(example.doc_tokens)]):
            orig_to_tok.append(len(doc_ids))
            tok_to_orig.extend([word_index] * len(word_pieces))
            doc_ids.extend(word_pieces)

        tok_start = tok_end = None
        if is_training and not example.is_impossible:
            tok_start = orig_to_tok[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end = orig_to_tok[example.end_position + 1] - 1
            else:
                tok_end = len(doc_ids) - 1
            tok_start, tok_end = _improve_answer_span(doc_ids, tok_start, tok_end, answers[example_index])

        max_doc_pieces = max_seq_length - len(query_ids) - 3
        if max_doc_pieces <= 0:
            raise ValueError(
                f"max_seq_length {max_seq_length} leaves no room for the context after a "
                f"{len(query_ids)}-piece question; raise max_seq_length or lower max_query_length"
            )
        spans: list[tuple[int, int]] = []  # (start, length) in doc pieces
        start_offset = 0
        while start_offset < len(doc_ids):
            length = min(len(doc_ids) - start_offset, max_doc_pieces)
            spans.append((start_offset, length))
            if start_offset + length == len(doc_ids):
                break
            start_offset += min(length, doc_stride)

        for span_index, (span_start, span_length) in enumerate(spans):
            input_ids = [cls_id, *query_ids, sep_id]
            segment_ids = [0] * len(input_ids)
            token_to_orig_map, token_is_max_context = {}, {}
            for i in range(span_length):
                position = span_start + i
                token_to_orig_map[len(input_ids)] = tok_to_orig[position]
                token_is_max_context[len(input_ids)] = _max_context(spans, span_index, position)
                input_ids.append(doc_ids[position])
                segment_ids.append(1)
            input_ids.append(sep_id)
            segment_ids.append(1)
            input_mask = [1] * len(input_ids)
            tokens = [vocab[i] for i in input_ids]
            padding = max_seq_length - len(input_ids)
            input_ids += [pad_id] * padding
            input_mask += [0] * padding
            segment_ids += [0] * padding

            start_position = end_position = 0
            if is_training and not example.is_impossible:
                span_end = span_start + span_length - 1
                if span_start <= tok_start and tok_end <= span_end:
                    doc_offset = len(query_ids) + 2
                    start_position = tok_start - span_start + doc_offset
                    end_position = tok_end - span_start + doc_offset
            features.append(
                SquadFeature(
                    unique_id=1000000000 + len(features),
                    example_index=example_index,
                    doc_span_index=span_index,
                    tokens=tokens,
                    token_to_orig_map=token_to_orig_map,
                    token_is_max_context=token_is_max_context,
                    input_ids=input_ids,
                    input_mask=input_mask,
                    segment_ids=segment_ids,
                    start_position=start_position,
                    end_position=end_position,
                    is_impossible=example.is_impossible,
                )
            )
    stats.num_features = len(features)
    return features, stats


def feature_arrays(features: Sequence[SquadFeature]) -> dict[str, np.ndarray]:
    """The model inputs and training targets of the features as int32 arrays."""
    names = ("input_ids", "input_mask", "segment_ids", "start_position", "end_position")
    return {name: np.asarray([getattr(f, name) for f in features], dtype=np.int32) for name in names}
