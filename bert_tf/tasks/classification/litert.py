"""A classifier's `--kind=tflite` export served from Python without TensorFlow: raw text in, labels out.

>>> from bert_tf.tasks.classification.litert import LiteRTClassifier   # doctest: +SKIP
>>> classifier = LiteRTClassifier("exports/topic_tflite", num_threads=2)  # doctest: +SKIP
>>> classifier(["How do I read a file?"])["label"]                     # doctest: +SKIP
['io']

It needs the `tflite` extra (`pip install "bert_tf[tflite]"`) and imports no TensorFlow
(`bert_tf.serving.litert`, which `litert.load(export_dir)` also reaches it through).
Classification, regression and multi-label exports are served. Outputs, per text, as the
task SavedModel's: classification: `probabilities` float32 [batch, classes] (softmax),
`label_id` int [batch], `label` list of str; regression: `score` float32 [batch];
multi-label: `probabilities` (a sigmoid per label) and `labels`, a list per text of the
labels above the export's threshold, in label order.
"""

from __future__ import annotations

import warnings

import numpy as np

from bert_tf.serving.litert import LiteRTFile

SERVED_KINDS = ("classification", "regression", "multi_label")


class LiteRTClassifier(LiteRTFile):
    """Raw text -> predictions with a classifier's `--kind=tflite` export folder.

    Args:
      export_dir: the folder `python -m bert_tf.export --kind=tflite` wrote.
      num_threads: the interpreter's CPU threads (None: LiteRT's default).
    """

    def __init__(self, export_dir: str, num_threads: int | None = None) -> None:
        info = self.read_info(export_dir)
        if info.get("task_kind") not in SERVED_KINDS:
            raise ValueError(
                f"{export_dir} is a --kind=tflite export of a {info.get('task_kind')} model; "
                f"LiteRTClassifier serves those of {', '.join(SERVED_KINDS)} models"
            )
        if info.get("doc_stride"):
            warnings.warn(
                f"{export_dir} holds a model fine-tuned on windows (doc_stride {info['doc_stride']}); "
                f"LiteRTClassifier reads a text's first {info['seq_length']} pieces only: serve the "
                "task SavedModel (--kind=task) to read every window",
                stacklevel=2,
            )
        super().__init__(export_dir, num_threads)
        self.kind = info["task_kind"]
        self.labels = list(info.get("label_list") or [])
        self.threshold = float(info.get("threshold", 0.5))

    def logits(self, texts: list[str], text_pairs: list[str] | None = None) -> np.ndarray:
        """float32 [batch, classes] logits of a batch of texts (or pairs)."""
        inputs = self.packed(texts, text_pairs)
        if inputs is None:
            return np.zeros([0, len(self.labels) or 1], np.float32)
        return self.runner(**inputs)["logits"]

    def __call__(self, texts: list[str], text_pairs: list[str] | None = None) -> dict:
        logits = self.logits(texts, text_pairs)
        if self.kind == "regression":
            return {"score": logits[:, 0]}
        if self.kind == "multi_label":
            probabilities = 1.0 / (1.0 + np.exp(-logits))
            chosen = probabilities > self.threshold
            return {
                "probabilities": probabilities,
                "labels": [
                    [label for label, on in zip(self.labels, row, strict=True) if on] for row in chosen
                ],
            }
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
        label_id = probabilities.argmax(axis=-1)
        return {
            "probabilities": probabilities,
            "label_id": label_id,
            "label": [self.labels[i] for i in label_id],
        }
