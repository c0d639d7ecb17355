"""Feature extraction: per-token vectors of chosen layers and a sentence vector, for the
feature-based use of BERT (what the original extract_features.py wrote).

Each input line is one text, or a pair written "text_a ||| text_b" as in the original.
Each output record (one JSON object per line) is

    {"line_index": 0,
     "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [...]}, ...]}, ...],
     "sentence_vector": [...]}

`features` lists the real word pieces ([CLS] ... [SEP], no padding); layer indices count
from the input like Python (-1 is the last Transformer block). `sentence_vector` pools the
first layer in `layers`: its [CLS] vector ("cls") or the mean over the real tokens ("mean").

Example:

>>> from bert_tf.config import load_config
>>> from bert_tf.models import BertEncoder
>>> from bert_tf.tokenization import BertTokenizer
>>> encoder = BertEncoder(load_config("bert_tiny"))
>>> tokenizer = BertTokenizer("tests/fixtures/bert_uncased_vocab.txt")
>>> extractor = FeatureExtractor(encoder, tokenizer, layers=[-1, -2], max_seq_length=16)
>>> record = next(extractor.extract(["Hello world"]))
>>> [f["token"] for f in record["features"]], len(record["sentence_vector"])
(['[CLS]', 'hello', 'world', '[SEP]'], 128)
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import BertTfError, UsageError
from bert_tf.outputs import check_output
from bert_tf.preprocessing.segments import combine_segments
from bert_tf.progress_display import Progress
from bert_tf.serving.loading import load_pretrained
from bert_tf.tokenization import BertTokenizer

PAIR_SEPARATOR = " ||| "
POOLINGS = ("cls", "mean")


def split_pair(line: str) -> tuple[str, str | None]:
    """'a ||| b' -> ('a', 'b'); a line without the separator is a single text."""
    if PAIR_SEPARATOR.strip() in line:
        text_a, text_b = line.split(PAIR_SEPARATOR.strip(), 1)
        return text_a.strip(), text_b.strip()
    return line, None


class FeatureExtractor:
    """Runs an encoder over texts in batches and yields one JSON-ready record per text.

    Args:
      encoder: a `bert_tf.models.BertEncoder`.
      tokenizer: its `bert_tf.tokenization.BertTokenizer`.
      layers: Transformer block indices (negative counts from the last).
      pooling: "cls" or "mean", for the sentence vector.
      max_seq_length: packed length; longer texts are trimmed like the original.
      batch_size: texts per encoder call.
      decimals: values are rounded to this many decimals (the original wrote 6).
    """

    def __init__(
        self,
        encoder,
        tokenizer,
        layers: Sequence[int] = (-1, -2, -3, -4),
        pooling: str = "cls",
        max_seq_length: int = 128,
        batch_size: int = 32,
        decimals: int = 6,
    ) -> None:
        num_layers = encoder.config.num_hidden_layers
        bad = [layer for layer in layers if not -num_layers <= layer < num_layers]
        if bad or not layers:
            raise UsageError(
                f"--layers {list(layers)}: the model has {num_layers} layers, so each index must be "
                f"in [-{num_layers}, {num_layers - 1}]"
            )
        if pooling not in POOLINGS:
            raise UsageError(f"--pooling={pooling!r}; use one of {', '.join(POOLINGS)}")
        if max_seq_length > encoder.config.max_position_embeddings or max_seq_length < 3:
            raise UsageError(
                f"--max_seq_length={max_seq_length} must be in [3, max_position_embeddings="
                f"{encoder.config.max_position_embeddings}]"
            )
        self.encoder, self.tokenizer = encoder, tokenizer
        self.layers, self.pooling = list(layers), pooling
        self.max_seq_length, self.batch_size, self.decimals = max_seq_length, batch_size, decimals
        self._vocab = np.array(tokenizer.vocab, dtype=object)
        self._run = tf.function(self._forward, reduce_retracing=True)

    def _forward(self, packed: dict[str, tf.Tensor]) -> tf.Tensor:
        outputs = self.encoder(packed, training=False)
        return tf.stack([outputs["encoder_outputs"][layer] for layer in self.layers], axis=0)

    def _pack(self, texts: Sequence[str]) -> dict[str, tf.Tensor]:
        pairs = [split_pair(text) for text in texts]
        segments = [self.tokenizer.tokenize(tf.constant([a for a, _ in pairs]))]
        if any(b is not None for _, b in pairs):
            if not all(b is not None for _, b in pairs):
                # Mixed batch: pack singles and pairs separately and merge in order.
                return self._pack_mixed(pairs)
            segments.append(self.tokenizer.tokenize(tf.constant([b for _, b in pairs])))
        cls_id, sep_id, pad_id = self.tokenizer.cls_id, self.tokenizer.sep_id, self.tokenizer.pad_id
        return combine_segments(segments, self.max_seq_length, cls_id, sep_id, pad_id)

    def _pack_mixed(self, pairs) -> dict[str, tf.Tensor]:
        rows = [self._pack([a if b is None else f"{a}{PAIR_SEPARATOR}{b}"]) for a, b in pairs]
        return {name: tf.concat([row[name] for row in rows], axis=0) for name in rows[0]}

    def extract(self, texts: Iterable[str], progress=None) -> Iterator[dict]:
        """Yields one record per text (see the module docstring). `progress(n)` is called per batch."""
        batch: list[str] = []
        index = 0
        for text in texts:
            batch.append(text)
            if len(batch) == self.batch_size:
                yield from self._records(batch, index)
                index += len(batch)
                batch = []
                if progress:
                    progress(index)
        if batch:
            yield from self._records(batch, index)
            if progress:
                progress(index + len(batch))

    def _records(self, texts: Sequence[str], first_index: int) -> Iterator[dict]:
        packed = self._pack(texts)
        vectors = self._run(packed).numpy()  # [layers, batch, seq, hidden]
        input_ids = packed["input_ids"].numpy()
        lengths = packed["input_mask"].numpy().sum(axis=1)
        for row, length in enumerate(lengths):
            # float64 before rounding, so that JSON gets 0.123457 and not 0.12345699965953827.
            per_layer = vectors[:, row, :length].astype(np.float64)  # [layers, tokens, hidden]
            pooled = per_layer[0, 0] if self.pooling == "cls" else per_layer[0].mean(axis=0)
            tokens = self._vocab[input_ids[row, :length]]
            yield {
                "line_index": first_index + row,
                "features": [
                    {
                        "token": str(token),
                        "layers": [
                            {
                                "index": layer,
                                "values": np.round(per_layer[k, position], self.decimals).tolist(),
                            }
                            for k, layer in enumerate(self.layers)
                        ],
                    }
                    for position, token in enumerate(tokens)
                ],
                "sentence_vector": np.round(pooled, self.decimals).tolist(),
            }


def read_lines(path: str) -> list[str]:
    """The lines of a UTF-8 text file, with errors that name the file."""
    if fileio.isdir(path):
        raise BertTfError(f"--input_file {path} is a directory; pass a text file, one text per line")
    if not fileio.exists(path):
        raise BertTfError(f"--input_file {path} does not exist; pass a text file, one text per line")
    try:
        # Universal newlines, as a text-mode open() reads them.
        return [line.rstrip("\n") for line in io.StringIO(fileio.read_text(path), newline=None)]
    except FileNotFoundError:
        raise BertTfError(
            f"--input_file {path} does not exist; pass a text file, one text per line"
        ) from None
    except UnicodeDecodeError as error:
        raise BertTfError(
            f"--input_file {path} is not UTF-8 text (byte {error.start}: {error.reason}); save it as UTF-8"
        ) from None


def extract_features_to_file(settings) -> int:
    """What `python -m bert_tf.extract_features` runs (`settings`: a `FeatureSettings`).

    Everything is checked (input, output location, checkpoint, layers, length) before the
    output is written; it is written under a temporary name and renamed when complete, so
    a failed run leaves no partial file. Returns the number of records written.
    """
    lines = read_lines(settings.input_file)
    check_output(settings.output_file, "--output_file", overwrite=settings.overwrite, is_file=True)
    encoder, _, tokenizer_settings = load_pretrained(settings.init_checkpoint, "encoder")
    tokenizer = BertTokenizer(tokenizer_settings.vocab_file, lower_case=tokenizer_settings.lower_case)
    extractor = FeatureExtractor(
        encoder, tokenizer, settings.layers, settings.pooling, settings.max_seq_length, settings.batch_size
    )
    display = Progress("extracting features", total=len(lines), unit="lines")
    with display, fileio.writing(settings.output_file) as output:
        for record in extractor.extract(lines, progress=display.update):
            output.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(lines)
