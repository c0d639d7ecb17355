"""Test data: vocabs, corpora and the files of the synthetic tasks, built where a test asks.

Every word list, writer and the tiny checkpoint the tests share live here once:
`write_vocab` (any tokens; the synthetic tasks' by default), the synthetic tasks of the
fine-tuning tests (sentiment, a score, NER, SQuAD, SWAG) and their files, the pretraining
tests' tiny corpus and config, and a corpus of numbered documents.
"""

from __future__ import annotations

import collections
import csv
import json
import os
import random
from pathlib import Path

import numpy as np

from bert_tf.checkpoints.pretrained import export_pretrained
from bert_tf.config import BertConfig, load_config
from bert_tf.models import BertEncoder

REPO = Path(__file__).resolve().parents[2]
# The real bert-base-uncased vocab, which the package's tests ship.
UNCASED_VOCAB = str(REPO / "tests" / "fixtures" / "bert_uncased_vocab.txt")


def write_vocab(where, tokens=None) -> str:
    """A vocab file of `tokens` (default: the synthetic tasks' `TASK_TOKENS`), one per line,
    at `where`: a file path, or a folder (its vocab.txt)."""
    where = str(where)
    path = os.path.join(where, "vocab.txt") if os.path.isdir(where) else where
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(TASK_TOKENS if tokens is None else tokens) + "\n")
    return path


# --- the synthetic fine-tuning tasks ---------------------------------------------------------

POSITIVE = ["good", "great", "superb", "lovely", "fine", "nice", "brilliant", "charming"]


NEGATIVE = ["bad", "awful", "poor", "dreadful", "ugly", "boring", "terrible", "weak"]


FILLER = [
    "the",
    "movie",
    "was",
    "plot",
    "actor",
    "it",
    "and",
    "a",
    "scene",
    "film",
    "very",
    "story",
    "music",
    "cast",
]


PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank"]


CITIES = ["paris", "london", "rome", "berlin", "madrid", "oslo"]


COLORS = ["red", "blue", "green", "black", "white", "yellow"]


ANIMALS = {"dog": "barks", "cat": "meows", "cow": "moos", "duck": "quacks", "lion": "roars", "owl": "hoots"}


# fmt: off
OTHER = ["where", "does", "live", "lives", "in", "what", "color", "is", "who", "new", "york", "visited", "met", "then", "loud", "softly", "today", ".", "?", "saw", "heard", "that", "of", "like", "likes", "born"]


# fmt: on
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# The vocab of the synthetic tasks: every word they use, whole.
TASK_TOKENS = SPECIAL + sorted(
    set(
        POSITIVE
        + NEGATIVE
        + FILLER
        + PEOPLE
        + CITIES
        + COLORS
        + OTHER
        + list(ANIMALS)
        + list(ANIMALS.values())
    )
)


def sentiment_rows(rng, n):
    """Label: the polarity with more words among 1 or 3 polarity words hidden in filler."""
    rows = []
    for _ in range(n):
        k = rng.choice([1, 3])
        polarity = [rng.random() < 0.5 for _ in range(k)]
        words = [rng.choice(POSITIVE if p else NEGATIVE) for p in polarity]
        words += rng.sample(FILLER, rng.randint(3, 8))
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": "pos" if sum(polarity) * 2 > k else "neg"})
    return rows


def regression_rows(rng, n):
    """Score: the number of positive words (0-3) among filler and negative words."""
    rows = []
    for _ in range(n):
        k = rng.randint(0, 3)
        words = rng.sample(POSITIVE, k) + rng.sample(NEGATIVE, rng.randint(0, 2)) + rng.sample(FILLER, 4)
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "score": str(k)})
    return rows


def ner_sentences(rng, n):
    """Tags from a gazetteer: people are PER, cities (one of two words) LOC; "new" is
    also an ordinary adjective, so the tagger must look at the next word."""
    templates = [
        "{p} visited {c} .",
        "{p} met {q} in {c} .",
        "the new movie of {p} was very good .",
        "{p} lives in {c} then {q} visited {d} .",
        "a new story of {c} .",
    ]
    cities = [*CITIES, "new york"]
    sentences = []
    for _ in range(n):
        template = rng.choice(templates)
        people = rng.sample(PEOPLE, 2)
        places = rng.sample(cities, 2)
        text = template.format(p=people[0], q=people[1], c=places[0], d=places[1])
        words, tags = text.split(), []
        for i, word in enumerate(words):
            if word in PEOPLE:
                tags.append("B-PER")
            elif word in CITIES or (word == "new" and i + 1 < len(words) and words[i + 1] == "york"):
                tags.append("B-LOC")
            elif word == "york":
                tags.append("I-LOC")
            else:
                tags.append("O")
        sentences.append(list(zip(words, tags, strict=True)))
    return sentences


