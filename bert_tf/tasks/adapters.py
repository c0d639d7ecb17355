"""One adapter per task family: where its data comes from, its model, metrics and outputs.

An adapter turns the run's settings into `TaskData` (a source that streams the split's
examples from its file or TFDS split), makes `tf.data` pipelines of it with the family's
in-graph preprocessor (`bert_tf.preprocessing`), builds the Keras model on an encoder,
runs and scores a model with the task's official metric, and writes predictions in the
task's official format. The runner (`bert_tf.tasks.runner`) drives all of them the same
way; in Python:

    data = adapter.load("train")[0]
    model.fit(adapter.dataset(data, batch_size=32, training=True), steps_per_epoch=...)
    scores = adapter.evaluate(model, adapter.load("eval")[0], batch_size=32)
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from bert_tf import fileio, preprocessing
from bert_tf.models import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTokenClassifier
from bert_tf.tasks import classification, glue, metrics, models, ner, squad, streams, swag, tfds_sources
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.kinds import TaskKind
from bert_tf.tasks.squad_postprocess import postprocess, write_predictions

logger = logging.getLogger(__name__)

SQUAD_TASKS = ("squad", "squad_v2")
TASKS = (*glue.GLUE_TASKS, "classification", "regression", *SQUAD_TASKS, "ner", "swag")
_TEXT = tf.TensorSpec([], tf.string)


@dataclasses.dataclass
class TaskData:
    """One split of a task's data, read again from its source on every pass.

    `examples()` streams the examples (InputExample, Sentence, SquadExample,
    ChoiceExample); nothing holds them all, except SQuAD's, whose JSON file is one
    document parsed whole. `stats` counts examples, features (SQuAD: windows), truncated
    and skipped examples once `Adapter.count` has run.
    """

    name: str  # "train", "eval", "eval_mismatched", "predict", ...
    examples: Callable[[], Iterator[Any]]
    labelled: bool
    stats: ConversionStats
    meta: Any = None  # SQuAD: the `data` list, for the official scores


@dataclasses.dataclass
class Predictions:
    """A model's outputs on a TaskData, in example order.

    outputs: classification / regression / multiple choice: [examples, classes] array;
      token: one [words, labels] logits array per sentence (NaN rows for cut words);
      span: (window features, start logits, end logits), per window.
    labels: the examples' labels where the data has them (not span, not token).
    loss: the training loss on the data (labelled data; not span).
    """

    outputs: Any
    labels: np.ndarray | None = None
    loss: float | None = None


def make_adapter(settings, tokenizer):
    task = settings.task.lower()
    if task in SQUAD_TASKS:
        return SquadAdapter(settings, tokenizer)
    if task == "ner":
        return NerAdapter(settings, tokenizer)
    if task == "swag":
        return ChoiceAdapter(settings, tokenizer)
    if task in ("classification", "regression") or task in glue.GLUE_TASKS or task in ("sst-2", "sts-b"):
        return ClassificationAdapter(settings, tokenizer)
    raise TaskDataError(f"unknown task {settings.task!r}; use one of {', '.join(TASKS)}")


def _suffix(name: str) -> str:
    return name.split("_", 1)[1] if "_" in name else ""


def _file(settings, split: str) -> str | None:
    return {"train": settings.train_file, "eval": settings.eval_file, "predict": settings.predict_file}[split]


class Adapter:
    """What the families share: pipelines, counting, running a model, the loss.

    Subclasses set `kind`, and define `load`, `preprocessor`, `signature` (of the raw
    records), `record` (example -> raw record) and how outputs are gathered and scored.
    """

    kind: TaskKind
    label_list: list[str] | None = None
    keep: tuple[str, ...] = ()  # preprocessor features that prediction needs
    # Whether predict() batches for less padding (packed, or rows by length) and `gather`
    # puts the outputs back in order by meta["index"]: for families of one row per example.
    predict_by_length = False
    # Whether batches can be packed (`streams.Batching.pack`): families of one label per
    # row, whose model reads packed rows.
    packable = False
    ignore_label: int | None = None

    def __init__(self, settings, tokenizer):
        self.settings, self.tokenizer = settings, tokenizer
        # Static shapes (TPUs, or settings.static_shapes): rows padded to max_seq_length,
        # fixed-size batches. The runner sets it for TPUStrategy.
        self.static = bool(getattr(settings, "static_shapes", False))
        # Packed batches for training and prediction (settings.packing). The runner turns it
        # off under a multi-replica strategy, which splits a batch's rows and labels apart.
        self.pack = self.packable and bool(getattr(settings, "packing", True))
        self._predictor = None  # (model, input spec, traced call): see _batch_predictor

    # -- pipelines -------------------------------------------------------------------------
    @property
    def pad_to_multiple_of(self) -> int | None:
        return None if self.static else getattr(self.settings, "pad_to_multiple_of", 8)

    def record_chunks(self, data: TaskData) -> tf.data.Dataset:
        record, labelled = self.record, data.labelled

        def source():
            for example in data.examples():
                yield record(example, labelled)

        return streams.record_chunks(source, self.signature(labelled), labelled)

    def batches(
        self, data: TaskData, batch_size: int, training: bool = False, keep=(), by_length: bool = False
    ) -> tf.data.Dataset:
        """{"inputs", "labels", "weight", "meta"} batches (see `streams.batches`).

        Less padding, for training and (`by_length`) prediction: packed rows where the
        adapter packs (`self.pack`), else (`by_length`, or training with length_buckets)
        rows grouped by length, out of order. Static shapes (a TPU) take neither.
        """
        length_buckets = training and getattr(self.settings, "length_buckets", False)
        pack = self.pack and not self.static and not length_buckets and (training or by_length)
        buckets = None
        if (by_length or length_buckets) and not pack and not self.static:
            buckets = streams.length_buckets(self.settings.max_seq_length, self.pad_to_multiple_of or 8)
        batching = streams.Batching(
            batch_size,
            training=training,
            static=self.static,
            bucket_boundaries=buckets,
            seed=self.settings.seed,
            shuffle_buffer=getattr(self.settings, "shuffle_buffer_size", 10_000),
            pack=pack,
            # A step compiled per input shape (JAX's jit; XLA on TensorFlow) compiles again for
            # every new batch shape: dozens per run of packed batches, each seconds to tens of
            # seconds on a CPU. TensorFlow's graph without XLA takes any shape.
            few_shapes=keras.backend.backend() == "jax" or bool(getattr(self.settings, "jit_compile", None)),
        )
        return streams.batches(
            self.record_chunks(data), self.preprocessor(), batching, keep, self.ignore_label
        )

    def dataset(self, data: TaskData, batch_size: int, training: bool = False) -> tf.data.Dataset:
        """For Keras: `(inputs, labels)` batches, shuffled and repeated when `training`;
        else `(inputs, labels, sample_weight)` (weight 0 on the rows that only fill a
        static-shape batch)."""
        if not data.labelled:
            raise TaskDataError(f"the {data.name} data has no labels to train or evaluate on")
        return streams.keras_inputs(self.batches(data, batch_size, training), with_weights=not training)

    def count(self, data: TaskData) -> ConversionStats:
        """Fills `data.stats` (features, truncated examples) with one pass of the preprocessor."""
        preprocessor = self.preprocessor()

        @tf.autograph.experimental.do_not_convert  # plain graph code: seconds less start-up
        def counts(batch):
            features = preprocessor.features(batch["x"])
            rows = tf.shape(features["input_ids"], out_type=tf.int64)[0]
            trimmed = features["trimmed"]
            if "example_index" in features:  # windows: an example is truncated once
                trimmed = tf.math.unsorted_segment_max(
                    tf.cast(trimmed, tf.int64), features["example_index"], tf.shape(batch["index"])[0]
                )
            return tf.stack(
                [
                    tf.shape(batch["index"], out_type=tf.int64)[0],
                    rows,
                    tf.reduce_sum(tf.cast(trimmed, tf.int64)),
                ]
            )

        try:
            totals = (
                self.record_chunks(data)
                .map(counts, num_parallel_calls=tf.data.AUTOTUNE)
                .reduce(tf.zeros([3], tf.int64), lambda total, value: total + value)
                .numpy()
            )
        except tf.errors.InvalidArgumentError as error:
            # The preprocessor's own checks (a SQuAD question that leaves no room for its
            # context, a label outside the label set): their message, without the graph dump.
            message = error.message.split("assertion failed: [", 1)[-1].split("]", 1)[0].strip(" .")
            raise TaskDataError(f"the {data.name} data: {message}") from None
        data.stats.num_examples, data.stats.num_features, data.stats.num_truncated = (int(v) for v in totals)
        if not data.stats.num_examples:
            raise TaskDataError(f"the {data.name} data has no examples")
        return data.stats

    # -- running a model -------------------------------------------------------------------
    def predict(self, model, data: TaskData, batch_size: int) -> Predictions:
        """Runs `model` over the data in batches; outputs in example order."""
        parts: list[tuple] = []
        loss_sum, loss_count = 0.0, 0.0
        batches = self.batches(data, batch_size, keep=self.keep, by_length=self.predict_by_length)
        run = self._batch_predictor(model, batches.element_spec["inputs"])
        for element in batches:
            outputs = run(element["inputs"])
            real = element["weight"].numpy() > 0
            labels = element.get("labels")
            if labels is not None and self.kind != TaskKind.SPAN:
                loss, count = self._batch_loss(labels, outputs, real)
                loss_sum, loss_count = loss_sum + loss * count, loss_count + count
            parts.append((outputs, labels, element["meta"], real))
        predictions = self.gather(parts)
        if loss_count:
            predictions.loss = loss_sum / loss_count
        return predictions

    def _batch_predictor(self, model, input_spec) -> Callable:
        """model(inputs) -> numpy outputs, for batches of `input_spec`.

        On TensorFlow one graph for every batch shape, traced once (kept for the next
        evaluation of the same model), as `fit` traces its step: `predict_on_batch` traces
        a graph per new batch shape, three or four per evaluation of packed or dynamically
        padded batches, seconds each on a CPU. Other Keras backends (JAX) take numpy arrays.
        """
        if keras.backend.backend() != "tensorflow":
            return lambda inputs: model.predict_on_batch({name: value.numpy() for name, value in inputs.items()})
        cached = self._predictor
        if cached is None or cached[0] is not model or cached[1] != input_spec:
            call = tf.function(lambda inputs: model(inputs, training=False), input_signature=[input_spec])
            cached = self._predictor = (model, input_spec, call)
        call = cached[2]
        return lambda inputs: tf.nest.map_structure(lambda tensor: tensor.numpy(), call(inputs))

    def _batch_loss(self, labels, outputs, real) -> tuple[float, float]:
        labels = tf.nest.map_structure(lambda t: np.asarray(t)[real], labels)
        outputs = tf.nest.map_structure(lambda t: np.asarray(t)[real], outputs)
        if not real.any():
            return 0.0, 0.0
        count = (
            float((labels != self.ignore_label).sum()) if self.kind == TaskKind.TOKEN else float(real.sum())
        )
        return models.task_loss(self.kind, labels, outputs), count

    def gather(self, parts) -> Predictions:
        """Row outputs of classification-like tasks: [examples, ...] arrays, in example order."""
        order = np.argsort(
            np.concatenate([np.asarray(m["index"])[real] for _, _, m, real in parts]), kind="stable"
        )
        outputs = np.concatenate([np.asarray(o)[real] for o, _, _, real in parts])[order]
        labels = None
        if parts and parts[0][1] is not None:
            labels = np.concatenate([np.asarray(y)[real] for _, y, _, real in parts])[order]
        return Predictions(outputs, labels)

    def evaluate(self, model, data: TaskData, batch_size: int) -> dict[str, float]:
        """The task's official metrics (and `eval_loss` for labelled data) of `model`."""
        predictions = self.predict(model, data, batch_size)
        scores = self.score(data, predictions)
        if predictions.loss is not None:
            scores["eval_loss"] = float(predictions.loss)
        return scores


