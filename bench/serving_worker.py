"""One contender of `bench/serving.py`, measured in a process of its own.

Run by path, never imported by bert_tf, and imports only the runtime it measures (so a
contender's peak RSS is its own, and the ONNX Runtime contender can run in a virtualenv
without TensorFlow):

    python bench/serving_worker.py CONTENDER MODEL DEV_CSV OUT_JSON [--threads=2] ...

CONTENDER is one of
  savedmodel  a task SavedModel of `python -m bert_tf.export --kind=task` (MODEL: its folder),
              called through `serving_default` with raw text;
  tflite      the folder of `--kind=tflite`, served by `bert_tf.serving.litert.load` (a `LiteRTClassifier`)
              (no TensorFlow: Hugging Face's tokenizers and the LiteRT interpreter; a batch
              runs packed, the file's `serving_packed`);
  hf          transformers' pipeline("text-classification") on PyTorch (MODEL: a Hugging Face
              folder, as `--kind=huggingface` writes it);
  ort         the same pipeline on optimum's ORTModelForSequenceClassification (MODEL: an
              ONNX folder that `onnx_export` wrote);
  onnx_export writes that ONNX folder (MODEL: the Hugging Face folder, DEV_CSV: ignored,
              OUT_JSON: the folder to write), in a process of its own so its memory is
              nobody's peak.

Every contender reads DEV_CSV (text,label), predicts every text in batches of
--batch_size (its accuracy against the labels), then times --rounds passes over the dev
texts at that batch size (the best pass, texts/s) and --latency_texts single texts
(the median, ms). OUT_JSON gets {accuracy, texts_per_second, latency_ms, load_seconds}.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time


def read_dev(path: str) -> tuple[list[str], list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [row["text"] for row in rows], [row["label"] for row in rows]


def limit_threads(threads: int) -> None:
    """Before any runtime is imported: the math libraries read these at load time."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ[name] = str(threads)
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# --- the contenders: each returns predict(texts) -> label strings ------------------------


def savedmodel(model: str, threads: int, labels: list[str]):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

    # What a server sets: ops run on `threads` cores, one op at a time (TF Serving's
    # --tensorflow_intra_op_parallelism / --tensorflow_inter_op_parallelism).
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    signature = tf.saved_model.load(model).signatures["serving_default"]

    def predict(texts):
        return [label.decode() for label in signature(text=tf.constant(texts))["label"].numpy()]

    return predict


def tflite(model: str, threads: int, labels: list[str]):
    # What a Python server of the file runs: bert_tf's TensorFlow-free LiteRT client, which
    # tokenizes with Hugging Face's tokenizers and packs a batch (its `serving_packed`).
    from bert_tf.serving import litert

    classifier = litert.load(model, num_threads=threads)
    assert "tensorflow" not in sys.modules

    def predict(texts):
        return classifier(texts)["label"]

    return predict


def _pipeline(model, tokenizer):
    from transformers import pipeline

    classify = pipeline("text-classification", model=model, tokenizer=tokenizer, device="cpu")

    def predict(texts):
        if len(texts) == 1:  # one request, one string: a list would go through a DataLoader, far slower
            results = classify(texts[0], truncation=True, max_length=128)
            results = [results] if isinstance(results, dict) else results
        else:
            results = classify(texts, batch_size=len(texts), truncation=True, max_length=128)
        return [result["label"] for result in results]

    return predict


def hf(model: str, threads: int, labels: list[str]):
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    return _pipeline(model, model)


def ort(model: str, threads: int, labels: list[str]):
    import onnxruntime
    from optimum.onnxruntime import ORTModelForSequenceClassification

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    loaded = ORTModelForSequenceClassification.from_pretrained(model, session_options=options)
    return _pipeline(loaded, model)


def onnx_export(hf_dir: str, out_dir: str) -> None:
    from optimum.onnxruntime import ORTModelForSequenceClassification
    from transformers import AutoTokenizer

    ORTModelForSequenceClassification.from_pretrained(hf_dir, export=True).save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(hf_dir).save_pretrained(out_dir)


CONTENDERS = {"savedmodel": savedmodel, "tflite": tflite, "hf": hf, "ort": ort}


def measure(predict, texts, labels, batch_size: int, rounds: int, latency_texts: int) -> dict:
    batches = [texts[start : start + batch_size] for start in range(0, len(texts), batch_size)]
    predicted = [label for batch in batches for label in predict(batch)]  # also the warm-up
    accuracy = sum(p == t for p, t in zip(predicted, labels, strict=True)) / len(labels)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for batch in batches:
            predict(batch)
        best = min(best, time.perf_counter() - start)
    singles = texts[:latency_texts]
    for text in singles[:5]:
        predict([text])
    latencies = []
    for text in singles:
        start = time.perf_counter()
        predict([text])
        latencies.append(time.perf_counter() - start)
    return {
        "accuracy": accuracy,
        "texts_per_second": len(texts) / best,
        "latency_ms": 1000 * statistics.median(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("contender", choices=[*CONTENDERS, "onnx_export"])
    parser.add_argument("model")
    parser.add_argument("dev_csv")
    parser.add_argument("out_json")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--labels", default="", help="the class names in id order (tflite outputs ids)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency_texts", type=int, default=200)
    args = parser.parse_args()
    limit_threads(args.threads)
    if args.contender == "onnx_export":
        onnx_export(args.model, args.out_json)
        return
    texts, labels = read_dev(args.dev_csv)
    start = time.perf_counter()
    predict = CONTENDERS[args.contender](args.model, args.threads, args.labels.split(","))
    load_seconds = time.perf_counter() - start
    result = measure(predict, texts, labels, args.batch_size, args.rounds, args.latency_texts)
    with open(args.out_json, "w", encoding="utf-8") as handle:
        json.dump({**result, "load_seconds": load_seconds}, handle)


if __name__ == "__main__":
    sys.exit(main())