def write_conll(path, sentences):
    with open(path, "w") as handle:
        handle.write("-DOCSTART- O\n\n")
        for sentence in sentences:
            handle.write("".join(f"{word} {tag}\n" for word, tag in sentence) + "\n")
    return path


def squad_data(rng, n, prefix):
    """Templated questions whose answer type comes from the question: where someone lives,
    where someone else was born (another city: the template decides), or a color. The
    two sentences come in random order and cities may be two words ("new york")."""
    cities = [*CITIES, "new york"]
    paragraphs = []
    for i in range(n):
        person, other = rng.sample(PEOPLE, 2)
        home, birthplace = rng.sample(cities, 2)
        color = rng.choice(COLORS)
        sentences = [f"{person} lives in {home} and likes {color} .", f"{other} was born in {birthplace} ."]
        rng.shuffle(sentences)
        context = " ".join(sentences)
        question, answer, anchor = rng.choice(
            [
                (f"where does {person} live ?", home, f"{person} lives in "),
                (f"what color does {person} like ?", color, f"{home} and likes "),
                (f"where was {other} born ?", birthplace, f"{other} was born in "),
            ]
        )
        start = context.index(anchor) + len(anchor)
        qa = {
            "id": f"{prefix}{i}",
            "question": question,
            "answers": [{"text": answer, "answer_start": start}],
        }
        paragraphs.append({"context": context, "qas": [qa]})
    return {"version": "1.1", "data": [{"title": "towns", "paragraphs": paragraphs}]}


def swag_rows(rng, n):
    """Which sound goes with the animal: "i heard the cow ." + "it" + {moos, barks, ...}."""
    rows = []
    animals = list(ANIMALS)
    for _ in range(n):
        animal = rng.choice(animals)
        wrong = rng.sample([a for a in animals if a != animal], 3)
        label = rng.randrange(4)
        sounds = [ANIMALS[a] for a in wrong]
        sounds.insert(label, ANIMALS[animal])
        adverb = rng.choice(["loud", "softly", "today"])
        row = {"sent1": f"i {rng.choice(['heard', 'saw'])} the {animal} .", "sent2": "it"}
        row.update({f"ending{i}": f"{sound} {adverb} ." for i, sound in enumerate(sounds)})
        row["label"] = str(label)
        rows.append(row)
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def majority_share(values):
    return collections.Counter(values).most_common(1)[0][1] / len(values)


