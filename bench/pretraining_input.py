"""Online input benchmark: raw text → masked batches of 128 tokens, ours against keras-hub.

Both read the same corpus file (the embedded corpus repeated) in the same process:

- keras-hub: `BertMaskedLMPreprocessor` (its WordPiece tokenizer + masking) mapped over
  batches of lines, one line per sequence, no sentence pairs;
- ours: `pipelines.pretraining_dataset`, which also builds the NSP pairs from documents
  (a sequence holds up to 125 word pieces of running text, not one line).

Sequences/s is what a trainer consumes; tokens/s (real, non-padding tokens) says how
much text each pipeline turns into training signal per second.

  python bench/pretraining_input.py --seconds=20
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from absl import app, flags  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FLAGS = flags.FLAGS
flags.DEFINE_float("seconds", 20.0, "How long each pipeline is measured (after warm-up).")
flags.DEFINE_integer("batch_size", 256, "Sequences per batch.")
flags.DEFINE_integer("repeat", 40, "Copies of the embedded corpus in the benchmark file.")
flags.DEFINE_string("vocab_file", str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt"), "Vocab file.")


def _measure(dataset, mask_key: str, seconds: float, warmup_batches: int = 5) -> tuple[float, float]:
    """Iterates for `seconds` after warm-up; returns (sequences/s, real tokens/s)."""
    iterator = iter(dataset.repeat())
    for _ in range(warmup_batches):
        next(iterator)
    sequences = tokens = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch = next(iterator)
        mask = batch[mask_key]
        sequences += int(mask.shape[0])
        tokens += int(mask.numpy().astype(bool).sum())
    elapsed = time.perf_counter() - start
    return sequences / elapsed, tokens / elapsed


def main(argv: list[str]) -> None:
    del argv
    import keras_hub
    import tensorflow as tf

    from pipelines import corpus, pretraining_dataset

    path = corpus.write_corpus(Path(tempfile.mkdtemp()) / "corpus.txt", repeat=FLAGS.repeat)
    print(f"corpus {os.path.getsize(path) / 1e6:.1f} MB, batch {FLAGS.batch_size}, sequence length 128")

    tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=FLAGS.vocab_file, lowercase=True)
    preprocessor = keras_hub.models.BertMaskedLMPreprocessor(
        tokenizer=tokenizer, sequence_length=128, mask_selection_rate=0.15, mask_selection_length=20
    )
    lines = tf.data.TextLineDataset(path).filter(lambda line: tf.strings.length(line) > 0)
    keras_hub_dataset = (
        lines.shuffle(10_000, seed=1)
        .batch(FLAGS.batch_size, drop_remainder=True)
        .map(lambda text: preprocessor(text)[0], num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    ours = pretraining_dataset(path, vocab_file=FLAGS.vocab_file, batch_size=FLAGS.batch_size, seed=1)

    results = {}
    for name, dataset, mask_key in (
        ("keras-hub BertMaskedLMPreprocessor", keras_hub_dataset, "padding_mask"),
        ("ours pretraining_dataset (with NSP)", ours, "input_mask"),
    ):
        results[name] = _measure(dataset, mask_key, FLAGS.seconds)
        print(f"{name:38s} {results[name][0]:9.0f} sequences/s {results[name][1]:11.0f} tokens/s", flush=True)
    (kh_seq, kh_tok), (our_seq, our_tok) = results.values()
    print(f"ratio ours / keras-hub: {our_seq / kh_seq:.2f}x sequences/s, {our_tok / kh_tok:.2f}x tokens/s")


if __name__ == "__main__":
    app.run(main)
