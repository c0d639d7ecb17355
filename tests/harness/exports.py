"""What the export tests share: a small config, labelled texts, and one fine-tuned classifier
with its float task SavedModel (fine-tuned once per test process)."""

import dataclasses
import functools
import os
import random
import tempfile

import keras
import numpy as np

from bert_tf.config import load_config
from bert_tf.serving.exporter import export_saved_model
from bert_tf.tasks.runner import FinetuneSettings, run
from tests.harness.data import UNCASED_VOCAB

VOCAB = UNCASED_VOCAB


def strings(values) -> dict:
    return {"string": list(values)}


def int32(values) -> dict:
    return {"int32": np.asarray(values).tolist()}


def export_config():
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


def write_labelled_csv(path: str, rows) -> str:
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
    export_config().to_json_file(config_path)
    rng = random.Random(5)
    dev_file = write_labelled_csv(os.path.join(root, "dev.csv"), labelled(rng, 100))
    run(
        FinetuneSettings.of(
            task="classification",
            output_dir=os.path.join(root, "cls"),
            vocab_file=VOCAB,
            bert_config=config_path,
            max_seq_length=CLASSIFIER_SEQ_LENGTH,
            train_file=write_labelled_csv(os.path.join(root, "train.csv"), labelled(rng, 128)),
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
