"""The sentence-embedding family: a vector per text, trained for search, scored as search is.

Reads CSV, TSV or JSONL files of pairs (anchor, positive: `--text_column`,
`--text_b_column`), optionally with a hard negative (`--negative_column`), trained with
in-batch negatives (MultipleNegativesRankingLoss, kind "mnrl", or its symmetric form
"mnrl_symmetric"); or scored pairs (`--label_column`, scores in [0, 1]) trained with CoSENT
("cosent") or the cosine's squared error ("cosine"). A `BertSentenceEncoder` (pooling and
normalization on the encoder). Pairs are scored by ranking every dev anchor against all the
dev positives (MRR@10, the main metric; recall@1, recall@10), scored pairs by the Spearman
correlation of their cosine with the scores. Predictions: the vectors (`.npy`) and each
anchor's top 10. Served as `text` -> `embedding`. A text longer than --max_seq_length is cut
there, as sentence-transformers cuts it; with --doc_stride, evaluation, prediction and the
task SavedModel read it as overlapping windows, its vector the mean of theirs (training
still cuts it: a batch's texts are its in-batch negatives, one vector each).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.cli import setting
from bert_tf.errors import UsageError
from bert_tf.preprocessing.base import MODEL_INPUTS
from bert_tf.preprocessing.packing import pack_sequences
from bert_tf.preprocessing.windows import pool_windows
from bert_tf.tasks import metrics as task_metrics
from bert_tf.tasks import python_inputs
from bert_tf.tasks.classification import tables
from bert_tf.tasks.family import (
    SERVING_PAD_TO_MULTIPLE_OF,
    TEXT,
    Predictions,
    TaskData,
    TaskFamily,
    serving_doc_stride,
    serving_input,
    split_file,
)
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.info import FinetunedModelInfo
from bert_tf.tasks.sentence_embedding import folder, losses
from bert_tf.tasks.sentence_embedding import metrics as retrieval
from bert_tf.tasks.sentence_embedding.model import BertSentenceEncoder
from bert_tf.tasks.sentence_embedding.preprocessor import TextsPreprocessor

# The kinds of this family's models: their training loss (the `--loss` option's values).
MNRL, MNRL_SYMMETRIC, COSENT, COSINE = "mnrl", "mnrl_symmetric", "cosent", "cosine"
LOSSES = (MNRL, MNRL_SYMMETRIC, COSENT, COSINE)
SCORED = (COSENT, COSINE)  # the losses of scored pairs; the others take in-batch negatives
SCALE = 20.0  # cosine similarities times this are the logits of both ranking losses


@dataclasses.dataclass(frozen=True)
class SentenceEmbeddingOptions:
    """The family's settings: flags, `from_pretrained` arguments, task.json fields."""

    text_column: str = setting("text", "The column of the anchor (a query), or of the text to encode.")
    text_b_column: str | None = setting("text_b", "The column of the anchor's positive (a passage).")
    negative_column: str | None = setting(
        None, "sentence_embedding: the column of a hard negative of the anchor (training only)."
    )
    label_column: str | None = setting(
        None, "sentence_embedding: the column of a pair's score in [0, 1] (scored pairs: --loss=cosent)."
    )
    loss: str | None = setting(
        None,
        "sentence_embedding: mnrl (in-batch negatives, the default for pairs), mnrl_symmetric, "
        "cosent (the default with --label_column) or cosine (scored pairs).",
        choices=LOSSES,
    )
    pooling: str | None = setting(
        None,
        "sentence_embedding: how a text's vector is pooled from its tokens (default: the "
        "sentence-transformers folder's, or mean).",
        choices=folder.POOLINGS,
    )
    normalize: bool | None = setting(
        None,
        "sentence_embedding: unit-length vectors (default: the sentence-transformers folder's, or true).",
    )
    doc_stride: int | None = setting(
        None,
        "Read texts longer than --max_seq_length as overlapping windows starting every N pieces "
        "(default: off, long texts are cut). sentence_embedding: in evaluation, prediction and "
        "the task SavedModel, a text's vector is the mean of its windows' (training still cuts).",
    )

    def __post_init__(self):
        if self.loss is not None and self.loss not in LOSSES:
            raise UsageError(
                f"--loss={self.loss} is not a loss of sentence embeddings; use one of {', '.join(LOSSES)}"
            )
        if self.pooling is not None and self.pooling not in folder.POOLINGS:
            raise UsageError(f"--pooling={self.pooling}; use one of {', '.join(folder.POOLINGS)}")
        if self.doc_stride is not None and self.doc_stride <= 0:
            raise UsageError(
                f"--doc_stride must be a positive number of word pieces, got {self.doc_stride}; leave it "
                "out to cut long texts"
            )
        if self.loss in SCORED and self.negative_column:
            raise UsageError(
                f"--negative_column is for in-batch negatives; --loss={self.loss} trains on scored pairs"
            )


