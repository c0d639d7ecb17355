r"""Sequence packing: training throughput in real (non-padding) tokens/s on the same records.

Three contenders train on the same masked TFRecords, made by our generator from a real
corpus of short documents (the embedded corpus, Python's documentation, with every 4
prose paragraphs of a section a document: `--paragraphs_per_document=4`, 66% of the
positions real at 128; 0 makes each section a document, 80%), in one process:

- ours, packed: `pretraining_dataset(packing=True)` rows into `BertPretrainer(packed=True)`;
- ours, unpacked: the padded batches into `BertPretrainer`;
- keras-hub's `BertMaskedLM` (MLM only: it has no NSP head and cannot pack) on the same
  padded batches, with the same weighted MLM loss.

Each step is forward, backward and an AdamW update (global-norm clipping) in one
`tf.function` (the harness of bench/train_step.py); batches are read into memory first,
so the input pipeline is not timed. Steps of the contenders are interleaved after
warm-up, so load from other processes hits all alike; the median step time is used.
Real tokens/s = mean real tokens of a contender's batches / median step time. It prints
the fill rate (real tokens / positions) of the whole record file padded, of the packed
batches, and the ratios; the target is packed >= 1.4x keras-hub at 128 on a corpus of
about 66% fill.

    pip install -e ".[bench]"
    python bench/packing.py                          # BERT-Base, 128 then a few steps at 512
    python bench/packing.py --config=bert_tiny --seq_lengths=64 --batch_size=4 --steps=2  # smoke
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from absl import app, flags  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

flags.DEFINE_string("config", "bert_base", "Model config (its vocab_size must be the vocab's, 30522).")
flags.DEFINE_string("seq_lengths", "128,512", "Sequence lengths, comma-separated.")
flags.DEFINE_string("steps", "6,2", "Timed steps per contender, per sequence length (one value: all).")
flags.DEFINE_string(
    "batch_size",
    "32,8",
    "Rows per batch (padded sequences, or packed rows), per sequence length (one value: all).",
)
flags.DEFINE_string("mixed_precision", "mixed_bfloat16", "Keras dtype policy.")
flags.DEFINE_integer(
    "paragraphs_per_document",
    4,
    "The corpus's documents: this many consecutive prose paragraphs of a section (0: whole sections).",
)
flags.DEFINE_bool("jit_compile", False, "XLA for every contender's step.")
flags.DEFINE_string(
    "vocab_file", str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt"), "WordPiece vocab."
)
FLAGS = flags.FLAGS


def write_corpus(path: str) -> str:
    """The embedded corpus, a document per section or per few paragraphs of one (shorter)."""
    from pipelines import corpus

    size = FLAGS.paragraphs_per_document
    if not size:
        return corpus.write_corpus(path)
    documents = []
    for topic in sorted(corpus._topics()):
        for paragraphs in corpus._sections(corpus._topics()[topic]):
            for start in range(0, len(paragraphs), size):
                sentences = [s for p in paragraphs[start : start + size] for s in corpus.split_sentences(p)]
                if sentences:
                    documents.append(sentences)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n\n".join("\n".join(document) for document in documents) + "\n")
    return path


def file_fill(records: str, seq_length: int, predictions: int) -> float:
    """Real tokens / positions over every record of the file (the corpus's fill when padded)."""
    from pipelines import pretraining_dataset

    real = positions = 0
    for batch in pretraining_dataset(
        records, batch_size=256, max_seq_length=seq_length, max_predictions_per_seq=predictions,
        repeat=False, drop_remainder=False, shuffle=False,
    ):  # fmt: skip
        real += real_tokens(batch)
        positions += batch["input_mask"].shape.num_elements()
    return real / positions


def make_records(directory: str, seq_length: int, predictions: int) -> str:
    """Masked records of the corpus at `seq_length`, by our generator (dupe_factor 2)."""
    from pipelines.generate import GenerationConfig, create_pretraining_data

    text = write_corpus(os.path.join(directory, f"corpus_{FLAGS.paragraphs_per_document}.txt"))
    output = os.path.join(directory, f"train_{seq_length}.tfrecord")
    create_pretraining_data(
        GenerationConfig(
            input_file=text,
            output_file=output,
            vocab_file=FLAGS.vocab_file,
            max_seq_length=seq_length,
            max_predictions_per_seq=predictions,
            dupe_factor=2,
        )
    )
    return output


def read_batches(
    records: str, seq_length: int, predictions: int, count: int, batch_size: int, packing: bool
) -> list[dict]:
    from pipelines import pretraining_dataset

    dataset = pretraining_dataset(
        records,
        batch_size=batch_size,
        max_seq_length=seq_length,
        max_predictions_per_seq=predictions,
        seed=0,
        packing=packing,
    )
    return [batch for batch, _ in zip(dataset, range(count), strict=False)]


def real_tokens(batch) -> float:
    import tensorflow as tf

    return float(tf.reduce_sum(tf.cast(tf.cast(batch["input_mask"], tf.int32) > 0, tf.float32)))


def ours(config, packed: bool):
    from bench.train_step import make_step
    from bert_tf.models import BertPretrainer
    from bert_tf.models.losses import pretraining_losses

    model = BertPretrainer(config, packed=packed)  # it reads its inputs from the feature dict

    def loss_fn(features, outputs):
        return pretraining_losses(features, outputs)["loss"]

    return make_step(model, loss_fn, FLAGS.jit_compile)


def keras_hub(config):
    from bench.train_step import keras_hub_model

    step, adapt = keras_hub_model(config, FLAGS.jit_compile)
    return lambda features: step(adapt(features))


def run(seq_length: int, steps: int, batch_size: int, work: str) -> None:
    import keras

    from bert_tf.config import load_config

    config = load_config(FLAGS.config)
    predictions = max(1, round(20 * seq_length / 128))
    records = make_records(work, seq_length, predictions)
    count = steps + 2  # two warm-up steps, then one batch per timed step
    padded = read_batches(records, seq_length, predictions, count, batch_size, packing=False)
    packed = read_batches(records, seq_length, predictions, count, batch_size, packing=True)
    packed_fill = sum(real_tokens(b) for b in packed) / sum(
        b["input_mask"].shape.num_elements() for b in packed
    )
    instances = sum(float(b["next_sentence_weights"].numpy().sum()) for b in packed)
    rows = sum(b["input_ids"].shape[0] for b in packed)
    print(
        f"{FLAGS.config} seq {seq_length}, {batch_size} rows/batch, {FLAGS.mixed_precision}, "
        f"jit_compile={FLAGS.jit_compile}; corpus: {FLAGS.paragraphs_per_document or 'all'} paragraphs per "
        f"document, fill of all its records "
        f"padded {file_fill(records, seq_length, predictions):.1%}; the timed packed batches {packed_fill:.1%} "
        f"({instances / rows:.2f} instances/row)",
        flush=True,
    )
    keras.mixed_precision.set_global_policy(FLAGS.mixed_precision)
    contenders = {
        "ours_packed": (ours(config, packed=True), packed),
        "ours_unpacked": (ours(config, packed=False), padded),
        "keras_hub": (keras_hub(config), padded),
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for name, (step, batches) in contenders.items():  # compile + one warm-up step each
        start = time.perf_counter()
        step(batches[0]).numpy()
        step(batches[1]).numpy()
        print(f"  {name}: compiled and warmed up in {time.perf_counter() - start:.0f}s", flush=True)
    for index in range(steps):  # interleaved
        for name, (step, batches) in contenders.items():
            start = time.perf_counter()
            step(batches[2 + index]).numpy()
            times[name].append(time.perf_counter() - start)
    rates = {}
    for name, (_, batches) in contenders.items():
        median = statistics.median(times[name])
        tokens = sum(real_tokens(b) for b in batches[2:]) / steps
        rates[name] = tokens / median
        print(
            f"  {name:14s} {rates[name]:10.1f} real tokens/s  ({tokens:.0f} real tokens per batch, "
            f"median step {median:.3f}s of {steps})",
            flush=True,
        )
    print(
        f"  ratios at seq {seq_length}: packed / keras-hub {rates['ours_packed'] / rates['keras_hub']:.2f}x, "
        f"packed / unpacked {rates['ours_packed'] / rates['ours_unpacked']:.2f}x, "
        f"unpacked / keras-hub {rates['ours_unpacked'] / rates['keras_hub']:.2f}x",
        flush=True,
    )
    keras.mixed_precision.set_global_policy("float32")


def main(argv) -> None:
    del argv
    lengths = [int(value) for value in FLAGS.seq_lengths.split(",")]

    def per_length(text: str) -> list[int]:
        values = [int(value) for value in text.split(",")]
        return values * len(lengths) if len(values) == 1 else values[: len(lengths)]

    work = tempfile.mkdtemp(prefix="bert_tf_bench_packing_")
    # BERT-Base at 512 in batches of 32 needs more than 24 GB for three models: 8 there.
    for seq_length, count, batch_size in zip(
        lengths, per_length(FLAGS.steps), per_length(FLAGS.batch_size), strict=True
    ):
        run(seq_length, count, batch_size, work)


if __name__ == "__main__":
    app.run(main)
