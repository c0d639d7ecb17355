"""Online input benchmark: raw text → masked batches of 128 tokens, ours against keras-hub.

Both read the same corpus file (the embedded corpus repeated) in the same process:

- keras-hub: `BertMaskedLMPreprocessor` (its WordPiece tokenizer + masking) mapped over
  batches of lines, one line per sequence, no sentence pairs;
- ours: `pipelines.pretraining_dataset`, which also builds the NSP pairs from documents
  (a sequence holds up to 125 word pieces of running text, not one line).

Sequences/s is what a trainer consumes; tokens/s (real, non-padding tokens) says how
much text each pipeline turns into training signal per second.

  python bench/pretraining_input.py --seconds=20 --rounds=5
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
flags.DEFINE_float("seconds", 20.0, "How long each pipeline is measured in all (after warm-up).")
flags.DEFINE_integer("rounds", 5, "Turns each pipeline takes; each reports its median turn.")
flags.DEFINE_integer("batch_size", 256, "Sequences per batch.")
flags.DEFINE_integer("repeat", 40, "Copies of the embedded corpus in the benchmark file.")
flags.DEFINE_string("vocab_file", str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt"), "Vocab file.")


def _measure(iterator, mask_key: str, seconds: float) -> tuple[float, float]:
    """Iterates for `seconds`; returns (sequences/s, real tokens/s)."""
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

    # The two take turns, `rounds` times, and each keeps its median: on a shared machine a
    # burst of other work then lands on both instead of on whichever ran at the time.
    pipelines = {
        "keras-hub BertMaskedLMPreprocessor": (keras_hub_dataset, "padding_mask"),
        "ours pretraining_dataset (with NSP)": (ours, "input_mask"),
    }
    iterators = {}
    for name, (dataset, _) in pipelines.items():
        iterators[name] = iter(dataset.repeat().prefetch(2))
        for _ in range(5):  # warm-up: tracing, first blocks, shuffle buffers
            next(iterators[name])
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in pipelines}
    for _ in range(FLAGS.rounds):
        for name, (_, mask_key) in pipelines.items():
            rounds[name].append(_measure(iterators[name], mask_key, FLAGS.seconds / FLAGS.rounds))
    results = {}
    for name, measured in rounds.items():
        sequences = sorted(m[0] for m in measured)
        tokens = sorted(m[1] for m in measured)
        results[name] = (sequences[len(sequences) // 2], tokens[len(tokens) // 2])
        print(
            f"{name:38s} {results[name][0]:9.0f} sequences/s {results[name][1]:11.0f} tokens/s "
            f"(median of {len(measured)}; sequences/s from {sequences[0]:.0f} to {sequences[-1]:.0f})",
            flush=True,
        )
    (kh_seq, kh_tok), (our_seq, our_tok) = results.values()
    print(f"ratio ours / keras-hub: {our_seq / kh_seq:.2f}x sequences/s, {our_tok / kh_tok:.2f}x tokens/s")


if __name__ == "__main__":
    app.run(main)
