"""`TaskPreprocessor`: how a task model's raw text becomes features, carried by the model.

As keras-hub's task models carry their preprocessor, a `bert_tf.tasks.task_model.TaskModel`
carries one of these: the model's task description (`FinetunedModelInfo`, what task.json
holds: the family, the task, the labels, the casing, the sequence length and the family's
options) and its tokenizer. Both are saved with the model, the vocab as an asset of the
`.keras` file, so `keras.saving.load_model("model.keras")` alone gives a model that takes raw
text. The rules themselves are the task family's (`family()`), found again from the family's
name or import path in the description.

Example:

>>> import bert_tf
>>> model = bert_tf.BertClassifier.from_pretrained("tests/fixtures/hf_tiny", label_list=["neg", "pos"])
>>> model.preprocessor.info.family, model.preprocessor.family().main_metric
('classification', 'accuracy')
"""

from __future__ import annotations

import hashlib
import os

import keras

from bert_tf import fileio
from bert_tf.cache import cache_dir
from bert_tf.tasks import registry
from bert_tf.tasks.info import FinetunedModelInfo
from bert_tf.tokenization import BertTokenizer

VOCAB_ASSET = "vocab.txt"


@keras.saving.register_keras_serializable(package="bert_tf")
class TaskPreprocessor(keras.layers.Layer):
    """A task model's task description and tokenizer (see the module docstring).

    Args:
      info: the task description (`FinetunedModelInfo`, or its task.json content).
      tokenizer: its `BertTokenizer`; None until `load_assets` reads the vocab saved with it.
    """

    def __init__(self, info, tokenizer: BertTokenizer | None = None, **kwargs):
        super().__init__(**kwargs)
        self.info = info if isinstance(info, FinetunedModelInfo) else FinetunedModelInfo.from_json(info)
        self.tokenizer = tokenizer
        self.built = True  # no weights

    def family_class(self):
        """The task family of the model (by its name in task.json; older files: by its kind)."""
        return registry.family_of_info(self.info)

    def family(self, **settings):
        """The task family on this description and tokenizer, with `settings` (FinetuneSettings
        fields: seed, batch sizes, ...), ready to make pipelines of raw text."""
        return self.family_class().for_model(self.info, self.tokenizer, **settings)

    def call(self, inputs):
        raise NotImplementedError(
            "a TaskPreprocessor is not called on tensors: the task model's fit, predict and evaluate "
            "take raw text and run its family's preprocessing"
        )

    def get_config(self) -> dict:
        return {**super().get_config(), "info": self.info.to_json()}

    def save_assets(self, dir_path: str) -> None:
        fileio.copy(self.tokenizer.vocab_file, os.path.join(dir_path, VOCAB_ASSET))

    def load_assets(self, dir_path: str) -> None:
        # Keras removes its asset folder once the model is loaded: the vocab is kept in the cache.
        text = fileio.read_text(os.path.join(dir_path, VOCAB_ASSET))
        kept = cache_dir() / "vocab" / f"{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}.txt"
        if not kept.exists():
            fileio.write_text(str(kept), text)  # whole or absent
        self.tokenizer = BertTokenizer(str(kept), lower_case=self.info.lower_case)
