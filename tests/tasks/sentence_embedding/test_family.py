"""The sentence-embedding family through the shared task checks (tests/harness/tasks.py) on a
tiny checkpoint: synthetic pairs learnt with in-batch negatives and scored pairs with CoSENT;
and the command line's refusals of bad input, with nothing written."""

import os
import pathlib
import random
import re
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.errors import UsageError
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.runner import run
from bert_tf.tasks.settings import FinetuneSettings
from tests.harness import data
from tests.harness.tasks import TaskCase, run_task_test

TOPICS = [(color, animal) for color in data.COLORS for animal in data.ANIMALS]
DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs" / "sentence-embeddings.md"


def topic_pairs(rng: random.Random, count: int, negatives: bool = False) -> list[tuple[str, ...]]:
    """(query, passage[, hard negative]): a query names a colour and an animal, its passage the
    colour and the animal's sound (so the model must learn which sound is whose); the hard
    negative has the colour and another animal's sound."""
    rows = []
    for color, animal in rng.sample(TOPICS, count):
        query = f"{rng.choice(data.FILLER)} {animal} {color}"
        passage = f"{color} {data.ANIMALS[animal]} {rng.choice(data.FILLER)}"
        other = rng.choice([name for name in data.ANIMALS if name != animal])
        negative = f"{color} {data.ANIMALS[other]} {rng.choice(data.FILLER)}"
        rows.append((query, passage, negative) if negatives else (query, passage))
    return rows


def write_table(path: str, header: tuple[str, ...], rows) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(",".join(header) + "\n" + "".join(",".join(map(str, row)) + "\n" for row in rows))
    return path


class SentenceEmbeddingFamilyTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="sentence_embedding_")
        keras.utils.set_random_seed(1)
        cls.checkpoint = data.tiny_checkpoint(cls.dir, data.write_vocab(cls.dir))

    def _case(self, **fields) -> TaskCase:
        return TaskCase(
            model_class=bert_tf.BertSentenceEncoder,
            task="sentence_embedding",
            serve=lambda x: {"text": {"string": [row[0] for row in x]}},
            served=lambda outputs: outputs["embedding"],
            outputs=lambda vectors: np.asarray(vectors)[:, 0],  # the first texts' vectors
            max_seq_length=16,
            **fields,
        )

    @pytest.mark.slow  # ~80 s: learning, export, a fresh process, and the command line's run
    def test_pairs_with_in_batch_negatives(self):
        rng = random.Random(0)
        train, dev = topic_pairs(rng, 36, negatives=True), topic_pairs(rng, 24)
        case = self._case(
            x=train,
            y=None,
            dev_x=dev,
            dev_y=None,
            write_files=lambda root: {
                "train_file": write_table(
                    os.path.join(root, "train.csv"), ("text", "text_b", "negative"), train
                ),
                "negative_column": "negative",
            },
            learnt=0.6,  # untrained: about 0.4
            epochs=6,
            batch_size=12,
        )
        run_task_test(self, case, self.checkpoint)

    @pytest.mark.slow  # ~80 s, as above
    def test_scored_pairs_with_cosent(self):
        rng = random.Random(0)
        train, dev = data.similarity_pairs(rng, 96), data.similarity_pairs(rng, 32)
        case = self._case(
            x=[(a, b) for a, b, _ in train],
            y=[score for _, _, score in train],
            dev_x=[(a, b) for a, b, _ in dev],
            dev_y=[score for _, _, score in dev],
            options={"loss": "cosent"},
            write_files=lambda root: {
                "train_file": data.write_pairs(os.path.join(root, "train.csv"), train),
                "label_column": "label",
            },
            learnt=0.6,
        )
        run_task_test(self, case, self.checkpoint)

    def _run(self, root, **settings):
        defaults = {
            "max_seq_length": 16,
            "train_batch_size": 12,
            "num_train_epochs": 3,
            "learning_rate": 1e-3,
        }
        return run(
            FinetuneSettings.of(
                task="sentence_embedding",
                init_checkpoint=self.checkpoint,
                output_dir=os.path.join(root, "out"),
                seed=1,
                verbose=0,
                **{**defaults, **settings},
            )
        )

    def test_command_line_scores_retrieval_and_writes_vectors(self):
        root = tempfile.mkdtemp()
        rng = random.Random(1)
        train, dev = topic_pairs(rng, 36), topic_pairs(rng, 20)
        header = ("query", "passage")
        results = self._run(
            root,
            train_file=write_table(os.path.join(root, "train.csv"), header, train),
            eval_file=write_table(os.path.join(root, "dev.csv"), header, dev),
            predict_file=write_table(os.path.join(root, "texts.csv"), ("query",), [(q,) for q, _ in dev]),
            text_column="query",
            text_b_column="passage",
        )
        self.assertEqual(sorted(results), ["eval_loss", "mrr_at_10", "recall_at_1", "recall_at_10"])
        out = os.path.join(root, "out")
        model = bert_tf.BertSentenceEncoder.from_pretrained(os.path.join(out, "model"))
        vectors = np.load(os.path.join(out, "eval_embeddings.npy"))  # [pairs, 2, hidden]
        self.assertAllClose(vectors[:, 0], model.encode([q for q, _ in dev]), atol=1e-5)
        self.assertAllClose(np.load(os.path.join(out, "predict_embeddings.npy")), vectors[:, 0], atol=1e-5)
        # The top 10 of each anchor, best first, and the ranks behind MRR@10.
        lines = open(os.path.join(out, "eval_top10.tsv")).read().splitlines()[1:]
        self.assertEqual(len(lines), 10 * len(dev))
        first = [line.split("\t") for line in lines[:10]]
        similarities = [float(row[3]) for row in first]
        self.assertEqual(similarities, sorted(similarities, reverse=True))
        passages = model.encode([p for _, p in dev])
        self.assertAllClose(similarities[0], float((passages @ vectors[0, 0]).max()), atol=1e-5)
        recall_at_1 = np.mean([ln.split("\t")[0] == ln.split("\t")[2] for ln in lines[::10]])
        self.assertAllClose(results["recall_at_1"], recall_at_1)

    def test_bad_input_is_refused_with_nothing_written(self):
        rng = random.Random(2)
        pairs = topic_pairs(rng, 8)
        cases = {
            "missing second column": (
                {"train_file": ("text", "other"), "text_b_column": "text_b"},
                "no column 'text_b', the anchor's positive",
            ),
            "single texts for pairs": (
                {"train_file": ("text",)},
                "no column 'text_b', the anchor's positive",
            ),
            "score outside [0, 1]": (
                {"train_file": ("text", "text_b", "label"), "score": 3.5},
                r"outside \[0, 1\]",
            ),
            "score not a number": (
                {"train_file": ("text", "text_b", "label"), "score": "high"},
                "not a number",
            ),
            "empty dev set": ({"train_file": ("text", "text_b"), "eval_file": ()}, "has no examples"),
            # Found by the reader inside tf.data (the first rows are read before it): its own line.
            "an empty positive on a later row": (
                {"train_file": ("text", "text_b"), "empty_at": 2},
                r"^\S+train_file.csv line 4: the second text is empty; remove the row or fill it in$",
            ),
            "batch of one": (
                {"train_file": ("text", "text_b"), "train_batch_size": 1},
                "no in-batch negatives",
            ),
        }
        for name, (spec, message) in cases.items():
            root = tempfile.mkdtemp()
            spec = dict(spec)
            settings = {key: spec.pop(key) for key in ("text_b_column", "train_batch_size") if key in spec}
            score, empty_at = spec.pop("score", None), spec.pop("empty_at", None)
            for split, header in spec.items():
                rows = [(*row[: len(header)], score)[: len(header)] for row in pairs] if header else []
                if empty_at is not None:
                    rows[empty_at] = (rows[empty_at][0], "")
                settings[split] = write_table(
                    os.path.join(root, f"{split}.csv"), header or ("text", "text_b"), rows
                )
            if score is not None:
                settings["label_column"] = "label"
            with self.assertRaisesRegex((UsageError, TaskDataError), message, msg=name) as raised:
                self._run(root, **settings)
            self.assertNotIn("\n", str(raised.exception), name)
            self.assertFalse(os.path.exists(os.path.join(root, "out")), name)

    def test_single_texts_run_packed(self):
        model = bert_tf.BertSentenceEncoder.from_pretrained(self.checkpoint, max_seq_length=16)
        rng = random.Random(6)
        texts = [" ".join(rng.choices(data.FILLER, k=rng.randint(1, 14))) for _ in range(40)]
        vectors = model.encode(texts, batch_size=8)
        family = model._encoding.family
        batch = next(iter(family.batches(family.python_data(texts, None, "predict"), 8, by_length=True)))
        self.assertIn("cls_positions", batch["inputs"])  # several texts to a row
        self.assertLess(batch["inputs"]["input_ids"].shape[0], 8)
        family.pack_texts = False  # the same batches, a row per text
        self.assertAllClose(model.encode(texts, batch_size=8), vectors, atol=1e-5)

    def test_fit_compiles_with_xla(self):
        # In-model packing has data-dependent shapes, which XLA refuses: jit_compile=True trains
        # on the rows unpacked (it crashed inside TensorFlow's XLA bridge before).
        model = bert_tf.BertSentenceEncoder.from_pretrained(self.checkpoint, max_seq_length=16)
        model.compile(learning_rate=1e-3, jit_compile=True)
        before = [np.array(w) for w in model.get_weights()]
        history = model.fit(topic_pairs(random.Random(4), 8), batch_size=4, epochs=1, seed=1, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][-1]))
        self.assertTrue(any(not np.allclose(a, b) for a, b in zip(before, model.get_weights(), strict=True)))

    def test_the_docs_training_snippet_runs(self):
        """docs/sentence-embeddings.md's training block as a user pastes it, on the tiny
        checkpoint: pairs fit, evaluate scores retrieval, the saved folder gives the same
        vectors, and scored pairs fit with CoSENT."""
        blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
        code = next(block for block in blocks if "model.fit(" in block)
        saved = os.path.join(tempfile.mkdtemp(dir=self.get_temp_dir()), "my_encoder")
        code = code.replace('"all-MiniLM-L6-v2/"', repr(self.checkpoint)).replace('"my_encoder"', repr(saved))
        code = code.replace("max_seq_length=128", "max_seq_length=16")  # the tiny model has 64 positions
        code = code.replace("model.evaluate(dev_pairs)", "scores = model.evaluate(dev_pairs)")
        # What a user has after the page's first block, and the dev pairs the block names.
        scope = {"bert_tf": bert_tf, "dev_pairs": topic_pairs(random.Random(4), 8)}
        exec(compile(code, str(DOCS), "exec"), scope)  # noqa: S102 - the documented snippet itself
        self.assertContainsSubset({"mrr_at_10", "recall_at_1", "recall_at_10", "eval_loss"}, scope["scores"])
        texts = ["how to read a file", "sort a list"]
        reloaded = bert_tf.BertSentenceEncoder.from_pretrained(saved)
        self.assertAllClose(reloaded.encode(texts), scope["model"].encode(texts), atol=1e-6)
        self.assertEqual(scope["scored"].task_info.kind, "cosent")

    def test_python_refusals(self):
        model = bert_tf.BertSentenceEncoder.from_pretrained(self.checkpoint, max_seq_length=16)
        model.compile()
        pairs = topic_pairs(random.Random(3), 4)
        with self.assertRaisesRegex(UsageError, "no in-batch negatives"):
            model.fit(pairs, batch_size=1, verbose=0)
        with self.assertRaisesRegex(UsageError, "not single texts"):
            model.fit([q for q, _ in pairs], verbose=0)
        with self.assertRaisesRegex(UsageError, "loss='cosent'"):
            model.fit(pairs, [0.5] * 4, verbose=0)
        with self.assertRaisesRegex(UsageError, r"outside \[0, 1\]"):
            model.evaluate(pairs, [0.5, 2.0, 0.1, 0.3])
