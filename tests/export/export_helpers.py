"""Shared by the export tests: the original feature rules, the fresh-process loader and one
fine-tuned classifier with its float task SavedModel."""

import dataclasses
import functools
import json
import os
import random
import subprocess
import sys
import tempfile

import keras
import numpy as np

from bert_tf.config import load_config
from bert_tf.serving.exporter import export_saved_model
from bert_tf.tasks.runner import FinetuneSettings, run

LOADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "load_exported.py")
VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "bert_uncased_vocab.txt")

CLS, SEP, PAD = 101, 102, 0


def original_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """A transcription of the rule in the original run_classifier.py."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def original_features(tokens_a, tokens_b, max_seq_length):
    """input_ids/input_mask/segment_ids as the original convert_single_example builds them."""
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b is not None else None
    if tokens_b is not None:
        original_truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        tokens_a = tokens_a[: max_seq_length - 2]
    ids = [CLS] + tokens_a + [SEP]
    segments = [0] * len(ids)
    if tokens_b is not None:
        ids += tokens_b + [SEP]
        segments += [1] * (len(tokens_b) + 1)
    mask = [1] * len(ids)
    padding = max_seq_length - len(ids)
    return ids + [PAD] * padding, mask + [0] * padding, segments + [0] * padding


def run_in_fresh_process(calls: list, work_dir: str) -> dict:
    """Runs load_exported.py on `calls` in a new interpreter; returns its outputs.

    The child gets no PYTHONPATH and runs from `work_dir`, so bert_tf is importable only
    if installed; load_exported.py reports whether anything imported it.
    """
    request = os.path.join(work_dir, "request.json")
    output = os.path.join(work_dir, "outputs.npz")
    with open(request, "w", encoding="utf-8") as file:
        json.dump(calls, file)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [sys.executable, LOADER, request, output],
        cwd=work_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise AssertionError(f"fresh-process loader failed:\n{result.stderr[-4000:]}")
    with np.load(output) as arrays:
        return {key: arrays[key] for key in arrays.files}


def strings(values) -> dict:
    return {"string": list(values)}


def int32(values) -> dict:
    return {"int32": np.asarray(values).tolist()}


def tiny_config():
    return load_config("bert_tiny").replace(hidden_size=32, intermediate_size=64, max_position_embeddings=64)


CLASSIFIER_SEQ_LENGTH = 20
WORDS = "the a movie film show plot actor was is very quite really so".split()


def labelled(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """Texts of four filler words and "good" (label pos) or "bad" (neg), shuffled."""
    rows = []
    for _ in range(count):
        label = rng.choice(["pos", "neg"])
        words = rng.sample(WORDS, 4) + ["good" if label == "pos" else "bad"]
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    return rows


def write_csv(path: str, rows) -> str:
    with open(path, "w", encoding="utf-8") as file:
        file.write("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows))
    return path


@dataclasses.dataclass(frozen=True)
class FineTunedClassifier:
    model_dir: str  # the runner's model folder
    dev_file: str  # 100 held-out rows of the same task
    float_export: str  # its task SavedModel (bert_tf.export --kind=task)


@functools.cache
def fine_tuned_classifier() -> FineTunedClassifier:
    """A tiny classifier fine-tuned by the real runner on a task it learns (the word "good" or
    "bad" decides the label), and its float task SavedModel.

    Fine-tuning and exporting once per test session serves every export test that needs a
    fine-tuned model; the folders are read-only to them (write exports elsewhere).
    """
    keras.utils.set_random_seed(3)
    root = tempfile.mkdtemp(prefix="bert_tf_fine_tuned_classifier_")
    config_path = os.path.join(root, "bert_config.json")
    tiny_config().to_json_file(config_path)
    rng = random.Random(5)
    dev_file = write_csv(os.path.join(root, "dev.csv"), labelled(rng, 100))
    run(
        FinetuneSettings(
            task="classification",
            output_dir=os.path.join(root, "cls"),
            vocab_file=VOCAB,
            bert_config=config_path,
            max_seq_length=CLASSIFIER_SEQ_LENGTH,
            train_file=write_csv(os.path.join(root, "train.csv"), labelled(rng, 128)),
            train_batch_size=16,
            num_train_epochs=8.0,
            learning_rate=3e-3,
            verbose=0,
        )
    )
    model_dir = os.path.join(root, "cls", "model")
    return FineTunedClassifier(
        model_dir, dev_file, export_saved_model("task", model_dir, os.path.join(root, "float"))
    )