@dataclasses.dataclass(frozen=True)
class SentenceExample:
    """One example: its texts (anchor[, positive[, hard negative]]), a score for scored pairs."""

    guid: str
    texts: tuple[str, ...]
    score: float | None = None


@dataclasses.dataclass(frozen=True)
class DataShape:
    """What a split holds (TaskData.meta): texts per example, whether they carry scores, and
    whether long texts are read in windows (--doc_stride; not the training data)."""

    texts: int
    scored: bool
    windows: bool = False


class SentenceEmbeddingFamily(TaskFamily):
    """Pairs (with hard negatives) or scored pairs from CSV/TSV/JSONL files, learnt as vectors."""

    name = "sentence_embedding"
    kinds = LOSSES
    tasks = ("sentence_embedding",)
    model_class = BertSentenceEncoder
    default_task = "sentence_embedding"
    Options = SentenceEmbeddingOptions
    task_json_fields = tuple(field.name for field in dataclasses.fields(SentenceEmbeddingOptions))
    predict_by_length = True
    export_kinds = {"sentence_transformers": "bert_tf.tasks.sentence_embedding.folder:export"}
    reads_windows = True  # with options.doc_stride: long texts in windows, their vectors averaged

    def __init__(self, settings, tokenizer):
        start = settings.init_checkpoint
        pretrained = folder.read(start) if folder.is_folder(start) else None
        if pretrained is not None and settings.max_seq_length is None and pretrained.max_seq_length:
            settings = dataclasses.replace(settings, max_seq_length=pretrained.max_seq_length)
        super().__init__(settings, tokenizer)
        options = self.options
        self.kind = options.loss or (COSENT if options.label_column else MNRL)
        self.pooling = options.pooling or (pretrained.pooling if pretrained else "mean")
        self.normalize = (
            options.normalize
            if options.normalize is not None
            else (pretrained.normalize if pretrained else True)
        )
        self.shape = DataShape(1, False)  # of the data being read (`record_chunks`)
        self.pack_texts = bool(settings.packing)  # single texts (`predict`, `encode`) run packed
        self.check_doc_stride(self.settings.max_seq_length - 2)
        if settings.train_file:  # refused before anything is read or written
            self._check_batch_size(settings.train_batch_size // (settings.gradient_accumulation_steps or 1))

    @classmethod
    def kind_of(cls, task: str) -> str:
        return MNRL

    @classmethod
    def kind_of_model(cls, model) -> str:
        return MNRL

    @property
    def main_metric(self) -> str:
        return "spearman" if self.kind in SCORED else "mrr_at_10"

    @property
    def has_eval_loss(self) -> bool:
        # The training loss of data like the training data's (scores for scored pairs; pairs
        # for in-batch negatives); not of scored dev pairs of a model trained on pairs, nor
        # of texts read in windows (training cuts them).
        return self.shape.scored == (self.kind in SCORED) and self.shape.texts > 1 and not self.shape.windows

    def restore(self, info: FinetunedModelInfo) -> None:
        self.pooling = info.option("pooling", self.pooling)
        self.normalize = info.option("normalize", self.normalize)

    def task_json_values(self) -> dict[str, Any]:
        values = {**dataclasses.asdict(self.options), "loss": self.kind}
        values.update(pooling=self.pooling, normalize=self.normalize)
        return {name: value for name, value in values.items() if value is not None}

    # -- data ------------------------------------------------------------------------------
    def load(self, split: str) -> list[TaskData]:
        """train: pairs, with hard negatives or scores; eval: pairs, with scores for scored
        pairs; predict: the texts of --text_column, to encode."""
        file = split_file(self.settings, split)
        if not file:
            return []
        o = self.options
        scored = split != "predict" and bool(o.label_column)
        if split != "predict" and self.kind in SCORED and not scored:
            raise UsageError(
                f"--loss={self.kind} trains and scores pairs by their scores; name the scores' column "
                "with --label_column"
            )
        second = o.text_b_column if split != "predict" else None
        if split != "predict" and not second:
            raise UsageError(f"the {split} data are pairs: name the positive's column with --text_b_column")
        negatives = o.negative_column if split == "train" and not scored else None

        def examples():
            rows = tables.validate(
                tables.iter_table(file, o.text_column, second, o.label_column if scored else None), None
            )
            if not negatives:
                return (self._example(row, scored) for row in rows)
            hard = tables.validate(tables.iter_table(file, negatives), None)
            return (
                dataclasses.replace(
                    self._example(row, False), texts=(row.text_a, row.text_b, negative.text_a)
                )
                for row, negative in zip(rows, hard, strict=True)
            )

        try:
            first = next(iter(examples()), None)
        except TaskDataError as error:
            if second and f"no column {second!r}" in str(error):
                raise TaskDataError(
                    f"{file} has no column {second!r}, the anchor's positive: the {split} data are pairs "
                    f"(anchor, positive); name the positive's column with --text_b_column ({error})"
                ) from None
            raise
        if first is None:
            raise TaskDataError(f"the {split} data has no examples")
        shape = DataShape(len(first.texts), scored, self._windows(split))
        return [TaskData(split, examples, split != "predict", ConversionStats(), meta=shape)]

    def _windows(self, split: str) -> bool:
        """Whether the split's long texts are read in windows: with --doc_stride, all but training's."""
        return self.options.doc_stride is not None and split != "train"

    @staticmethod
    def _example(row: tables.InputExample, scored: bool) -> SentenceExample:
        texts = (row.text_a,) if row.text_b is None else (row.text_a, row.text_b)
        return SentenceExample(row.guid, texts, _score(row.label, row.guid) if scored else None)

    def python_data(self, x, y, split: str) -> TaskData:
        """Texts, or (anchor, positive[, hard negative]) rows (in-batch negatives: no `y`), or
        (text_a, text_b) pairs with `y` their scores in [0, 1]."""
        rows = [(row,) if isinstance(row, str) else tuple(row) for row in python_inputs.rows(x, "x")]
        for index, row in enumerate(rows):
            if not row or not all(isinstance(text, str) for text in row) or len(row) != len(rows[0]):
                raise UsageError(
                    f"x[{index}] is {row!r}: give every example as a text, or every one as an (anchor, "
                    "positive) pair or an (anchor, positive, hard negative) triple"
                )
        scores = python_inputs.labels_for(y, len(rows))
        scored = any(score is not None for score in scores)
        texts = len(rows[0]) if rows else 1
        if scored and texts != 2:
            raise UsageError(
                f"scores (y) are of pairs: x holds {texts} text(s) per example; give (text_a, text_b)"
            )
        if split == "train":
            if scored and self.kind not in SCORED:
                raise UsageError(
                    f"this model trains with in-batch negatives (loss={self.kind!r}), which take no scores; "
                    "for scored pairs build it with loss='cosent' (or 'cosine')"
                )
            if not scored and self.kind in SCORED:
                raise UsageError(f"loss={self.kind!r} trains on scored pairs: pass their scores as y")
            if not scored and texts < 2:
                raise UsageError(
                    "training with in-batch negatives takes (anchor, positive) pairs or (anchor, positive, "
                    "hard negative) triples as x, not single texts"
                )
        examples = [
            SentenceExample(f"x[{i}]", row, _score(score, f"y[{i}]") if scored else None)
            for i, (row, score) in enumerate(zip(rows, scores, strict=True))
        ]
        for example in examples:
            if not all(text.strip() for text in example.texts):
                raise UsageError(f"{example.guid} holds an empty text; fill it in or remove it")
        labelled = split != "predict" and (scored or texts > 1)
        return TaskData(
            split,
            lambda: iter(examples),
            labelled,
            ConversionStats(),
            meta=DataShape(texts, scored, self._windows(split)),
        )

    def python_labels(self, outputs) -> list:
        return np.asarray(outputs).tolist()

    # -- pipelines -------------------------------------------------------------------------
    def record_chunks(self, data: TaskData) -> tf.data.Dataset:
        self.shape = data.meta or DataShape(1, False)
        return super().record_chunks(data)

    def batches(self, data: TaskData, batch_size: int, training=False, keep=(), by_length=False):
        """As every family's; single texts to encode run packed, as the classifier's examples:
        rows as long as the batch's longest text, each vector as if its text were alone. (Pairs
        are [batch, texts, length]; training packs them in the model, `BertSentenceEncoder.call`.)"""
        self.shape = data.meta or DataShape(1, False)
        if self.shape.windows:  # which of its example's texts each window reads (`gather`)
            keep = (*keep, "text_index")
        self.pack = self.pack_texts and not training and self.shape.texts == 1 and not self.shape.windows
        try:
            return super().batches(data, batch_size, training, keep, by_length)
        finally:
            self.pack = False

    def preprocessor(self):
        return TextsPreprocessor(
            self.tokenizer,
            self.settings.max_seq_length,
            self.pad_to_multiple_of,
            scored=self.shape.scored,
            doc_stride=self.options.doc_stride if self.shape.windows else None,
            rows=self.pack,
        )

    def signature(self, labelled: bool) -> tuple:
        x = (TEXT,) * self.shape.texts
        return (x, tf.TensorSpec([], tf.float32)) if labelled else (x,)

    def record(self, example: SentenceExample, labelled: bool) -> tuple:
        return (example.texts, float(example.score or 0.0)) if labelled else (example.texts,)

    def dataset(self, data: TaskData, batch_size: int, training: bool = False) -> tf.data.Dataset:
        if training:
            self._check_batch_size(batch_size)
        return super().dataset(data, batch_size, training)

    def _check_batch_size(self, batch_size: int) -> None:
        if self.kind not in SCORED and batch_size < 2:
            raise UsageError(
                f"a training batch of {batch_size} example has no in-batch negatives (each anchor's "
                "negatives are the batch's other positives): train with batches of 2 or more, 32 or more "
                "for a good model (--train_batch_size, over --gradient_accumulation_steps)"
            )

    # -- model, loss, scores -------------------------------------------------------------------
    def build_model(self, encoder, preprocessor=None):
        return BertSentenceEncoder(encoder, self.pooling, self.normalize, preprocessor=preprocessor)

    @classmethod
    def compile_args(cls, kind: str) -> dict:
        if kind == COSENT:
            loss = losses.CoSENTLoss(SCALE)
        elif kind == COSINE:
            loss = losses.CosineSimilarityLoss()
        else:
            loss = losses.MultipleNegativesRankingLoss(SCALE, symmetric=kind == MNRL_SYMMETRIC)
        return {"loss": loss, "metrics": []}

    def gather(self, parts) -> Predictions:
        """The vectors [examples, texts, hidden] in example order; of texts read in windows, the
        mean of each text's windows' (unit length again where the model normalizes)."""
        if not self.shape.windows:
            return super().gather(parts)
        index = np.concatenate([np.asarray(m["index"])[real] for _, _, m, real in parts])
        text = np.concatenate([np.asarray(m["text_index"])[real] for _, _, m, real in parts])
        outputs = np.concatenate([np.asarray(o)[real][:, 0] for o, _, _, real in parts])  # [windows, hidden]
        # Sorted keys: example by example, each example's texts in order; every text has a window.
        _, text_of_window = np.unique(index * self.shape.texts + text, return_inverse=True)
        vectors = pool_windows(outputs, text_of_window, text_of_window.max() + 1, "mean").numpy()
        if self.normalize:
            vectors = retrieval.unit(vectors)
        labels = None
        if parts and parts[0][1] is not None:  # an example's windows share its labels
            window_labels = np.concatenate([np.asarray(y)[real] for _, y, _, real in parts])
            labels = window_labels[np.unique(index, return_index=True)[1]]
        return Predictions(vectors.reshape(-1, self.shape.texts, vectors.shape[-1]), labels)

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        shape = data.meta
        if shape.texts < 2:
            raise UsageError(f"the {data.name} data holds single texts: scores take pairs (and their scores)")
        vectors = retrieval.unit(predictions.outputs)
        if shape.scored:
            cosines = (vectors[:, 0] * vectors[:, 1]).sum(axis=-1)
            return task_metrics.regression_metrics([example.score for example in data.examples()], cosines)
        first_rows, relevant = retrieval.positives_index([example.texts[1] for example in data.examples()])
        return retrieval.retrieval_metrics(vectors[:, 0] @ vectors[first_rows, 1].T, relevant)

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        """`<data>_embeddings.npy`: the vectors ([examples, hidden] of single texts, [examples,
        texts, hidden] of pairs); pairs also `<data>_top10.tsv`, each anchor's ten nearest
        positives of the data, best first."""
        outputs = np.asarray(predictions.outputs, np.float32)
        path = os.path.join(output_dir, f"{data.name}_embeddings.npy")
        with fileio.writing(path, binary=True) as handle:
            np.save(handle, outputs[:, 0] if outputs.shape[1] == 1 else outputs)
        written = [path]
        if outputs.shape[1] > 1 and not data.meta.scored:
            examples = list(data.examples())
            first_rows, _ = retrieval.positives_index([example.texts[1] for example in examples])
            vectors = retrieval.unit(outputs)
            best, similarities = retrieval.top_k(vectors[:, 0] @ vectors[first_rows, 1].T)
            path = os.path.join(output_dir, f"{data.name}_top10.tsv")
            with fileio.writing(path) as handle:
                handle.write("id\trank\tpositive_id\tsimilarity\tpositive\n")
                for example, columns, values in zip(examples, best, similarities, strict=True):
                    for rank, (column, value) in enumerate(zip(columns, values, strict=True), start=1):
                        positive = examples[first_rows[column]]
                        text = " ".join(positive.texts[1].split())  # one line per row
                        handle.write(f"{example.guid}\t{rank}\t{positive.guid}\t{value:.6f}\t{text}\n")
            written.append(path)
        return written

    # -- serving: text -> embedding ------------------------------------------------------------
    @classmethod
    def serving_preprocessor(cls, tokenizer, info: FinetunedModelInfo, seq_length: int):
        doc_stride = serving_doc_stride(info, seq_length)
        return TextsPreprocessor(tokenizer, seq_length, SERVING_PAD_TO_MULTIPLE_OF, doc_stride=doc_stride)

    @classmethod
    def serving_signatures(cls, serving, info: FinetunedModelInfo, seq_length: int) -> dict:
        """`text` [batch] -> `embedding` [batch, hidden] (unit vectors where the model normalizes;
        a model with a doc_stride: a long text's the mean of its windows', as evaluation's)."""
        normalize = info.option("normalize", True)

        def embed(text):
            features = serving.preprocessor.features((text,))
            inputs = {name: features[name][:, 0] for name in MODEL_INPUTS}  # [rows, seq]
            # The batch's texts share rows of its padded length, as the classifier's export packs
            # them: the encoder runs on their tokens, not on the padding of short texts beside a
            # long one, and each text's vector is as if alone.
            packed = pack_sequences(inputs, row_length=tf.shape(inputs["input_ids"])[1])
            vectors = tf.cast(serving.model(packed, training=False)[:, 0], tf.float32)  # [rows, hidden]
            if "example_index" in features:  # windows: one vector per text
                vectors = pool_windows(vectors, features["example_index"], tf.shape(text)[0], "mean")
                if normalize:
                    vectors = tf.math.l2_normalize(vectors, axis=-1, epsilon=1e-24)
            return {"embedding": vectors}

        return {"serving_default": tf.function(embed).get_concrete_function(serving_input("text"))}

    @classmethod
    def export_info(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        extra = {"pooling": info.option("pooling", "mean"), "normalize": info.option("normalize", True)}
        if info.option("doc_stride"):
            extra["doc_stride"] = info.option("doc_stride")
        return extra

    # LiteRT: token ids [batch, 1, length] (`serving_default`), and packed rows (`serving_packed`,
    # what the TensorFlow-free client runs): "logits" [texts, 1, hidden], the vectors.
    litert_input_rank = 3
    litert_client = "bert_tf.tasks.sentence_embedding.litert:LiteRTSentenceEncoder"

    @classmethod
    def litert_packed(cls, info: FinetunedModelInfo) -> bool:
        return True

    @classmethod
    def litert_info(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        return cls.export_info(info)


def _score(value, where: str) -> float:
    """A pair's score: a number in [0, 1]; one line naming the example otherwise."""
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise TaskDataError(f"{where}: the score {value!r} is not a number; give scores in [0, 1]") from None
    if not 0.0 <= score <= 1.0:
        raise TaskDataError(
            f"{where}: the score {score:g} is outside [0, 1]; scale the scores to [0, 1] (e.g. STS-B's "
            "0-5 divided by 5)"
        )
    return score
