"""Tokenization speed: bert_tf's BertTokenizer against Hugging Face `tokenizers`, one core each.

Both tokenize the same text (the embedded corpus repeated to >= 10 MB, one line per call
row, batches of --batch_size lines) with the same vocab, in the same process, alternating
for --rounds rounds; the best round of each is reported. One core per side:

- TensorFlow: intra-op and inter-op thread pools of 1 thread.
- tokenizers: RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false, so `encode_batch`
  runs on the calling thread.

With --fast_bert it also times tensorflow-text's FastBertTokenizer (lower_case_nfd_strip_accents)
and counts the lines where its ids differ from BertTokenizer's, which is why it is not used.

  python bench/tokenization.py [--repeat=42] [--batch_size=1024] [--rounds=3] [--fast_bert]
"""

from __future__ import annotations

import os
import sys

if not __package__:
    # Run as `python bench/tokenization.py`: the checkout, not bench/, first on the path.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import tensorflow_text as tf_text  # noqa: E402
from tokenizers import BertWordPieceTokenizer  # noqa: E402

from bert_tf.tokenization import BertTokenizer  # noqa: E402
from pipelines import corpus  # noqa: E402

DEFAULT_VOCAB = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "bert_uncased_vocab.txt")


def timed(tokenize_batch, batches) -> float:
    start = time.perf_counter()
    for batch in batches:
        tokenize_batch(batch)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab_file", default=DEFAULT_VOCAB)
    parser.add_argument("--lower_case", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--repeat", type=int, default=42, help="copies of the embedded corpus (42 ~ 10 MB)")
    parser.add_argument("--batch_size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fast_bert", action="store_true", help="also time tf-text's FastBertTokenizer")
    args = parser.parse_args()

    path = corpus.write_corpus(os.path.join(tempfile.mkdtemp(), "corpus.txt"), repeat=args.repeat)
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle if line.strip()]
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    batches = [lines[i : i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    print(
        f"text: {len(lines)} lines, {megabytes:.1f} MB (embedded corpus x {args.repeat}), batch {args.batch_size}"
    )
    print(
        "threads: TensorFlow intra/inter-op 1/1; tokenizers RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false"
    )

    ours = BertTokenizer(args.vocab_file, lower_case=args.lower_case)
    theirs = BertWordPieceTokenizer(
        args.vocab_file,
        clean_text=True,
        handle_chinese_chars=True,
        strip_accents=args.lower_case,
        lowercase=args.lower_case,
    )
    theirs.model.max_input_chars_per_word = 200  # the original's limit (HF's default is 100)
    sides = {
        "bert_tf BertTokenizer": lambda batch: ours.tokenize(batch),
        "HF tokenizers BertWordPiece": lambda batch: theirs.encode_batch(batch, add_special_tokens=False),
    }
    if args.fast_bert:
        fast_bert = tf_text.FastBertTokenizer(
            ours.vocab, lower_case_nfd_strip_accents=args.lower_case, token_out_type=tf.int64
        )
        fast_bert_batch = tf.function(fast_bert.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
        sides["tf-text FastBertTokenizer"] = fast_bert_batch

    # Same ids on the whole text (a speed comparison of different answers would be moot).
    mismatches = {name: 0 for name in sides}
    for batch in batches:
        expected = ours.tokenize(batch).to_list()
        got = [encoding.ids for encoding in theirs.encode_batch(batch, add_special_tokens=False)]
        mismatches["HF tokenizers BertWordPiece"] += sum(a != b for a, b in zip(expected, got, strict=True))
        if args.fast_bert:
            got = fast_bert_batch(batch).to_list()
            mismatches["tf-text FastBertTokenizer"] += sum(a != b for a, b in zip(expected, got, strict=True))
    for name, count in mismatches.items():
        if name != "bert_tf BertTokenizer":
            print(f"lines where {name} ids differ from bert_tf's: {count} of {len(lines)}")

    best = {name: float("inf") for name in sides}
    for _ in range(args.rounds):
        for name, tokenize_batch in sides.items():
            best[name] = min(best[name], timed(tokenize_batch, batches))
    for name, seconds in best.items():
        print(
            f"{name:30s} {len(lines) / seconds:10.0f} texts/s {megabytes / seconds:7.2f} MB/s ({seconds:.2f} s)"
        )
    ratio = best["HF tokenizers BertWordPiece"] / best["bert_tf BertTokenizer"]
    print(f"speed ratio bert_tf / HF tokenizers (per core): {ratio:.2f}x")


if __name__ == "__main__":
    main()
