"""Fine-tuning on the JAX backend: the runner learns as it does on TensorFlow, and the saved
model reloads on TensorFlow with the same predictions. The JAX half runs in a new
interpreter (the Keras backend is fixed at import)."""

import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.tasks.finetuned import load_finetuned
from tests.harness.data import (
    majority_share,
    ner_sentences,
    regression_rows,
    sentiment_rows,
    squad_data,
    swag_rows,
    write_conll,
    write_csv,
    write_vocab,
)
from tests.harness.jax_backend import run_on_jax

FINETUNE_SCRIPT = """
import json, sys
import numpy as np, keras
from bert_tf.tasks.finetuned import load_finetuned
from bert_tf.tasks.runner import FinetuneSettings, run
from bert_tf.training.distribute import StrategyError, get_strategy
work, config, inputs_file = sys.argv[1:]
try:
    get_strategy("mirrored")
    strategy_error = None
except StrategyError as error:
    strategy_error = str(error)
results = run(FinetuneSettings.of(
    task="classification", output_dir=work + "/out", vocab_file=work + "/vocab.txt", bert_config=config,
    train_file=work + "/train.csv", eval_file=work + "/test.csv", max_seq_length=32, train_batch_size=16,
    learning_rate=2e-3, warmup_proportion=0.1, num_train_epochs=8, seed=1, verbose=0, eval_train=True))
model = load_finetuned(work + "/out/model")
np.save(work + "/jax_logits.npy", model.predict(dict(np.load(inputs_file)), verbose=0))
print("REPORT" + json.dumps(
    {"results": results, "backend": keras.backend.backend(), "strategy_error": strategy_error}))
"""


class JaxFinetuningTest(tf.test.TestCase):
    # ~30 s, run by default: the one fine-tuning on JAX that every test run covers.
    def test_classification_learns_on_jax_and_the_saved_model_predicts_the_same_on_tensorflow(self):
        work = self.get_temp_dir()
        vocab = write_vocab(work)
        rng = random.Random(0)
        train_rows, test_rows = sentiment_rows(rng, 200), sentiment_rows(rng, 100)
        write_csv(os.path.join(work, "train.csv"), train_rows)
        write_csv(os.path.join(work, "test.csv"), test_rows)
        config = os.path.join(work, "bert_config.json")
        tiny = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
        BertConfig(  # the model of test_learning.py
            vocab_size=len(open(vocab).read().split()),
            max_position_embeddings=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            **tiny,
        ).to_json_file(config)
        ids = np.random.default_rng(0).integers(5, 40, size=(6, 20)).astype("int32")
        ids[:, 0], ids[:, -1], ids[3:, 12:] = 2, 3, 0  # [CLS] ... [SEP], padding in half the rows
        inputs = {"input_ids": ids, "input_mask": (ids > 0).astype("int32"), "segment_ids": 0 * ids}
        np.savez(os.path.join(work, "inputs.npz"), **inputs)

        report = run_on_jax(FINETUNE_SCRIPT, work, config, os.path.join(work, "inputs.npz"))
        self.assertEqual(report["backend"], "jax")
        # A tf.distribute strategy asked for on JAX is refused with what to do.
        self.assertIn("needs the TensorFlow backend", report["strategy_error"])
        results = report["results"]
        # The thresholds test_learning.py holds the TensorFlow run to.
        self.assertGreater(results["train_accuracy"], 0.95, results)
        self.assertGreater(
            results["accuracy"], majority_share([r["label"] for r in test_rows]) + 0.2, results
        )

        model = load_finetuned(os.path.join(work, "out", "model"))
        info = model.task_info
        self.assertEqual(info.kind, "classification")
        self.assertAllClose(
            model.predict(inputs, verbose=0), np.load(os.path.join(work, "jax_logits.npy")), atol=1e-5, rtol=0
        )


FAMILIES_SCRIPT = """
import json, sys
import keras
from bert_tf.tasks.runner import FinetuneSettings, run
work, config, tasks = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
results = {}
for task, (train_file, extra) in tasks.items():
    results[task] = run(FinetuneSettings.of(
        task=task, output_dir=work + "/" + task, vocab_file=work + "/vocab.txt", bert_config=config,
        train_file=train_file, eval_file=train_file, max_seq_length=32, train_batch_size=8,
        num_train_epochs=1, verbose=0, **extra))
print("REPORT" + json.dumps({"results": results, "backend": keras.backend.backend()}))
"""


@pytest.mark.slow  # four fine-tuning runs on JAX; ~1 min
class JaxTaskFamiliesTest(tf.test.TestCase):
    def test_every_family_fine_tunes_on_jax_with_the_results_of_tensorflow_and_reloads_there(self):
        work = self.get_temp_dir()
        vocab = write_vocab(work)
        rng = random.Random(0)
        config = os.path.join(work, "bert_config.json")
        BertConfig(
            vocab_size=len(open(vocab).read().split()),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        ).to_json_file(config)
        squad = os.path.join(work, "squad.json")
        with open(squad, "w") as handle:
            json.dump(squad_data(rng, 40, "t"), handle)
        tasks = {
            "regression": (
                write_csv(os.path.join(work, "reg.csv"), regression_rows(rng, 40)),
                {"label_column": "score"},
            ),
            "ner": (write_conll(os.path.join(work, "ner.txt"), ner_sentences(rng, 40)), {}),
            "swag": (write_csv(os.path.join(work, "swag.csv"), swag_rows(rng, 40)), {}),
            "squad": (squad, {}),
        }
        report = run_on_jax(FAMILIES_SCRIPT, work, config, json.dumps(tasks))
        self.assertEqual(report["backend"], "jax")
        expected = {  # the metrics eval_results.json holds for these tasks on TensorFlow
            "regression": {
                "pearson",
                "spearman",
                "eval_loss",
                "bag_of_words_pearson",
                "bag_of_words_spearman",
            },
            "ner": {"precision", "recall", "f1", "accuracy", "eval_loss"},
            "swag": {"accuracy", "eval_loss"},
            "squad": {"exact_match", "f1", "total"},
        }
        for task, names in expected.items():
            self.assertEqual(set(report["results"][task]), names, task)
            with open(os.path.join(work, task, "eval_results.json")) as handle:
                self.assertEqual(set(json.load(handle)), names, task)
            model = load_finetuned(os.path.join(work, task, "model"))  # here: TensorFlow
            info = model.task_info
            self.assertEqual(info.task, task)
            self.assertNotEmpty(model.weights)


if __name__ == "__main__":
    tf.test.main()
