"""Every task family, built-in or a user's, through the same checks (tests/harness/tasks.py):
fit on raw text learns, save -> from_pretrained, the SavedModel in a fresh process without
bert_tf, and the command line's driver and Python reach the same weights for a seed."""

import os
import random
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from tests.harness import data
from tests.harness.tasks import TaskCase, run_task_test
from tests.tasks import pair_similarity


class TaskFamiliesTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="task_families_")
        keras.utils.set_random_seed(1)
        cls.checkpoint = data.tiny_checkpoint(cls.dir, data.write_vocab(cls.dir))

    def test_classification(self):
        rng = random.Random(0)
        train, dev = data.sentiment_rows(rng, 200), data.sentiment_rows(rng, 48)
        case = TaskCase(
            model_class=bert_tf.BertClassifier,
            task="classification",
            x=[r["text"] for r in train],
            y=[r["label"] for r in train],
            dev_x=[r["text"] for r in dev],
            dev_y=[r["label"] for r in dev],
            head={"label_list": ["neg", "pos"]},
            write_files=lambda root: {"train_file": data.write_csv(os.path.join(root, "train.csv"), train)},
            serve=lambda x: {"text": {"string": x}},
            served=lambda outputs: outputs["probabilities"],
            outputs=lambda logits: tf.nn.softmax(logits).numpy(),
            learnt=0.7,
            epochs=8,
            learning_rate=2e-3,
        )
        run_task_test(self, case, self.checkpoint)

    @pytest.mark.slow  # ~45 s; tests/tasks/test_own_family.py runs the same family through the command line and Python by default
    def test_a_family_of_a_users_own(self):
        rng = random.Random(0)
        train, dev = data.similarity_pairs(rng, 96), data.similarity_pairs(rng, 32)
        case = TaskCase(
            model_class=pair_similarity.CosineSimilarity,
            task="tests.tasks.pair_similarity:CosineSimilarityFamily",
            x=[(a, b) for a, b, _ in train],
            y=[score for _, _, score in train],
            dev_x=[(a, b) for a, b, _ in dev],
            dev_y=[score for _, _, score in dev],
            write_files=lambda root: {"train_file": data.write_pairs(os.path.join(root, "train.csv"), train)},
            serve=lambda x: {
                "text_a": {"string": [a for a, _ in x]},
                "text_b": {"string": [b for _, b in x]},
            },
            served=lambda outputs: outputs["score"],
            learnt=0.6,
            max_seq_length=16,
        )
        run_task_test(self, case, self.checkpoint)

    @pytest.mark.slow  # ~3 minutes: windows of every context
    def test_span(self):
        rng = random.Random(0)
        train, dev = data.squad_data(rng, 300, "t"), data.squad_data(rng, 48, "d")
        (x, y), (dev_x, dev_y) = data.squad_pairs(train), data.squad_pairs(dev)

        def write_files(root):
            path = os.path.join(root, "train.json")
            with open(path, "w") as handle:
                handle.write(__import__("json").dumps(train))
            return {"train_file": path}

        case = TaskCase(
            model_class=bert_tf.BertSpanLabeler,
            task="squad",
            x=x,
            y=y,
            dev_x=dev_x,
            dev_y=dev_y,
            write_files=write_files,
            serve=lambda x: {
                "question": {"string": [q for q, _ in x]},
                "context": {"string": [c for _, c in x]},
            },
            served=lambda outputs: np.array([a.decode() for a in outputs["answer"]]),
            outputs=lambda answers: np.array(answers),
            learnt=50.0,
            options={"max_query_length": 16},  # a question and its context in 48 pieces
            max_seq_length=48,
            epochs=16,  # past the plateau a model this small can rest on (tests/tasks/test_learning.py)
            learning_rate=2e-3,
        )
        run_task_test(self, case, self.checkpoint)

    @pytest.mark.slow  # ~1 minute
    def test_token(self):
        rng = random.Random(0)
        train, dev = data.ner_sentences(rng, 128), data.ner_sentences(rng, 32)
        # The command line's label order for tags read from the training data: "O", then sorted.
        tags = ["O", *sorted({tag for sentence in train for _, tag in sentence} - {"O"})]

        def split(sentences):
            return [[w for w, _ in s] for s in sentences], [[t for _, t in s] for s in sentences]

        (x, y), (dev_x, dev_y) = split(train), split(dev)
        case = TaskCase(
            model_class=bert_tf.BertTokenClassifier,
            task="ner",
            x=x,
            y=y,
            dev_x=dev_x,
            dev_y=dev_y,
            head={"label_list": tags},
            write_files=lambda root: {"train_file": data.write_conll(os.path.join(root, "train.txt"), train)},
            serve=lambda x: {"text": {"string": [" ".join(words) for words in x]}},
            served=lambda outputs: outputs["num_entities"],
            # An entity starts at every B- tag, and at an I- tag after another type or O (seqeval's IOB2).
            outputs=lambda logits: np.array([_entities(tags, words) for words in _tags(tags, logits)]),
            learnt=0.6,
        )
        run_task_test(self, case, self.checkpoint)

    @pytest.mark.slow  # ~1 minute: four sequences per example
    def test_choice(self):
        rng = random.Random(0)
        train, dev = data.swag_rows(rng, 128), data.swag_rows(rng, 32)

        def split(rows):
            x = [(r["sent1"], [f"{r['sent2']} {r[f'ending{i}']}" for i in range(4)]) for r in rows]
            return x, [int(r["label"]) for r in rows]

        (x, y), (dev_x, dev_y) = split(train), split(dev)
        case = TaskCase(
            model_class=bert_tf.BertMultipleChoice,
            task="swag",
            x=x,
            y=y,
            dev_x=dev_x,
            dev_y=dev_y,
            write_files=lambda root: {"train_file": data.write_csv(os.path.join(root, "train.csv"), train)},
            serve=lambda x: {
                "context": {"string": [c for c, _ in x]},
                "endings": {"string": [e for _, e in x]},
            },
            served=lambda outputs: outputs["probabilities"],
            outputs=lambda logits: tf.nn.softmax(logits).numpy(),
            learnt=0.4,
            max_seq_length=16,
            epochs=20,
        )
        run_task_test(self, case, self.checkpoint)


def _tags(tags, logits):
    return [[tags[i] for i in np.nan_to_num(sentence).argmax(axis=-1)] for sentence in logits]


def _entities(tags, sentence) -> int:
    count, previous = 0, "O"
    for tag in sentence:
        if tag.startswith("B-") or (tag.startswith("I-") and previous[2:] != tag[2:]):
            count += 1
        previous = tag
    return count


if __name__ == "__main__":
    tf.test.main()