class ClassificationAdapter(Adapter):
    """GLUE (TSV files, a GLUE data_dir or TFDS glue/*) and users' own CSV/TSV/JSONL."""

    predict_by_length = True
    packable = True

    def __init__(self, settings, tokenizer):
        super().__init__(settings, tokenizer)
        task = settings.task.lower()
        self.glue = glue.get_task(task) if task not in ("classification", "regression") else None
        if settings.tfds_name and (self.glue is None or settings.tfds_name != f"glue/{self.glue.name}"):
            expected = f"glue/{self.glue.name}" if self.glue else "files (--train_file/--eval_file)"
            raise TaskDataError(
                f"--task={settings.task} reads {expected}, not --tfds_name={settings.tfds_name}; "
                "TFDS sources are glue/* (GLUE tasks), squad/v1.1 and squad/v2.0 (squad, squad_v2), "
                "conll2003 (ner)"
            )
        regression = task == "regression" or (self.glue is not None and self.glue.is_regression)
        self.kind = TaskKind.REGRESSION if regression else TaskKind.CLASSIFICATION
        self.metric_names = self.glue.metrics if self.glue else ("accuracy",)
        self.label_list = list(self.glue.label_list) if self.glue and self.glue.label_list else None
        self.pair = None  # whether examples have a second text: known from the first example

    # -- sources -----------------------------------------------------------------------
    def _readers(self, split: str) -> dict[str, Callable[[], Iterator[classification.InputExample]]]:
        """split ("train", "eval", "predict") → {data name: function streaming its examples}."""
        s = self.settings
        labelled = split != "predict"
        file = _file(s, split)
        # Each reader takes a list where rows the format allows to skip are noted (QQP's).
        if file and self.glue is not None:
            return {split: lambda skipped=None: glue.iter_examples(self.glue, file, labelled, skipped)}
        if file:
            label_column = s.label_column if labelled else None
            return {
                split: lambda skipped=None: classification.iter_table(
                    file, s.text_column, s.text_b_column, label_column
                )
            }
        if self.glue is None:
            return {}
        if s.data_dir:  # a GLUE task directory as distributed
            splits = {"train": ("train",), "eval": self.glue.eval_splits, "predict": self.glue.test_splits}[
                split
            ]
            files = glue.split_files(self.glue, s.data_dir)
            readers = {
                name: (
                    lambda skipped=None, path=files[name]: glue.iter_examples(
                        self.glue, path, labelled, skipped
                    )
                )
                for name in splits
                if fileio.isfile(files[name])
            }
        elif s.tfds_name or s.tfds_data_dir:
            tfds_splits = {"eval": self.glue.tfds_eval_splits, "predict": self.glue.tfds_test_splits}
            splits = tfds_splits.get(split, ("train",))
            readers = {
                name: (
                    lambda skipped=None, name=name: glue.iter_tfds_examples(self.glue, name, s.tfds_data_dir)
                )
                for name in splits
            }
        else:
            return {}
        # MNLI: "eval" is the matched dev set, "eval_mismatched" the other one.
        return {
            (split if index == 0 else f"{split}_{_suffix(name)}"): reader
            for index, (name, reader) in enumerate(readers.items())
        }

    def load(self, split: str) -> list[TaskData]:
        """The split's data, after one validating pass (labels, empty texts, the label set)."""
        result = []
        labelled = split != "predict"
        for name, reader in self._readers(split).items():
            collect = split == "train" and self.label_list is None and self.kind == TaskKind.CLASSIFICATION
            known = None if collect else self.label_list
            labels: set[str] = set()
            first = None
            skipped: list[int] = []
            for example in classification.validate(
                reader(skipped), known if labelled else None, self.kind == TaskKind.REGRESSION and labelled
            ):
                first = first or example
                if collect and example.label is not None:
                    labels.add(str(example.label))
            if first is None:
                raise TaskDataError(f"the {name} data has no examples")
            if skipped:
                logger.warning(
                    "the %s data: skipped %d rows with too few columns (lines %s)",
                    name,
                    len(skipped),
                    ", ".join(map(str, skipped[:10])) + (", ..." if len(skipped) > 10 else ""),
                )
            if collect:
                self.label_list = classification.label_list_from(
                    [classification.InputExample("", "", None, label) for label in labels]
                )
            if self.pair is None:
                self.pair = first.text_b is not None

            def examples(reader=reader, labelled=labelled):
                for example in reader():
                    yield example if labelled else dataclasses.replace(example, label=None)

            result.append(TaskData(name, examples, labelled, ConversionStats(num_skipped=len(skipped))))
        return result

    def preprocessor(self):
        return preprocessing.TextClassifierPreprocessor(
            self.tokenizer,
            self.settings.max_seq_length,
            self.label_list if self.kind == TaskKind.CLASSIFICATION else None,
            self.pad_to_multiple_of,
        )

    def signature(self, labelled: bool) -> tuple:
        x = (_TEXT, _TEXT) if self.pair else _TEXT
        if not labelled:
            return (x,)
        return (x, _TEXT if self.kind == TaskKind.CLASSIFICATION else tf.TensorSpec([], tf.float32))

    def record(self, example, labelled: bool) -> tuple:
        x = (example.text_a, example.text_b or "") if self.pair else example.text_a
        if not labelled:
            return (x,)
        return (x, str(example.label) if self.kind == TaskKind.CLASSIFICATION else float(example.label))

    # -- model and outputs ---------------------------------------------------------------
    def build_model(self, encoder):
        return BertClassifier(
            encoder, num_classes=1 if self.kind == TaskKind.REGRESSION else len(self.label_list)
        )

    def _values(self, outputs):
        outputs = np.asarray(outputs)
        return outputs[:, 0] if self.kind == TaskKind.REGRESSION else outputs.argmax(axis=-1)

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        values = self._values(predictions.outputs)
        if self.kind == TaskKind.REGRESSION:
            return metrics.regression_metrics(predictions.labels, values)
        return metrics.classification_metrics(predictions.labels, values, self.metric_names)

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        values = self._values(predictions.outputs)
        if self.glue is not None:
            names = self.glue.submission_names
            name = names[1] if data.name.endswith("mismatched") and len(names) > 1 else names[0]
            # Leaderboard files for the test sets; eval_<name>.tsv for the dev sets.
            file_name = f"{name}.tsv" if data.name.startswith("predict") else f"eval_{name}.tsv"
            path = os.path.join(output_dir, file_name)
            glue.write_submission(path, self.glue, data.examples(), values)
            return [path]
        path = os.path.join(output_dir, f"{data.name}_predictions.tsv")
        with fileio.writing(path) as handle:
            handle.write("id\tprediction\n")
            for example, value in zip(data.examples(), values, strict=True):
                label = (
                    f"{float(value):.6g}" if self.kind == TaskKind.REGRESSION else self.label_list[int(value)]
                )
                handle.write(f"{example.guid}\t{label}\n")
        return [path]


