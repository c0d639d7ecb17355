"""One side of `bench/embeddings.py`, measured in a process of its own.

Run by path, never imported by bert_tf; it imports only the runtime it measures, so it also
runs in a virtualenv without TensorFlow (sentence-transformers' ONNX backend):

    python bench/embeddings_worker.py SIDE MODEL DATA OUT [--threads=2] ...

SIDE is one of
  st_train    fine-tunes MODEL (a sentence-transformers folder) with SentenceTransformerTrainer
              and MultipleNegativesRankingLoss on DATA/train.csv (query,passage) with the
              benchmark's recipe, saves it to OUT/model, and writes OUT/result.json with its dev
              MRR@10 (every DATA/dev.csv query ranked against all its passages);
  savedmodel  a task SavedModel of `python -m bert_tf.export --kind=task` (MODEL: its folder),
              `serving_default` on raw strings;
  tflite      the folder of `--kind=tflite` (optionally `--quantize=int8`), served by
              `bert_tf.serving.litert.load` (no TensorFlow; batches packed);
  onnx_export writes MODEL's ONNX model and its int8 quantization into MODEL/onnx
              (sentence-transformers' own exporters; DATA and OUT are ignored);
  st_torch, st_onnx, st_onnx_int8
              `SentenceTransformer(MODEL).encode` on PyTorch, on its ONNX backend, and on the
              int8-quantized ONNX model sentence-transformers exports (MODEL: a
              sentence-transformers folder).

The serving sides encode DATA/dev.csv's passages in batches of --batch_size (also saving
the vectors, OUT.npy, for comparing the sides), then time --rounds passes (the best, texts/s)
and --latency_texts single texts (the median, ms); OUT gets {texts_per_second, latency_ms,
load_seconds, mrr_at_10} (the dev queries, encoded
with the same side, ranked against its passage vectors).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.serving_worker import limit_threads  # noqa: E402

# The benchmark's recipe (bench/embeddings.py passes it to both sides).
RECIPE = {"batch_size": 32, "learning_rate": 2e-5, "warmup": 0.1, "epochs": 1.0, "max_seq_length": 128}


def read_pairs(path: str) -> tuple[list[str], list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [row["query"] for row in rows], [row["passage"] for row in rows]


def mrr_at_10(queries, passages) -> float:
    """Every query against all passages (each distinct text once), by cosine: the mean of
    1/rank of its own passage where the rank is at most 10 (bert_tf's own definition,
    written again here so this process needs no bert_tf)."""
    import numpy as np

    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    passages = passages / np.linalg.norm(passages, axis=1, keepdims=True)
    scores = queries @ passages.T
    own = np.diag(scores)[:, None]
    rank = 1 + (scores > own).sum(axis=1)
    return float(np.where(rank <= 10, 1.0 / rank, 0.0).mean())


def st_train(model: str, data: str, out: str, threads: int, seed: int, mixed_precision: str) -> None:
    if os.environ.get("ST_EXTRA_PATH"):  # `datasets`, where this Python lacks it: after its own packages
        sys.path.append(os.environ["ST_EXTRA_PATH"])
    import torch
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    encoder = SentenceTransformer(model, device="cpu")
    encoder.max_seq_length = RECIPE["max_seq_length"]
    queries, passages = read_pairs(os.path.join(data, "train.csv"))
    arguments = SentenceTransformerTrainingArguments(
        output_dir=os.path.join(out, "checkpoints"),
        num_train_epochs=RECIPE["epochs"],
        per_device_train_batch_size=RECIPE["batch_size"],
        learning_rate=RECIPE["learning_rate"],
        warmup_ratio=RECIPE["warmup"],
        save_strategy="no",
        report_to=[],
        logging_steps=50,
        seed=seed,
        bf16=mixed_precision == "mixed_bfloat16",  # autocast to bfloat16, as Keras' mixed_bfloat16
        dataloader_num_workers=0,
        use_cpu=True,
    )
    trainer = SentenceTransformerTrainer(
        model=encoder,
        args=arguments,
        train_dataset=Dataset.from_dict({"anchor": queries, "positive": passages}),
        loss=MultipleNegativesRankingLoss(encoder, scale=20.0),
    )
    trainer.train()
    encoder.save(os.path.join(out, "model"))
    dev_queries, dev_passages = read_pairs(os.path.join(data, "dev.csv"))
    score = mrr_at_10(encoder.encode(dev_queries, batch_size=64), encoder.encode(dev_passages, batch_size=64))
    with open(os.path.join(out, "result.json"), "w") as handle:
        json.dump({"mrr_at_10": score}, handle)


def savedmodel(model: str, threads: int):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    signature = tf.saved_model.load(model).signatures["serving_default"]
    return lambda texts: signature(text=tf.constant(texts))["embedding"].numpy()


def tflite(model: str, threads: int):
    from bert_tf.serving import litert  # no TensorFlow: the LiteRT interpreter and `tokenizers`

    encoder = litert.load(model, num_threads=threads)
    return encoder.encode


def sentence_transformers(backend: str, file_name: str | None = None):
    def load(model: str, threads: int):
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
        kwargs = {}
        if backend == "onnx":
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            kwargs["model_kwargs"] = {
                "session_options": options,
                **({"file_name": file_name} if file_name else {}),
            }
        encoder = SentenceTransformer(model, device="cpu", backend=backend, **kwargs)
        return lambda texts: encoder.encode(texts, batch_size=len(texts))

    return load


def onnx_export(model: str) -> None:
    """Writes MODEL/onnx/model.onnx (sentence-transformers' own ONNX export) and its dynamic
    int8 quantization, model_qint8_avx512_vnni.onnx, beside it."""
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    encoder = SentenceTransformer(model, device="cpu", backend="onnx")
    encoder.save_pretrained(model)
    export_dynamic_quantized_onnx_model(encoder, "avx512_vnni", model)


SIDES = {
    "savedmodel": savedmodel,
    "tflite": tflite,
    "st_torch": sentence_transformers("torch"),
    "st_onnx": sentence_transformers("onnx"),
    "st_onnx_int8": sentence_transformers("onnx", "onnx/model_qint8_avx512_vnni.onnx"),
}


def measure(encode, texts, batch_size: int, rounds: int, latency_texts: int):
    import numpy as np

    batches = [texts[start : start + batch_size] for start in range(0, len(texts), batch_size)]
    vectors = np.concatenate([encode(batch) for batch in batches])  # also the warm-up
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for batch in batches:
            encode(batch)
        best = min(best, time.perf_counter() - start)
    singles = texts[:latency_texts]
    for text in singles[:5]:
        encode([text])
    latencies = []
    for text in singles:
        start = time.perf_counter()
        encode([text])
        latencies.append(time.perf_counter() - start)
    return vectors, {"texts_per_second": len(texts) / best, "latency_ms": 1000 * statistics.median(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=["st_train", "onnx_export", *SIDES])
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency_texts", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mixed_precision", default="float32")
    args = parser.parse_args()
    limit_threads(args.threads)
    if args.side == "st_train":
        st_train(args.model, args.data, args.out, args.threads, args.seed, args.mixed_precision)
        return
    if args.side == "onnx_export":
        onnx_export(args.model)
        return
    import numpy as np

    queries, passages = read_pairs(os.path.join(args.data, "dev.csv"))
    start = time.perf_counter()
    encode = SIDES[args.side](args.model, args.threads)
    load_seconds = time.perf_counter() - start
    vectors, result = measure(encode, passages, args.batch_size, args.rounds, args.latency_texts)
    np.save(args.out + ".npy", np.asarray(vectors, np.float32))
    # The quality of these vectors (quantized models differ): the dev queries against them.
    batches = [queries[start : start + args.batch_size] for start in range(0, len(queries), args.batch_size)]
    result["mrr_at_10"] = mrr_at_10(np.concatenate([encode(batch) for batch in batches]), vectors)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump({**result, "load_seconds": load_seconds}, handle)


if __name__ == "__main__":
    sys.exit(main())
