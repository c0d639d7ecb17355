"""A `--kind=tflite` export served from Python without TensorFlow: raw text in, predictions out.

>>> from bert_tf.serving import litert                          # doctest: +SKIP
>>> classifier = litert.load("exports/topic_tflite", num_threads=2)  # doctest: +SKIP
>>> classifier(["How do I read a file?"])["label"]              # doctest: +SKIP
['io']

`load` gives the client the export names (its task family's: for a classifier,
`bert_tf.tasks.classification.litert.LiteRTClassifier`); `LiteRTFile` is what the clients
share: the export's description, its tokenizer and its packed signature.

It needs the `tflite` extra (`pip install "bert_tf[tflite]"`): the LiteRT interpreter
(`ai-edge-litert`) and Hugging Face's `tokenizers`, whose BERT WordPiece tokenizer splits
text into the word pieces bert_tf's own tokenizer gives (the tokenizer tests hold the two
to each other). This module imports neither TensorFlow nor the rest of bert_tf, so a server
process starts in about a second and holds little more than the model.

A text, or a pair (`text_pairs`), is packed `[CLS] a [SEP] (b [SEP])` and cut to the
export's seq_length as fine-tuning cuts it (a pair: the longer side first). A model
fine-tuned with windows (`doc_stride`) reads only a long text's first seq_length pieces
here; its task SavedModel reads every window.

A batch runs packed (the file's `serving_packed` signature): its texts go, longest first,
each into the first row with room for it, in rows as long as the batch's longest text,
and attention stays within each text, so every text's outputs are those it has alone,
whatever batch it comes in. This is the first-fit decreasing packing of
`bert_tf.preprocessing.packing.pack_sequences`, which the task SavedModel runs as graph
ops; it is written again here in NumPy because this process has no TensorFlow. On short
texts it runs a batch in fewer, shorter rows than padding every text to the longest.

Outputs, per text, are the task SavedModel's (the client's docstring says which).
"""

from __future__ import annotations

import importlib
import json
import os

import numpy as np


def pack(sequences: list[list[int]], type_ids: list[list[int]]) -> dict[str, np.ndarray]:
    """Packs token id sequences (each `[CLS] ... [SEP]`) into rows as long as the longest.

    First-fit decreasing: longest first (ties in batch order), each into the first row that
    still has room. Returns int32 `input_ids`, `segment_ids`, `input_mask` [rows, length]
    (`input_mask`: 1, 2, ... numbering the sequences of a row, 0 on padding) and
    `cls_positions` [n], sequence i's first token in the rows flattened row by row.
    """
    lengths = [len(sequence) for sequence in sequences]
    if not lengths or min(lengths) == 0:
        raise ValueError("pack needs at least one sequence, and no empty one")
    row_length = max(lengths)
    used: list[int] = []  # tokens placed in each row so far
    count: list[int] = []  # sequences placed in each row so far
    placed = [(0, 0, 0)] * len(sequences)  # (row, offset, number in the row)
    for index in sorted(range(len(sequences)), key=lambda i: -lengths[i]):
        row = next((r for r, tokens in enumerate(used) if tokens + lengths[index] <= row_length), len(used))
        if row == len(used):
            used.append(0)
            count.append(0)
        placed[index] = (row, used[row], count[row] + 1)
        used[row] += lengths[index]
        count[row] += 1
    shape = (len(used), row_length)
    input_ids, segment_ids, input_mask = (np.zeros(shape, np.int32) for _ in range(3))
    for sequence, types, (row, offset, number) in zip(sequences, type_ids, placed, strict=True):
        end = offset + len(sequence)
        input_ids[row, offset:end] = sequence
        segment_ids[row, offset:end] = types
        input_mask[row, offset:end] = number
    positions = np.array([row * row_length + offset for row, offset, _ in placed], np.int32)
    return {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "cls_positions": positions,
    }


def truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Cuts a pair to `budget` pieces as fine-tuning does: one piece at a time from the end of
    the longer side, of `b` on a tie (the original `_truncate_seq_pair`; Hugging Face's
    "longest_first" cuts `a` on a tie, so an odd cut differs by a piece)."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        (a if len(a) > len(b) else b).pop()
    return a, b