class SquadAdapter(Adapter):
    kind = TaskKind.SPAN
    keep = ("token_to_orig", "token_is_max_context", "input_ids")

    def __init__(self, settings, tokenizer):
        super().__init__(settings, tokenizer)
        self.version_2 = settings.task.lower() == "squad_v2" or (
            bool(settings.tfds_name) and tfds_sources.squad_version(settings.tfds_name)
        )

    def load(self, split: str) -> list[TaskData]:
        """SQuAD JSON is one document: it is parsed whole (the examples stay in memory)."""
        s = self.settings
        file = _file(s, split)
        if file:
            dataset = squad.load_dataset(file)
        elif s.tfds_name and split != "predict":
            tfds_split = "train" if split == "train" else "validation"
            dataset = tfds_sources.squad_dataset(s.tfds_name, tfds_split, s.tfds_data_dir)
        else:
            return []
        training = split == "train"
        examples, skipped = squad.read_examples(dataset, training, version_2_with_negative=self.version_2)
        if skipped:
            logger.warning("%s: %d answers not found in their context were skipped", split, skipped)
        if not examples:
            raise TaskDataError(f"no usable SQuAD examples in the {split} data ({skipped} skipped)")
        return [
            TaskData(
                split,
                lambda: iter(examples),
                training,
                ConversionStats(num_skipped=skipped),
                (dataset, examples),
            )
        ]

    def preprocessor(self):
        s = self.settings
        return preprocessing.SpanPreprocessor(
            self.tokenizer, s.max_seq_length, s.doc_stride, s.max_query_length, self.pad_to_multiple_of
        )

    def signature(self, labelled: bool) -> tuple:
        x = (_TEXT, _TEXT)
        return (x, (_TEXT, tf.TensorSpec([], tf.int64))) if labelled else (x,)

    def record(self, example, labelled: bool) -> tuple:
        x = (example.question_text, example.context)
        if not labelled:
            return (x,)
        return (x, (example.orig_answer_text or "", -1 if example.is_impossible else example.answer_start))

    def count(self, data: TaskData) -> ConversionStats:
        skipped = data.stats.num_skipped
        stats = super().count(data)
        stats.num_skipped = skipped
        return stats

    def build_model(self, encoder):
        return BertSpanLabeler(encoder)

    def gather(self, parts) -> Predictions:
        vocab = self.tokenizer.vocab
        features, starts, ends = [], [], []
        for outputs, _, meta, real in parts:
            meta = {name: np.asarray(value) for name, value in meta.items()}
            start_logits, end_logits = np.asarray(outputs["start_logits"]), np.asarray(outputs["end_logits"])
            for row in np.flatnonzero(real):
                to_orig, max_context = meta["token_to_orig"][row], meta["token_is_max_context"][row]
                context = np.flatnonzero(to_orig >= 0)
                ids = meta["input_ids"][row]
                length = int((ids != self.tokenizer.pad_id).sum())  # [PAD] is never a real piece
                features.append(
                    squad.SquadFeature(
                        unique_id=1000000000 + len(features),
                        example_index=int(meta["index"][row]),
                        doc_span_index=0,
                        tokens=[vocab[i] for i in ids[:length]],
                        token_to_orig_map={int(p): int(to_orig[p]) for p in context},
                        token_is_max_context={int(p): bool(max_context[p]) for p in context},
                        input_ids=[],
                        input_mask=[],
                        segment_ids=[],
                    )
                )
                starts.append(start_logits[row, :length])
                ends.append(end_logits[row, :length])
        return Predictions((features, starts, ends))

    def _answers(self, data: TaskData, predictions: Predictions):
        _, examples = data.meta
        features, starts, ends = predictions.outputs
        s = self.settings
        return postprocess(
            examples,
            features,
            starts,
            ends,
            n_best_size=s.n_best_size,
            max_answer_length=s.max_answer_length,
            lower_case=self.tokenizer.lower_case,
            version_2_with_negative=self.version_2,
            null_score_diff_threshold=s.null_score_diff_threshold,
        )

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        answers, _, null_odds = self._answers(data, predictions)
        return metrics.squad_scores(
            data.meta[0],
            answers,
            null_odds if self.version_2 else None,
            version_2_with_negative=self.version_2,
        )

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        answers, nbest, null_odds = self._answers(data, predictions)
        # predictions.json of the predict file at the top; the eval file's beside it only
        # when there is no predict file, else in eval/.
        separate = data.name != "predict" and self.settings.predict_file
        directory = os.path.join(output_dir, "eval") if separate else output_dir
        return write_predictions(directory, answers, nbest, null_odds if self.version_2 else None)


