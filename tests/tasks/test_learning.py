"""Proof that fine-tuning learns: each task family, end to end through the Python task models.

A tiny encoder (2 layers, hidden 64) from random initialisation - the honest test for a
model this small - is fine-tuned on synthetic but non-trivial tasks built here with a
small vocab, from raw text with `from_pretrained` -> `compile()` -> `fit` (the objects the
command line drives too: tests/tasks/test_keras_task.py shows both give the same weights).
Each must fit its training set and beat the majority baseline on held-out examples it never
saw.
"""

import collections
import csv
import os
import random

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.checkpoints.pretrained import export_pretrained
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder
from bert_tf.tasks.metrics import squad_exact_match

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


def write_vocab(directory):
    words = SPECIAL + sorted(
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
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w") as handle:
        handle.write("\n".join(words) + "\n")
    return path


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


class LearningTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        self.vocab = write_vocab(self.dir)
        self.rng = random.Random(0)
        tf.keras.utils.set_random_seed(1)
        self.checkpoint = tiny_checkpoint(self.dir, self.vocab)

    def model(self, cls, **kwargs):
        # Seeded as `python -m bert_tf.finetune --seed=1` seeds a run: the head's initial
        # weights and dropout are those of the command line's run.
        tf.keras.utils.set_random_seed(1)
        return cls.from_pretrained(self.checkpoint, **kwargs)

    def fit(self, model, x, y, epochs, learning_rate=2e-3, batch_size=16):
        model.compile(learning_rate=learning_rate)
        model.fit(x, y, batch_size=batch_size, epochs=epochs, seed=1, verbose=0)
        return model

    # ~26 s; by default: the runner's classifier learns its task (test_quantize: >= 0.9 dev
    # accuracy) and fit here reaches the runner's weights (test_keras_task).
    @pytest.mark.slow
    def test_classification_learns_sentiment(self):
        train_rows, test_rows = sentiment_rows(self.rng, 200), sentiment_rows(self.rng, 100)
        model = self.model(bert_tf.BertClassifier, label_list=["neg", "pos"], max_seq_length=32)
        self.fit(model, [r["text"] for r in train_rows], [r["label"] for r in train_rows], epochs=8)
        train = model.evaluate([r["text"] for r in train_rows], [r["label"] for r in train_rows])
        results = model.evaluate([r["text"] for r in test_rows], [r["label"] for r in test_rows])
        baseline = majority_share([r["label"] for r in test_rows])
        print("classification:", train, results, "majority baseline", baseline)
        self.assertGreater(train["accuracy"], 0.95)
        self.assertGreater(results["accuracy"], baseline + 0.2)
        # predict -> label names agrees with the scored accuracy
        names = model.label_names(model.predict([r["text"] for r in test_rows]))
        self.assertAllClose(
            np.mean([n == r["label"] for n, r in zip(names, test_rows, strict=True)]), results["accuracy"]
        )

    @pytest.mark.slow  # the classification path with an MSE head; ~40 s
    def test_regression_learns_to_count(self):
        train_rows, test_rows = regression_rows(self.rng, 200), regression_rows(self.rng, 100)
        model = self.model(bert_tf.BertClassifier, num_classes=1, max_seq_length=32)
        self.fit(model, [r["text"] for r in train_rows], [float(r["score"]) for r in train_rows], epochs=10)
        train = model.evaluate([r["text"] for r in train_rows], [float(r["score"]) for r in train_rows])
        results = model.evaluate([r["text"] for r in test_rows], [float(r["score"]) for r in test_rows])
        scores = np.array([float(r["score"]) for r in test_rows])
        baseline_mse = float(np.mean((scores - np.mean([float(r["score"]) for r in train_rows])) ** 2))
        print("regression:", train, results, "predict-the-mean MSE", baseline_mse)
        self.assertGreater(train["pearson"], 0.95)
        self.assertGreater(results["pearson"], 0.8)
        self.assertLess(results["eval_loss"], 0.5 * baseline_mse)  # eval_loss is the MSE

    @pytest.mark.slow  # ~40-65 s; the token path runs by default in tests/tasks/test_runner*.py
    def test_token_tagging_learns_a_gazetteer(self):
        train_sentences, test_sentences = ner_sentences(self.rng, 200), ner_sentences(self.rng, 100)
        tags = sorted({tag for sentence in train_sentences for _, tag in sentence})
        model = self.model(bert_tf.BertTokenClassifier, label_list=tags, max_seq_length=32)

        def split(sentences):
            return [[w for w, _ in s] for s in sentences], [[t for _, t in s] for s in sentences]

        self.fit(model, *split(train_sentences), epochs=6)
        train, results = model.evaluate(*split(train_sentences)), model.evaluate(*split(test_sentences))
        # The majority baseline tags everything O: entity F1 0.
        print("ner:", train, results)
        self.assertGreater(train["f1"], 0.95)
        self.assertGreater(results["f1"], 0.8)
        words, _ = split(test_sentences)
        predicted = model.label_names(model.predict(words))
        self.assertEqual([len(p) for p in predicted], [len(w) for w in words])  # one tag per word

    @pytest.mark.slow  # ~40 s; the SQuAD path runs by default in tests/tasks/test_runner.py
    def test_span_labeling_answers_templated_questions(self):
        train_data, test_data = squad_data(self.rng, 300, "t"), squad_data(self.rng, 100, "e")
        model = self.model(bert_tf.BertSpanLabeler, max_seq_length=48)
        # A model this small either learns to tie the question's name to its sentence or
        # plateaus at ~70% EM for a while; 16 epochs get past that for every seed tried.
        self.fit(model, *squad_pairs(train_data), epochs=16)
        train, results = model.evaluate(*squad_pairs(train_data)), model.evaluate(*squad_pairs(test_data))
        answers = [p["qas"][0]["answers"][0]["text"] for p in train_data["data"][0]["paragraphs"]]
        test_x, test_y = squad_pairs(test_data)
        most_common = collections.Counter(answers).most_common(1)[0][0]
        baseline = 100 * [a["text"] for a in test_y].count(most_common) / len(test_y)
        print("squad:", train, results, "most-frequent-answer baseline EM", baseline)
        self.assertGreater(train["exact_match"], 90.0)
        self.assertGreater(results["exact_match"], baseline + 30.0)
        # predict gives the answers that were scored; the saved folder rebuilds the same model.
        predicted = model.predict(test_x)
        exact = 100 * np.mean(
            [squad_exact_match(p, a["text"]) for p, a in zip(predicted, test_y, strict=True)]
        )
        self.assertAllClose(exact, results["exact_match"])
        again = bert_tf.BertSpanLabeler.from_pretrained(model.save(os.path.join(self.dir, "squad_model")))
        self.assertEqual((again.task_info.task, again.task_info.max_seq_length), ("squad", 48))
        self.assertEqual(again.predict(test_x), predicted)

    @pytest.mark.slow  # four sequences per example, 40 epochs (20 left it at 0.885 on train); ~70 s
    def test_multiple_choice_learns_which_ending_matches(self):
        def split(rows):
            x = [(r["sent1"], [f"{r['sent2']} {r[f'ending{i}']}" for i in range(4)]) for r in rows]
            return x, [int(r["label"]) for r in rows]

        train_rows, test_rows = swag_rows(self.rng, 200), swag_rows(self.rng, 100)
        model = self.model(bert_tf.BertMultipleChoice, max_seq_length=16)
        self.fit(model, *split(train_rows), epochs=40, learning_rate=1e-3)
        train, results = model.evaluate(*split(train_rows)), model.evaluate(*split(test_rows))
        baseline = majority_share([r["label"] for r in test_rows])
        print("swag:", train, results, "majority baseline", baseline)
        self.assertGreater(train["accuracy"], 0.95)
        self.assertGreater(results["accuracy"], baseline + 0.3)


if __name__ == "__main__":
    tf.test.main()
