"""SQuAD v1.1 / v2.0: reading the JSON files and the original sliding-window features.

As the original run_squad.py, the context is split on whitespace into "doc tokens"
(answer character offsets become doc-token offsets), which post-processing maps
answers back to. Training answers whose text is not found in the context are skipped
and counted. The window features are `bert_tf.preprocessing.SpanPreprocessor`'s.

Example:

>>> from bert_tf.tasks.span import squad
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

from bert_tf import fileio
from bert_tf.tasks import tfds_sources
from bert_tf.tasks.features import TaskDataError

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
    context: str = ""  # the paragraph as written
    answer_start: int = -1  # training: the answer's character offset in `context` (-1: none)


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
    if not fileio.isfile(path):
        raise TaskDataError(f"SQuAD file not found: {path}")
    with fileio.open_text(path) as handle:
        try:
            content = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
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
                example = SquadExample(qa["id"], qa["question"], doc_tokens, context=context)
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
                        example.answer_start = offset
                    else:
                        example.orig_answer_text = ""
                        example.start_position = example.end_position = -1
                examples.append(example)
    return examples, skipped


def squad_version(name: str) -> bool:
    """Whether a TFDS SQuAD name is version 2.0 (unanswerable questions)."""
    return name.split("/")[-1].startswith("v2")


def tfds_dataset(name: str, split: str, data_dir: str | None = None) -> list[dict]:
    """A TFDS SQuAD split (`squad/v1.1`, `squad/v2.0`) as the `data` list of the official JSON files."""
    records, _ = tfds_sources.load_numpy(name, split, data_dir)
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