class NerAdapter(Adapter):
    kind = TaskKind.TOKEN
    keep = ("word_positions",)
    ignore_label = preprocessing.IGNORE_LABEL

    def load(self, split: str) -> list[TaskData]:
        s = self.settings
        file = _file(s, split)
        labelled = split != "predict"
        if file:

            def reader():
                return ner.iter_conll(file, labelled=labelled)

        elif s.tfds_name:
            tfds_split = {"train": "train", "eval": "validation", "predict": "test"}[split]

            def reader():
                return tfds_sources.iter_conll_sentences(s.tfds_name, tfds_split, s.tfds_data_dir)

        else:
            return []
        if split == "train":
            self.label_list = ner.label_list_from(reader())
        elif labelled and self.label_list is not None:
            _check_tags(reader(), self.label_list, file or s.tfds_name)
        return [TaskData(split, reader, labelled, ConversionStats())]

    def preprocessor(self):
        return preprocessing.TokenTaggerPreprocessor(
            self.tokenizer, self.settings.max_seq_length, self.label_list, self.pad_to_multiple_of
        )

    def signature(self, labelled: bool) -> tuple:
        words = tf.TensorSpec([None], tf.string)
        return (words, tf.TensorSpec([None], tf.string)) if labelled else (words,)

    def record(self, sentence, labelled: bool) -> tuple:
        return (sentence.words, sentence.tags) if labelled else (sentence.words,)

    def build_model(self, encoder):
        return BertTokenClassifier(encoder, num_classes=len(self.label_list))

    def gather(self, parts) -> Predictions:
        word_logits = []
        for outputs, _, meta, real in parts:
            logits = np.asarray(outputs)
            positions = meta["word_positions"]
            positions = positions.to_list() if hasattr(positions, "to_list") else positions
            for row in np.flatnonzero(real):
                where = np.asarray(positions[row], dtype=np.int64)
                rows = logits[row, np.maximum(where, 0)].astype(np.float64)
                rows[where < 0] = np.nan
                word_logits.append(rows)
        return Predictions(word_logits)

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        predicted = ner.word_predictions(predictions.outputs, self.label_list)
        return metrics.ner_metrics([sentence.tags for sentence in data.examples()], predicted)

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        path = os.path.join(output_dir, f"{data.name}_predictions.txt")
        ner.write_predictions(
            path, data.examples(), ner.word_predictions(predictions.outputs, self.label_list)
        )
        return [path]


