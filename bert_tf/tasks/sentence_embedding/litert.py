"""A sentence encoder's `--kind=tflite` export served from Python without TensorFlow: texts in, vectors out.

>>> from bert_tf.serving import litert                                # doctest: +SKIP
>>> encoder = litert.load("exports/search_tflite", num_threads=2)      # doctest: +SKIP
>>> encoder(["How do I read a file?"])["embedding"].shape              # doctest: +SKIP
(1, 384)

It needs the `tflite` extra (`pip install "bert_tf[tflite]"`) and imports no TensorFlow
(`bert_tf.serving.litert`, which `litert.load(export_dir)` also reaches it through). A batch
runs packed (the file's `serving_packed`), each text's vector as if it were alone; the
vectors are unit length where the model normalizes, as the task SavedModel's `embedding`.
A model with a doc_stride reads only a long text's first seq_length pieces here; its task
SavedModel reads every window.
"""

from __future__ import annotations

import warnings

import numpy as np

from bert_tf.serving.litert import LiteRTFile


class LiteRTSentenceEncoder(LiteRTFile):
    """Raw text -> vectors with a sentence encoder's `--kind=tflite` export folder.

    Args:
      export_dir: the folder `python -m bert_tf.export --kind=tflite` wrote.
      num_threads: the interpreter's CPU threads (None: LiteRT's default).
    """

    def __init__(self, export_dir: str, num_threads: int | None = None) -> None:
        info = self.read_info(export_dir)
        if info.get("family") != "sentence_embedding":
            raise ValueError(
                f"{export_dir} is a --kind=tflite export of a {info.get('task_kind')} model; "
                "LiteRTSentenceEncoder serves those of sentence encoders"
            )
        if info.get("doc_stride"):
            warnings.warn(
                f"{export_dir} holds a model that reads long texts in windows (doc_stride {info['doc_stride']}); "
                f"LiteRTSentenceEncoder reads a text's first {info['seq_length']} pieces only: serve the "
                "task SavedModel (--kind=task) to read every window",
                stacklevel=2,
            )
        super().__init__(export_dir, num_threads)

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 [batch, hidden]: the texts' vectors."""
        inputs = self.packed(texts)
        if inputs is None:
            return np.zeros([0, 0], np.float32)
        # The file takes its rows as [rows, 1, length], the shape of its unpacked signature.
        rows = {name: value[:, None, :] if value.ndim == 2 else value for name, value in inputs.items()}
        return self.runner(**rows)["logits"][:, 0]

    def __call__(self, texts: list[str]) -> dict:
        return {"embedding": self.encode(texts)}
