"""A task family written outside bert_tf (tests/tasks/pair_similarity.py, the docs' example)
runs everywhere a built-in one does, with no change to bert_tf: the command line's
--task=MODULE:CLASS, Python fine-tuning, the saved folder and its reload, the raw-text
SavedModel, evaluation and prediction files; and a folder whose family is gone is refused."""

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.serving.exporter import export_saved_model
from bert_tf.tasks.finetuned import read_info
from bert_tf.tasks.runner import run
from bert_tf.tasks.settings import FinetuneSettings
from tests.harness import data, processes
from tests.tasks import pair_similarity

REPO = Path(__file__).resolve().parents[2]
FAMILY = "tests.tasks.pair_similarity:CosineSimilarityFamily"


class OwnFamilyTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="own_family_")
        keras.utils.set_random_seed(1)
        cls.checkpoint = data.tiny_checkpoint(cls.dir, data.write_vocab(cls.dir))
        rng = random.Random(0)
        cls.train, cls.dev = data.similarity_pairs(rng, 96), data.similarity_pairs(rng, 32)
        cls.train_file = data.write_pairs(os.path.join(cls.dir, "train.csv"), cls.train)
        cls.dev_file = data.write_pairs(os.path.join(cls.dir, "dev.csv"), cls.dev)

    def test_the_docs_page_shows_this_family_as_it_is(self):
        page = (REPO / "docs" / "task-families.md").read_text(encoding="utf-8")
        shown = re.search(r"```python\n(.*?)```", page, re.S).group(1)
        self.assertEqual(shown, (REPO / "tests" / "tasks" / "pair_similarity.py").read_text(encoding="utf-8"))

    def test_the_command_line_fine_tunes_evaluates_predicts_and_saves_it(self):
        output_dir = os.path.join(self.dir, "cli")
        command = [
            sys.executable,
            "-m",
            "bert_tf.finetune",
            f"--task={FAMILY}",
            f"--init_checkpoint={self.checkpoint}",
        ]
        command += [
            f"--train_file={self.train_file}",
            f"--eval_file={self.dev_file}",
            f"--predict_file={self.dev_file}",
        ]
        command += [f"--output_dir={output_dir}", "--max_seq_length=16", "--train_batch_size=16"]
        command += ["--num_train_epochs=6", "--learning_rate=1e-3", "--label_column=label", "--seed=3"]
        result = subprocess.run(
            command, cwd=REPO, env=processes.environment(), capture_output=True, text=True, timeout=600
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        with open(os.path.join(output_dir, "eval_results.json")) as handle:
            scores = json.load(handle)
        self.assertGreater(scores["spearman"], 0.6)  # it learnt which pairs match
        self.assertIn(f"spearman = {scores['spearman']:.4f}", result.stdout)
        predictions = Path(output_dir, "predict_predictions.tsv").read_text().splitlines()
        self.assertEqual(len(predictions), 1 + len(self.dev))
        info = read_info(os.path.join(output_dir, "model"))
        self.assertEqual(
            (info.family, info.kind, info.options["text_b_column"]), (FAMILY, "cosine_similarity", "text_b")
        )
        # Its options are the program's flags, listed by --helpshort with the family named.
        listed = subprocess.run(
            [sys.executable, "-m", "bert_tf.finetune", f"--task={FAMILY}", "--helpshort"],
            cwd=REPO, env=processes.environment(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        self.assertIn("--text_b_column", listed.stdout)

    def test_python_fits_saves_reloads_and_exports_it(self):
        keras.utils.set_random_seed(2)
        model = pair_similarity.CosineSimilarity.from_pretrained(self.checkpoint, max_seq_length=16)
        model.compile(learning_rate=1e-3)
        x, y = [(a, b) for a, b, _ in self.train], [score for _, _, score in self.train]
        model.fit(x, y, batch_size=16, epochs=6, seed=3, verbose=0)
        dev_x, dev_y = [(a, b) for a, b, _ in self.dev], [score for _, _, score in self.dev]
        scores = model.evaluate(dev_x, dev_y)
        self.assertGreater(scores["spearman"], 0.6)
        predicted = model.predict(dev_x)
        self.assertEqual(predicted.shape, (len(dev_x),))
        folder = model.save(os.path.join(self.dir, "python", "model"))
        self.assertEqual(read_info(folder).family, FAMILY)
        reloaded = pair_similarity.CosineSimilarity.from_pretrained(folder)
        self.assertAllClose(reloaded.predict(dev_x), predicted, atol=1e-6)
        # The raw-text SavedModel, served in a process that imports neither bert_tf nor this module.
        export_dir = export_saved_model("task", folder, os.path.join(self.dir, "export"))
        served = processes.run_in_fresh_process(
            [
                {
                    "name": "similarity",
                    "export_dir": export_dir,
                    "endpoint": "signature:serving_default",
                    "kwargs": {
                        "text_a": {"string": [a for a, _ in dev_x]},
                        "text_b": {"string": [b for _, b in dev_x]},
                    },
                }
            ],
            tempfile.mkdtemp(dir=self.dir),
        )
        self.assertAllClose(served["similarity/score"], predicted, atol=1e-5)
        self.assertEqual(list(served["__bert_tf_modules__"]), [])

    def test_a_folder_whose_family_is_gone_is_refused_in_one_line(self):
        keras.utils.set_random_seed(2)
        model = pair_similarity.CosineSimilarity.from_pretrained(self.checkpoint, max_seq_length=16)
        folder = model.save(os.path.join(self.dir, "gone", "model"))
        path = os.path.join(folder, "task.json")
        with open(path) as handle:
            values = json.load(handle)
        with open(path, "w") as handle:
            json.dump({**values, "family": "a_module_removed_since:CosineSimilarityFamily"}, handle)
        with self.assertRaisesRegex(
            UsageError, "names the task family a_module_removed_since:.*no module named"
        ) as raised:
            pair_similarity.CosineSimilarity.from_pretrained(folder)
        self.assertNotIn("\n", str(raised.exception))
        output_dir = os.path.join(self.dir, "never")
        with self.assertRaisesRegex(UsageError, "no module named 'a_module_removed_since'"):
            run(
                FinetuneSettings(
                    task=FAMILY, init_checkpoint=folder, output_dir=output_dir, eval_file=self.dev_file
                )
            )
        self.assertFalse(os.path.exists(output_dir))
        self.assertTrue(np.isfinite(model.predict([("a dog", "a dog")])).all())


if __name__ == "__main__":
    tf.test.main()