def _check_tags(sentences: Iterable[ner.Sentence], label_list, source) -> None:
    known = set(label_list)
    for sentence in sentences:
        for word, tag in zip(sentence.words, sentence.tags or [], strict=False):
            if tag not in known:
                raise TaskDataError(
                    f"{source}: sentence at line {sentence.line}: tag {tag!r} of word {word!r} is not one "
                    f"of the training data's tags {list(label_list)}; add it to the training data or fix the tag"
                )


class ChoiceAdapter(Adapter):
    kind = TaskKind.MULTIPLE_CHOICE

    def load(self, split: str) -> list[TaskData]:
        file = _file(self.settings, split)
        if not file:
            return []
        labelled = split != "predict"
        num_choices = None
        for example in swag.iter_swag(file):  # validates every row
            num_choices = num_choices or len(example.endings)
            if labelled and example.label is None:
                raise TaskDataError(f"{example.guid}: the {split} data needs a label column")
        self.num_choices = num_choices
        return [TaskData(split, lambda: swag.iter_swag(file), labelled, ConversionStats())]

    def preprocessor(self):
        return preprocessing.MultipleChoicePreprocessor(
            self.tokenizer, self.settings.max_seq_length, self.pad_to_multiple_of
        )

    def signature(self, labelled: bool) -> tuple:
        x = (_TEXT, tf.TensorSpec([None], tf.string))
        return (x, tf.TensorSpec([], tf.int32)) if labelled else (x,)

    def record(self, example, labelled: bool) -> tuple:
        x = (example.context, example.endings)
        return (x, example.label) if labelled else (x,)

    def build_model(self, encoder):
        return BertMultipleChoice(encoder)

    def score(self, data: TaskData, predictions: Predictions) -> dict[str, float]:
        return metrics.classification_metrics(
            predictions.labels, np.asarray(predictions.outputs).argmax(axis=-1), ("accuracy",)
        )

    def write(self, data: TaskData, predictions: Predictions, output_dir: str) -> list[str]:
        path = os.path.join(output_dir, f"{data.name}_predictions.tsv")
        with fileio.writing(path) as handle:
            handle.write("id\tprediction\n")
            for example, choice in zip(
                data.examples(), np.asarray(predictions.outputs).argmax(axis=-1), strict=True
            ):
                handle.write(f"{example.guid}\t{int(choice)}\n")
        return [path]