def load(export_dir: str, num_threads: int | None = None):
    """The TensorFlow-free client of a `--kind=tflite` export: the one its export_info.json
    names (its task family's)."""
    info = LiteRTFile.read_info(export_dir)
    client = info.get("client")
    if not client:
        raise ValueError(
            f"{export_dir}/export_info.json names no client: an export of an earlier bert_tf opens with "
            "its family's client class (docs/export-and-serving.md), or export it again with "
            "python -m bert_tf.export --kind=tflite; a task family without a client has no LiteRT export"
        )
    module_name, _, class_name = client.partition(":")
    return getattr(importlib.import_module(module_name), class_name)(export_dir, num_threads=num_threads)


class LiteRTFile:
    """What the clients of `--kind=tflite` exports share: the export's description
    (`info`, its export_info.json), its WordPiece tokenizer (`tokenizer`, Hugging Face's,
    which splits as bert_tf's own), and the file's packed signature (`runner`).

    Args:
      export_dir: the folder `python -m bert_tf.export --kind=tflite` wrote.
      num_threads: the interpreter's CPU threads (None: LiteRT's default).
    """

    def __init__(self, export_dir: str, num_threads: int | None = None) -> None:
        try:
            from ai_edge_litert.interpreter import Interpreter
            from tokenizers import BertWordPieceTokenizer
        except ImportError as error:
            raise ImportError(
                f"{type(self).__name__} needs the tflite extra ({error.name} is missing): "
                'pip install "bert_tf[tflite]"'
            ) from None
        self.info = info = self.read_info(export_dir)
        self.tokenizer = BertWordPieceTokenizer(
            os.path.join(export_dir, "vocab.txt"), lowercase=bool(info["lower_case"])
        )
        self.seq_length = int(info["seq_length"])
        self.cls, self.sep = (self.tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]"))
        if self.cls is None or self.sep is None:
            raise ValueError(f"{export_dir}/vocab.txt has no [CLS] or no [SEP]: export the model again")
        interpreter = Interpreter(
            model_path=os.path.join(export_dir, "model.tflite"), num_threads=num_threads
        )
        if "serving_packed" not in interpreter.get_signature_list():
            raise ValueError(
                f"{export_dir}/model.tflite has no serving_packed signature (an export of an earlier "
                "bert_tf): export it again with python -m bert_tf.export --kind=tflite"
            )
        self.runner = interpreter.get_signature_runner("serving_packed")

    @staticmethod
    def read_info(export_dir: str) -> dict:
        info_file = os.path.join(export_dir, "export_info.json")
        if not os.path.isfile(info_file):
            raise ValueError(
                f"{export_dir} holds no export_info.json: give the folder "
                "`python -m bert_tf.export --kind=tflite` wrote"
            )
        with open(info_file, encoding="utf-8") as file:
            info = json.load(file)
        if info.get("kind") != "tflite":
            raise ValueError(f"{export_dir} is a {info.get('kind')} export, not a --kind=tflite one")
        return info

    def packed(self, texts: list[str], text_pairs: list[str] | None = None) -> dict[str, np.ndarray] | None:
        """The packed inputs of a batch of texts (or pairs); None for an empty batch."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if text_pairs is not None:
            text_pairs = [text_pairs] if isinstance(text_pairs, str) else list(text_pairs)
            if len(text_pairs) != len(texts):
                raise ValueError(
                    f"{len(texts)} texts but {len(text_pairs)} text_pairs: give one pair per text"
                )
        if not texts:
            return None
        pieces = [item.ids for item in self.tokenizer.encode_batch(texts, add_special_tokens=False)]
        if text_pairs is None:
            sequences = [[self.cls, *a[: self.seq_length - 2], self.sep] for a in pieces]
            types = [[0] * len(sequence) for sequence in sequences]
        else:
            others = [item.ids for item in self.tokenizer.encode_batch(text_pairs, add_special_tokens=False)]
            sequences, types = [], []
            for a, b in zip(pieces, others, strict=True):
                a, b = truncate_pair(a, b, self.seq_length - 3)
                sequences.append([self.cls, *a, self.sep, *b, self.sep])
                types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
        return pack(sequences, types)
