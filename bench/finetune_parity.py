"""Do ours and Hugging Face transformers train the same? The same steps, compared.

The fine-tuning benchmark's checkpoint and task (bench/finetune_task.py): the same first
`--steps` batches of 32 training rows, tokenized once by the checkpoint's own Hugging Face
tokenizer and padded to each batch's longest, train ours (`BertClassifier` compiled with
the fine-tuning recipe's optimizer, Keras' `train_on_batch`) and transformers'
`BertForSequenceClassification` (torch AdamW, weight decay 0.01 except biases and
LayerNorm, global-norm clipping 1.0, the same warmup-then-linear-decay schedule), both
with dropout off and ours' random classifier head copied into theirs. It prints both
losses step by step, the two models' largest dev-logit difference afterwards and their
dev accuracies. What is left over is the arithmetic of two frameworks, not a recipe
difference: any step of the recipe that differs shows up as losses that drift apart.

TensorFlow and torch do not share a process here (importing both crashes), so each side
runs in its own, exchanging arrays through `--workdir`. Needs the `bench` extra.

  python bench/finetune_parity.py              # 40 updates (about 2 minutes)
  python bench/finetune_parity.py --epsilon=1e-12   # epsilon out of the picture
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.finetune_task import default_model_dir, write_task  # noqa: E402

BATCH_SIZE, MAX_SEQ_LENGTH, LEARNING_RATE, WARMUP, DECAY = 32, 128, 5e-5, 0.1, 0.01


def prepare(args) -> None:
    """Tokenized batches (transformers' tokenizer) to `batches.npz`."""
    from transformers import AutoTokenizer

    paths = write_task(Path(args.workdir) / "data")

    def read(path):
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        return [row["text"] for row in rows], [row["label"] for row in rows]

    train_texts, train_labels = read(paths["train"])
    dev_texts, dev_labels = read(paths["dev"])
    labels = sorted(set(train_labels))
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    arrays = {}
    for step in range(args.steps):
        start = (step * BATCH_SIZE) % (len(train_texts) - BATCH_SIZE)
        rows = slice(start, start + BATCH_SIZE)
        encoded = tokenizer(train_texts[rows], padding=True, max_length=MAX_SEQ_LENGTH, truncation=True)
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            arrays[f"{name}_{step}"] = np.array(encoded[name], np.int32)
        arrays[f"labels_{step}"] = np.array([labels.index(label) for label in train_labels[rows]])
    encoded = tokenizer(dev_texts, padding="max_length", max_length=MAX_SEQ_LENGTH, truncation=True)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        arrays[f"{name}_dev"] = np.array(encoded[name], np.int32)
    arrays["labels_dev"] = np.array([labels.index(label) for label in dev_labels])
    np.savez(Path(args.workdir) / "batches.npz", num_classes=len(labels), **arrays)


def schedule(step: int, steps: int) -> float:
    """The original release's rate factor (ours' `WarmupLinearDecay`)."""
    warmup = int(steps * WARMUP)
    return step / warmup if step < warmup else max(0.0, 1 - step / steps)


def train_ours(args) -> None:
    import keras

    from bert_tf.checkpoints import from_pretrained
    from bert_tf.tasks.classification.family import ClassificationFamily
    from bert_tf.tasks.classification.model import BertClassifier
    from bert_tf.training import optimization

    data = np.load(Path(args.workdir) / "batches.npz")
    encoder, _ = from_pretrained(args.model_dir, heads="encoder")
    model = BertClassifier(encoder, num_classes=int(data["num_classes"]), dropout_rate=0.0)
    for layer in model._flatten_layers():  # the encoder's dropout too
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
        if hasattr(layer, "dropout_rate"):
            layer.dropout_rate = 0.0
    head = model.get_layer("classifier")
    optimizer = optimization.create_optimizer(
        LEARNING_RATE,
        num_train_steps=args.steps,
        num_warmup_steps=int(args.steps * WARMUP),
        **({"epsilon": args.epsilon} if args.epsilon else {}),
    )
    model.compile(optimizer=optimizer, **ClassificationFamily.compile_args("classification"))
    kernel, bias = head.kernel.numpy(), head.bias.numpy()

    def inputs(part):
        return {
            "input_ids": data[f"input_ids_{part}"],
            "input_mask": data[f"attention_mask_{part}"],
            "segment_ids": data[f"token_type_ids_{part}"],
        }

    losses = [
        model.train_on_batch(inputs(step), data[f"labels_{step}"], return_dict=True)["loss"]
        for step in range(args.steps)
    ]
    logits = model.predict(inputs("dev"), batch_size=64, verbose=0)
    np.savez(Path(args.workdir) / "ours.npz", kernel=kernel, bias=bias, losses=losses, logits=logits)


def train_hf(args) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    data = np.load(Path(args.workdir) / "batches.npz")
    ours = np.load(Path(args.workdir) / "ours.npz")
    config = AutoConfig.from_pretrained(
        args.model_dir,
        num_labels=int(data["num_classes"]),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = AutoModelForSequenceClassification.from_pretrained(args.model_dir, config=config)
    with torch.no_grad():
        model.classifier.weight.copy_(torch.tensor(ours["kernel"].T))
        model.classifier.bias.copy_(torch.tensor(ours["bias"]))
    no_decay = ("bias", "LayerNorm.weight")
    named = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in named if not any(d in n for d in no_decay)], "weight_decay": DECAY},
        {"params": [p for n, p in named if any(d in n for d in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=LEARNING_RATE, eps=args.epsilon or 1e-6)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: schedule(step, args.steps))

    def inputs(part):
        return {
            name: torch.tensor(data[f"{name}_{part}"].astype(np.int64))
            for name in ("input_ids", "attention_mask", "token_type_ids")
        }

    model.train()
    losses = []
    for step in range(args.steps):
        loss = model(**inputs(step), labels=torch.tensor(data[f"labels_{step}"])).loss
        loss.backward()
        losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    model.eval()
    dev = inputs("dev")
    with torch.no_grad():
        logits = np.concatenate(
            [
                model(**{name: value[i : i + 64] for name, value in dev.items()}).logits.numpy()
                for i in range(0, len(dev["input_ids"]), 64)
            ]
        )
    report(losses, logits, ours, data["labels_dev"])


def report(hf_losses, hf_logits, ours, dev_labels) -> None:
    print("step  loss ours  loss HF   difference")
    for step, (a, b) in enumerate(zip(ours["losses"], hf_losses, strict=True)):
        print(f"{step + 1:4d}  {a:9.5f}  {b:8.5f}  {a - b:+.1e}")
    difference = np.abs(ours["logits"] - hf_logits).max()
    print(
        f"dev logits after {len(hf_losses)} updates: largest difference {difference:.1e} "
        f"(mean |logit| {np.abs(hf_logits).mean():.3f})"
    )
    accuracy = [float((logits.argmax(-1) == dev_labels).mean()) for logits in (ours["logits"], hf_logits)]
    print(f"dev accuracy: ours {accuracy[0]:.4f}, Hugging Face {accuracy[1]:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="updates of each side")
    parser.add_argument("--epsilon", type=float, default=None, help="Adam epsilon of both (default: 1e-6)")
    parser.add_argument("--model_dir", default=None, help="a Hugging Face BERT folder (default: MiniLM)")
    parser.add_argument(
        "--workdir", default=None, help="where the arrays go (default: a temporary directory)"
    )
    parser.add_argument("--side", choices=("prepare", "ours", "hf"), default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        {"prepare": prepare, "ours": train_ours, "hf": train_hf}[args.side](args)
        return
    args.model_dir = args.model_dir or str(default_model_dir())
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_finetune_parity_")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "TOKENIZERS_PARALLELISM": "false",
    }
    for side in ("prepare", "ours", "hf"):
        command = [
            sys.executable,
            __file__,
            f"--side={side}",
            f"--steps={args.steps}",
            f"--model_dir={args.model_dir}",
            f"--workdir={workdir}",
        ] + ([f"--epsilon={args.epsilon}"] if args.epsilon else [])
        subprocess.run(command, check=True, env=env)


if __name__ == "__main__":
    main()
