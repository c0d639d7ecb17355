"""Serving speed: raw text through the exported preprocessor + encoder SavedModels, against
the same work done in-process (bert_tf's tokenizer, packing and Keras encoder in a
tf.function), in the same process on the same batches; also the largest output difference.

A random-init model of --config (vocab: the bert-base-uncased fixture) is exported to a
temporary directory; both sides run --rounds rounds of --batches batches of --batch_size
lines of the embedded corpus at --seq_length, alternating, and the best round of each is
reported as texts/s with the ratio exported / in-process.

  python -m bench.serving [--config=bert_tiny] [--seq_length=128] [--batch_size=32]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

if not __package__:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

VOCAB = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures", "bert_uncased_vocab.txt"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="bert_tiny")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from bert_tf.config import load_config
    from bert_tf.models import BertEncoder
    from bert_tf.preprocessing.segments import combine_segments
    from bert_tf.serving.exporter import export_from_model
    from bert_tf.tokenization import BertTokenizer
    from pipelines.corpus import corpus_text

    config = load_config(args.config)
    encoder = BertEncoder(config)
    tokenizer = BertTokenizer(VOCAB)
    lines = [line for line in corpus_text().splitlines() if line.strip()]
    batches = [
        tf.constant(lines[i * args.batch_size : (i + 1) * args.batch_size]) for i in range(args.batches)
    ]
    root = tempfile.mkdtemp()
    start = time.perf_counter()
    for kind in ("preprocessor", "encoder"):
        export_from_model(
            kind, encoder, config, VOCAB, True, os.path.join(root, kind), seq_length=args.seq_length
        )
    export_seconds = time.perf_counter() - start
    preprocessor = tf.saved_model.load(os.path.join(root, "preprocessor"))
    exported = tf.saved_model.load(os.path.join(root, "encoder"))

    def run_exported(text):
        return exported(preprocessor(text))["pooled_output"]

    @tf.function
    def run_in_process(text):
        packed = combine_segments(
            [tokenizer.tokenize(text)], args.seq_length, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
        )
        return encoder(packed, training=False)["pooled_output"]

    largest = max(float(np.abs(run_exported(b) - run_in_process(b)).max()) for b in batches)
    best = {"exported": 0.0, "in_process": 0.0}
    for _ in range(args.rounds):
        for name, function in (("exported", run_exported), ("in_process", run_in_process)):
            start = time.perf_counter()
            for batch in batches:
                function(batch).numpy()
            rate = args.batches * args.batch_size / (time.perf_counter() - start)
            best[name] = max(best[name], rate)
    print(f"config={args.config} seq_length={args.seq_length} batch_size={args.batch_size}")
    print(f"export of preprocessor + encoder: {export_seconds:.1f} s")
    print(f"max |exported - in-process| pooled_output: {largest:.2e}")
    print(f"exported SavedModels: {best['exported']:.0f} texts/s")
    print(f"in-process tf.function: {best['in_process']:.0f} texts/s")
    print(f"ratio exported / in-process: {best['exported'] / best['in_process']:.2f}")


if __name__ == "__main__":
    main()
