"""The whole chain on a filesystem that is not the local disk.

TensorFlow's in-memory `ram://` filesystem stands in for `gs://`: a vocab learnt, TFRecords
generated, pretraining checkpointed and resumed, `from_pretrained` of the result,
fine-tuning, and a SavedModel exported and loaded, all on `ram://` paths, with nothing
written to a local folder named after the scheme.
"""

import os
import uuid
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import fileio
from bert_tf.config import load_config

REPO = Path(__file__).resolve().parents[1]
SENTENCES = [
    "the quick brown fox jumps over the lazy dog.",
    "a list is a mutable sequence of items.",
    "every function returns a value or none.",
    "the interpreter reads the source file line by line.",
    "classes bundle data and behavior together.",
    "an exception stops the normal flow of a program.",
]


@pytest.mark.slow  # ~70 s: the whole chain on ram://; ram:// reads and writes: tests/test_fileio.py
class RamFilesystemChainTest(tf.test.TestCase):
    def test_vocab_data_pretraining_resume_finetuning_and_export_on_ram(self):
        from bert_tf.checkpoints import from_pretrained
        from bert_tf.serving.exporter import export_saved_model
        from bert_tf.tasks.runner import run
        from bert_tf.tasks.settings import FinetuneSettings
        from bert_tf.training.pretraining import run_pretraining
        from bert_tf.training.settings import PretrainingConfig
        from pipelines.build_vocab import build_vocab
        from pipelines.generate import GenerationConfig, create_pretraining_data

        local_before = {path for path in os.listdir(".") if path.startswith("ram")}
        root = f"ram://chain_{uuid.uuid4().hex[:8]}"
        lines = []
        for index in range(24):
            lines += [SENTENCES[(index + k) % len(SENTENCES)] for k in range(3)] + [""]
        corpus = fileio.write_text(f"{root}/corpus.txt", "\n".join(lines) + "\n")

        vocab = build_vocab([corpus], 100, f"{root}/vocab.txt")
        vocab_file = f"{root}/vocab.txt"
        config_file = f"{root}/bert_config.json"
        load_config("bert_tiny").replace(vocab_size=len(vocab), max_position_embeddings=64).to_json_file(
            config_file
        )
        create_pretraining_data(
            GenerationConfig(
                input_file=corpus,
                output_file=f"{root}/data.tfrecord",
                vocab_file=vocab_file,
                max_seq_length=32,
                max_predictions_per_seq=5,
                dupe_factor=2,
            ),
            progress=False,
        )

        settings = PretrainingConfig(
            model_dir=f"{root}/model",
            config=config_file,
            vocab_file=vocab_file,
            train_files=f"{root}/data.tfrecord",
            train_batch_size=4,
            num_train_steps=4,
            num_warmup_steps=1,
            max_seq_length=32,
            max_predictions_per_seq=5,
            save_checkpoints_steps=2,
            steps_per_loop=2,
            fill_mask_demo=False,
        )
        first = run_pretraining(settings)
        self.assertEqual(first.train.step, 4)
        self.assertTrue(fileio.exists(f"{root}/model/input_state/worker_0/phase0-4.index"))
        longer = run_pretraining(PretrainingConfig(**{**settings.__dict__, "num_train_steps": 6}))
        self.assertEqual([entry["step"] for entry in longer.train.history], [6])  # resumed at 4
        self.assertTrue(longer.export_dir.startswith("ram://"))

        model, tokenizer_settings = from_pretrained(longer.export_dir)
        self.assertEqual(tokenizer_settings.vocab_file, f"{longer.export_dir}/vocab.txt")
        reader = tf.compat.v1.train.NewCheckpointReader(tf.train.latest_checkpoint(f"{root}/model"))
        saved_bias = next(
            reader.get_tensor(name)
            for name in reader.get_variable_to_shape_map()
            if name.startswith("model/") and "output_bias" in name and "OPTIMIZER" not in name
        )
        loaded_bias = next(w for w in model.weights if "output_bias" in w.path).numpy()
        self.assertAllClose(loaded_bias, saved_bias)

        train_csv = fileio.write_text(
            f"{root}/data/train.csv",
            "text,label\n" + "".join(f"{s},{'pos' if i % 2 else 'neg'}\n" for i, s in enumerate(SENTENCES)),
        )
        results = run(
            FinetuneSettings.of(
                task="classification",
                output_dir=f"{root}/finetuned",
                init_checkpoint=longer.export_dir,
                train_file=train_csv,
                eval_file=train_csv,
                max_seq_length=16,
                train_batch_size=3,
                num_train_epochs=1,
                verbose=0,
            )
        )
        self.assertIn("accuracy", " ".join(results))
        self.assertTrue(fileio.isfile(f"{root}/finetuned/model/model.keras"))

        exported = export_saved_model("task", f"{root}/finetuned/model", f"{root}/served")
        self.assertEqual(exported, f"{root}/served")
        served = tf.saved_model.load(exported)
        outputs = served.signatures["serving_default"](text=tf.constant(["the quick brown fox"]))
        probabilities = next(v for k, v in outputs.items() if "prob" in k).numpy()
        self.assertAllClose(np.sum(probabilities, axis=-1), [1.0], atol=1e-5)

        local_after = {path for path in os.listdir(".") if path.startswith("ram")}
        self.assertEqual(local_after, local_before)
        self.assertFalse(Path(REPO, "ram:").exists())
        fileio.rmtree(root)