def tiny_checkpoint(directory, vocab):
    """A randomly initialised 2-layer, 64-wide encoder saved as a Google checkpoint folder
    (dropout off: the tasks are small and exact)."""
    config = BertConfig(
        vocab_size=len(open(vocab).read().split()),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    path = os.path.join(directory, "tiny_bert")
    return export_pretrained(
        BertEncoder(config), path, vocab_file=vocab, lower_case=True, formats=("google",)
    )


def squad_pairs(data):
    """(question, context) pairs and {"text", "answer_start"} answers of a SQuAD dict."""
    x, y = [], []
    for paragraph in data["data"][0]["paragraphs"]:
        qa = paragraph["qas"][0]
        x.append((qa["question"], paragraph["context"]))
        y.append(qa["answers"][0])
    return x, y


# --- pretraining -------------------------------------------------------------------------------

SENTENCES = [
    "the quick brown fox jumps over the lazy dog.",
    "a list is a mutable sequence of items.",
    "every function returns a value or none.",
    "the interpreter reads the source file line by line.",
    "classes bundle data and behavior together.",
    "an exception stops the normal flow of a program.",
]


def write_corpus(path: Path, documents: int = 6, sentences: list[str] = SENTENCES) -> str:
    """The pretraining tests' corpus: documents of three of `sentences` each."""
    # Documents of three sentences each, so NSP pairs and random next both occur.
    lines = []
    for index in range(documents):
        lines += [sentences[(index + k) % len(sentences)] for k in range(3)] + [""]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# A whole-word vocab of the tiny corpus: small, so steps are cheap.
CORPUS_TOKENS = SPECIAL + sorted(
    {word for sentence in SENTENCES for word in sentence.replace(".", " .").split()}
)


CORPUS_VOCAB_SIZE = len(CORPUS_TOKENS)


def write_config(path, config) -> str:
    """`config` (a BertConfig) as a bert_config.json at `path`."""
    config.to_json_file(path)
    return str(path)


def corpus_config(vocab_size: int = CORPUS_VOCAB_SIZE, dropout: float = 0.1):
    """bert_tiny over the tiny corpus's vocab (the pretraining tests' model)."""
    return load_config("bert_tiny").replace(
        vocab_size=vocab_size, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout
    )


NUMBERED_WORDS = "the quick brown fox jumps over a lazy dog while every function returns some value".split()


def write_numbered_corpus(path: Path, documents: int, first: int = 0) -> str:
    """Documents of 2-4 sentences, numbered so that no two are alike."""
    lines = []
    for index in range(first, first + documents):
        for sentence in range(2 + index % 3):
            words = [
                NUMBERED_WORDS[(index + sentence + k) % len(NUMBERED_WORDS)] for k in range(5 + sentence)
            ]
            lines.append(f"document {index} " + " ".join(words) + " .")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# --- a task learnt from one word, with its vocab and a one-layer config ------------------------

ONE_WORD_TASK_WORDS = ["good", "great", "fine", "bad", "awful", "poor", "the", "film", "was", "very"]


def write_one_word_task(root, n_train=24, n_eval=8):
    """A CSV task learnt from one word (positive or negative), a vocab and a tiny config."""
    rng = np.random.default_rng(0)
    paths = {}
    for name, n in (("train", n_train), ("dev", n_eval)):
        paths[name] = os.path.join(root, f"{name}.csv")
        with open(paths[name], "w") as handle:
            handle.write("text,label\n")
            for i in range(n):
                word = ONE_WORD_TASK_WORDS[i % 6]
                filler = " ".join(rng.choice(ONE_WORD_TASK_WORDS[6:], size=3))
                handle.write(f"{filler} {word},{'pos' if i % 6 < 3 else 'neg'}\n")
    paths["vocab"] = os.path.join(root, "vocab.txt")
    with open(paths["vocab"], "w") as handle:
        handle.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *ONE_WORD_TASK_WORDS]) + "\n")
    paths["config"] = os.path.join(root, "bert_config.json")
    with open(paths["config"], "w") as handle:
        json.dump(
            {
                "vocab_size": 5 + len(ONE_WORD_TASK_WORDS),
                "hidden_size": 16,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 32,
                "max_position_embeddings": 16,
            },
            handle,
        )
    return paths


def one_word_task_settings(paths, output_dir, **changes):
    """FinetuneSettings of a short run on `write_one_word_task`'s files (`paths`), with `changes`."""
    from bert_tf.tasks.settings import FinetuneSettings

    values = dict(
        task="classification",
        output_dir=output_dir,
        train_file=paths["train"],
        eval_file=paths["dev"],
        vocab_file=paths["vocab"],
        bert_config=paths["config"],
        max_seq_length=8,
        train_batch_size=4,
        eval_batch_size=8,
        num_train_epochs=2.0,
        verbose=0,
    )
    values.update(changes)
    return FinetuneSettings.of(**values)


# --- pairs of texts with a score: the task of tests/tasks/pair_similarity.py ------------------

SIMILARITY_TOPICS = ["dog", "cat", "cow", "duck"]


def similarity_pairs(rng: random.Random, count: int) -> list[tuple[str, str, float]]:
    """Two short texts about an animal each: score 1.0 when it is the same animal, else 0.0."""
    rows = []
    for index in range(count):
        first = rng.choice(SIMILARITY_TOPICS)
        second = first if index % 2 else rng.choice([topic for topic in SIMILARITY_TOPICS if topic != first])
        texts = [" ".join([*rng.sample(FILLER, 2), topic]) for topic in (first, second)]
        rows.append((texts[0], texts[1], 1.0 if first == second else 0.0))
    return rows


def write_pairs(path: str, rows) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("text,text_b,label\n" + "".join(f"{a},{b},{score}\n" for a, b, score in rows))
    return path
