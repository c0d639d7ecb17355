"""What every task family shares: its options, data splits, pipelines, counting, running a model.

A task family (classification, span, token, multiple choice: the packages beside this
module; or one of your own, see docs/task-families.md) is one class: built on a run's
settings and tokenizer, it turns them into `TaskData` (a source that streams the split's
examples from its file or TFDS split), makes `tf.data` pipelines of it with the family's
in-graph preprocessor (`bert_tf.preprocessing`), builds the Keras model on an encoder,
runs and scores a model with the task's official metric, and writes predictions in the
task's official format. Its class methods answer what needs no data: the loss and metrics
of a kind (`compile_args`), its head in other checkpoint formats (`head`), and how a saved
model of the family is served (`serving_preprocessor`, `serving_signatures`,
`export_info`, the LiteRT hooks). The driver (`bert_tf.tasks.runner`), the Keras task
models (`bert_tf.tasks.task_model`), the fine-tuned folder and the exports drive all of
them the same way and never test a task's name or kind; in Python:

    data = family.load("train")[0]
    model.fit(family.dataset(data, batch_size=32, training=True), steps_per_epoch=...)
    scores = family.evaluate(model, family.load("eval")[0], batch_size=32)

A family's own settings (`Options`, a dataclass) are its flags on the command line, its
keyword arguments in `from_pretrained`, and, with what it learns from its training data
(`task_json_values`), its fields in task.json.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import TaskHead
from bert_tf.errors import UsageError, raised_inside_tensorflow
from bert_tf.progress_display import Progress
from bert_tf.tasks import streams
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.info import FinetunedModelInfo
from bert_tf.tasks.settings import FinetuneSettings

logger = logging.getLogger(__name__)

TEXT = tf.TensorSpec([], tf.string)  # one text of a raw record
# A served batch is padded to its longest text exactly: the SavedModel's graph runs any length
# without retracing, so rounding up (which saves XLA and TPU recompiles in training) only costs.
SERVING_PAD_TO_MULTIPLE_OF = 1


def serving_doc_stride(info: FinetunedModelInfo, seq_length: int) -> int | None:
    """The windows' stride of a model fine-tuned on windows of long texts (task.json's
    `doc_stride`, None for one window), checked to fit the export's `seq_length`."""
    doc_stride = info.option("doc_stride")
    if doc_stride is not None and doc_stride >= seq_length - 2:
        raise UsageError(
            f"the model reads windows every doc_stride={doc_stride} pieces (task.json), which "
            f"--max_seq_length={seq_length} cannot hold; export with --max_seq_length={doc_stride + 3} or more"
        )
    return doc_stride


def serving_input(name: str) -> tf.TensorSpec:
    """A [batch] string input of a served model's signature."""
    return tf.TensorSpec([None], tf.string, name=name)


def char_offset(text: tf.Tensor, byte_offset: tf.Tensor) -> tf.Tensor:
    """Character (code point) offset of `byte_offset` in `text` (elementwise): what a served
    model reports of where a span lies."""
    prefix = tf.strings.substr(text, tf.zeros_like(byte_offset), byte_offset)
    return tf.strings.length(prefix, unit="UTF8_CHAR")


def softmax_cross_entropy_args() -> dict:
    """`compile_args` of one choice among classes: softmax cross-entropy on integer labels."""
    return {
        "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    }


def split_file(settings, split: str) -> str | None:
    """The file the settings name for `split` ("train", "eval", "predict"), if any."""
    return {"train": settings.train_file, "eval": settings.eval_file, "predict": settings.predict_file}[split]


@dataclasses.dataclass
class TaskData:
    """One split of a task's data, read again from its source on every pass.

    `examples()` streams the examples (InputExample, Sentence, SquadExample,
    ChoiceExample); nothing holds them all, except SQuAD's, whose JSON file is one
    document parsed whole. `stats` counts examples, features (SQuAD: windows), truncated
    and skipped examples once `TaskFamily.count` has run.
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


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A simple model of a task, fitted on its training data, that a fine-tuned model should
    beat (`TaskFamily.fit_baseline`): scored on each eval split with the task's metrics."""

    name: str  # what its keys in eval_results.json start with, e.g. "bag_of_words"
    description: str  # what it is, for the log
    score: Callable[[TaskData], dict[str, float]]  # labelled data -> {metric: value}
    num_examples: int  # training examples
    num_fitted: int  # of them, those it was fitted on (a sample of a large file)


@dataclasses.dataclass(frozen=True)
class KerasHubClassifier:
    """A head that keras-hub's `BertTextClassifier` holds: a dense layer on the pooled output
    (`kernel` [hidden, units], `bias` [units]) and the activation of its outputs (None: logits)."""

    kernel: np.ndarray
    bias: np.ndarray
    activation: str | None = None


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The options of a family that has none of its own."""


class TaskFamily:
    """What the families share: options, pipelines, counting, running a model, the loss.

    A family declares its `name`, the task names it reads (`tasks`, the command line's;
    `aliases`, other spellings), the kinds of model it makes (`kinds`: one per head and loss,
    such as "classification", "regression" and "multi_label" for the classification family),
    its task model class (`model_class`) and its settings (`Options`), which the registry
    (`bert_tf.tasks.registry`) files it under. Subclasses set `kind` (per instance where the
    family has several), and define `load`, `preprocessor`, `signature` (of the raw records),
    `record` (example -> raw record), `build_model`, how outputs are gathered, scored and
    written, `compile_args`, `head` and the serving hooks.
    """

    name: ClassVar[str] = ""  # a built-in family's name in task.json (see `reference`)
    kinds: ClassVar[tuple[str, ...]] = ()
    tasks: ClassVar[tuple[str, ...]] = ()
    aliases: ClassVar[tuple[str, ...]] = ()
    # The family's own settings: a frozen dataclass whose fields are flags (`bert_tf.cli.setting`
    # gives each its help), `from_pretrained` keyword arguments and task.json fields.
    Options: ClassVar[type] = NoOptions
    # The task.json fields of the family (the values come from `task_json_values`), and those
    # of them a fine-tuned model is read back with as its options (None: every option saved).
    task_json_fields: ClassVar[tuple[str, ...]] = ()
    restored_options: ClassVar[tuple[str, ...] | None] = None
    # The task model class of the family's heads, and the task a new head is for.
    model_class: ClassVar[type]
    default_task: ClassVar[str]
    default_max_seq_length: ClassVar[int] = 128

    kind: str
    main_metric: str  # the metric that picks the best model and stops training early
    label_list: list[str] | None = None
    keep: tuple[str, ...] = ()  # preprocessor features that prediction needs
    # Whether predict() batches for less padding (packed, or rows by length) and `gather`
    # puts the outputs back in order by meta["index"]: for families of one row per example.
    predict_by_length = False
    # Whether batches can be packed (`streams.Batching.pack`): families of one label per
    # row, whose model reads packed rows.
    packable = False
    ignore_label: int | None = None
    has_eval_loss = True  # whether `predict` computes the training loss on labelled data
    # Whether the family reads a text longer than max_seq_length in windows, every
    # options.doc_stride pieces (`bert_tf.preprocessing.windows`): SQuAD always; classification,
    # regression and token tagging when doc_stride is set; multiple choice never.
    reads_windows: ClassVar[bool] = False

    def __init__(self, settings: FinetuneSettings, tokenizer):
        self.options = self.parse_options(settings.options)
        if settings.max_seq_length is None:  # the family's own default (SQuAD's contexts: 384)
            settings = dataclasses.replace(settings, max_seq_length=self.default_max_seq_length)
        self.settings, self.tokenizer = settings, tokenizer
        # Several rows per text, combined into one answer per text (`gather`).
        self.windowed = getattr(self.options, "doc_stride", None) is not None
        # Static shapes (TPUs, or settings.static_shapes): rows padded to max_seq_length,
        # fixed-size batches. The runner sets it for TPUStrategy.
        self.static = bool(settings.static_shapes)
        # Packed batches for training and prediction (settings.packing). The runner turns it
        # off under a multi-replica strategy, which splits a batch's rows and labels apart.
        self.pack = self.packable and bool(settings.packing)
        self._predictor = None  # (model, input spec, traced call): see _batch_predictor

    @classmethod
    def reference(cls) -> str:
        """How task.json names the family: a built-in family's name, or MODULE:CLASS for one
        written outside bert_tf (what `--task=MODULE:CLASS` takes)."""
        if cls.__module__.startswith("bert_tf.") and cls.name:
            return cls.name
        return f"{cls.__module__}:{cls.__qualname__}"

    @classmethod
    def parse_options(cls, given: dict[str, Any]) -> Any:
        """The family's `Options` from the options a run or a caller gave (a `UsageError` naming
        an option that is not the family's, and the family's own)."""
        fields = {field.name for field in dataclasses.fields(cls.Options)}
        unknown = sorted(name for name in given if name not in fields)
        if unknown:
            own = ", ".join(f"--{name}" for name in sorted(fields)) or "none"
            raise UsageError(
                f"{', '.join(f'--{name}' for name in unknown)} {'is not an option' if len(unknown) == 1 else 'are not options'} "
                f"of the {cls.name or cls.__name__} family's tasks "
                f"({', '.join(cls.tasks[:4])}{', ...' if len(cls.tasks) > 4 else ''}); "
                f"its options are {own}: drop the others"
            )
        return cls.Options(**given)

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(cls.Options))

    @classmethod
    def for_model(cls, info: FinetunedModelInfo, tokenizer, **settings) -> TaskFamily:
        """The family of a fine-tuned model described by `info` (its task.json), on
        `settings` (FinetuneSettings fields: seed, batch sizes, ...)."""
        options = cls.saved_options(info)
        run = FinetuneSettings(
            task=info.task,
            output_dir="-",
            max_seq_length=info.max_seq_length,
            **{**settings, "options": {**options, **settings.get("options", {})}},
        )
        family = cls(run, tokenizer)
        family.label_list = list(info.label_list) if info.label_list is not None else None
        family.restore(info)
        return family

    @classmethod
    def saved_options(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        """The options a fine-tuned model is read back with: its task.json's values of them
        (`restored_options`; None: every option the file holds)."""
        restored = cls.option_names() if cls.restored_options is None else cls.restored_options
        return {name: info.options[name] for name in restored if info.options.get(name) is not None}

    @classmethod
    def kind_of(cls, task: str) -> str:
        """The kind of the models a task makes (a new head): the family's first, unless it has several."""
        return cls.kinds[0]

    @classmethod
    def kind_of_model(cls, model) -> str:
        """The kind of a model of the family that has no task description (plain Keras use)."""
        return cls.kinds[0]

    @classmethod
    def new_head(cls, task: str, num_classes: int | None, label_list) -> tuple[str, list[str] | None]:
        """(task, class names) of a new head that `from_pretrained` builds: `label_list`, or
        class ids as names for `num_classes`, or None (the task's own labels, or none)."""
        if label_list is not None:
            label_list = [str(label) for label in label_list]
            if not label_list:
                raise UsageError(
                    "label_list is empty; give the names of the classes, e.g. label_list=['neg', 'pos']"
                )
            duplicates = sorted({label for label in label_list if label_list.count(label) > 1})
            if duplicates:
                raise UsageError(f"label_list names {duplicates} more than once; each class once")
            if num_classes is not None and num_classes != len(label_list):
                raise UsageError(
                    f"num_classes={num_classes} but label_list has {len(label_list)} names; give one of them"
                )
            return task, label_list
        if num_classes is None:
            return task, None
        if num_classes < 1:
            raise UsageError(f"num_classes must be >= 1, got {num_classes}")
        return task, [str(i) for i in range(num_classes)]

    def task_info(self) -> FinetunedModelInfo:
        """The task.json of a model fine-tuned by this family on its settings and tokenizer."""
        return FinetunedModelInfo(
            task=self.settings.task,
            family=self.reference(),
            kind=self.kind,
            label_list=list(self.label_list) if self.label_list is not None else None,
            lower_case=bool(self.tokenizer.lower_case),
            max_seq_length=self.settings.max_seq_length,
            options=self.task_json_values(),
        )

    def restore(self, info: FinetunedModelInfo) -> None:
        """Takes what a family learns from its training data (and saves in task.json) from `info`."""

    def python_data(self, x, y, split: str) -> TaskData:
        """TaskData of raw Python examples `x` with labels `y` (None: unlabelled), as the task
        models' `fit`/`predict`/`evaluate` take them (see `bert_tf.tasks.task_model`); each
        example checked with a message naming it (`x[3]`, `y[3]`)."""
        raise NotImplementedError

    def python_outputs(self, data: TaskData, predictions: Predictions):
        """What the task models' `predict` returns on raw text: the outputs in example order."""
        return predictions.outputs

    def python_labels(self, outputs) -> list:
        """The task models' `label_names`: what `python_outputs` says, as labels."""
        raise NotImplementedError

    @classmethod
    def learn_from_python_data(cls, info: FinetunedModelInfo, x) -> FinetunedModelInfo:
        """The task description of a new head after seeing its first raw training data `x`
        (a classifier learns that it reads pairs): `info` unless the family learns something."""
        return info

    def check_doc_stride(self, room: int) -> None:
        """UsageError unless options.doc_stride (when set) is below `room`, the pieces a window
        of max_seq_length holds: windows `room` or more apart would not overlap."""
        doc_stride = getattr(self.options, "doc_stride", None)
        if doc_stride is not None and doc_stride >= room:
            raise UsageError(
                f"--doc_stride={doc_stride} is not below the {room} pieces a window of "
                f"--max_seq_length={self.settings.max_seq_length} holds, so windows would not overlap; pass "
                f"--doc_stride={max(1, room // 2)} (half a window) or any value from 1 to {room - 1}"
            )

    def warn_if_truncated(self, data: TaskData) -> None:
        """Logs how many of the data's examples were cut (`count` has run), and how to read them whole."""
        stats = data.stats
        if stats.num_truncated:
            hint = ""
            if self.reads_windows and not self.windowed:
                hint = "; --doc_stride=N (doc_stride=N in Python) reads them whole, in windows every N pieces"
            logger.warning(
                "%s: %d of %d examples were longer than max_seq_length=%d and were truncated%s",
                data.name,
                stats.num_truncated,
                stats.num_examples,
                self.settings.max_seq_length,
                hint,
            )

    @property
    def needs_label_list(self) -> bool:
        """Whether the model's classes come from the training data (or a fine-tuned model)."""
        return False

    def task_json_values(self) -> dict[str, Any]:
        """The `task_json_fields` of a model this family fine-tunes: its options and what it
        learnt from the training data (labels' weights, a threshold, ...)."""
        return {}

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
        family packs (`self.pack`), else (`by_length`, or training with length_buckets)
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

    def count(self, data: TaskData, progress: bool = False) -> ConversionStats:
        """Fills `data.stats` (features, truncated examples) with one pass of the preprocessor;
        with `progress`, showing the examples counted and their rate on stderr."""
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

        totals = np.zeros([3], np.int64)
        chunks = self.record_chunks(data).map(counts, num_parallel_calls=tf.data.AUTOTUNE)
        try:
            # How many examples the data holds is what this pass finds out: no total, no ETA.
            with Progress(f"counting the {data.name} data", unit="examples", enabled=progress) as display:
                for chunk_totals in chunks.as_numpy_iterator():
                    totals += chunk_totals
                    display.update(int(totals[0]))
        except tf.errors.OpError as error:
            refused = raised_inside_tensorflow(error)  # a reader's refusal of a row, as it said it
            if refused is not None:
                raise refused from None
            if not isinstance(error, tf.errors.InvalidArgumentError):
                raise
            # The preprocessor's own checks (a SQuAD question that leaves no room for its
            # context, a label outside the label set): their message, without the graph dump.
            message = error.message.split("assertion failed: [", 1)[-1].split("]", 1)[0].strip(" .")
            raise TaskDataError(f"the {data.name} data: {message}") from None
        data.stats.num_examples, data.stats.num_features, data.stats.num_truncated = (int(v) for v in totals)
        if not data.stats.num_examples:
            raise TaskDataError(f"the {data.name} data has no examples")
        return data.stats

    # -- running a model -------------------------------------------------------------------
    def predict(self, model, data: TaskData, batch_size: int, progress: bool = False) -> Predictions:
        """Runs `model` over the data in batches; outputs in example order. With `progress`
        (and `data.stats` counted), the rows done, their rate and the ETA show on stderr."""
        parts: list[tuple] = []
        loss_sum, loss_count = 0.0, 0.0
        batches = self.batches(data, batch_size, keep=self.keep, by_length=self.predict_by_length)
        run = self._batch_predictor(model, batches.element_spec["inputs"])
        display = Progress(
            f"{'evaluating' if data.labelled else 'predicting'} the {data.name} data",
            total=data.stats.num_features or None,  # rows: examples, or windows of them
            unit="windows" if self.windowed else "examples",
            enabled=progress,
        )
        with display:
            for element in batches:
                outputs = run(element["inputs"])
                real = element["weight"].numpy() > 0
                labels = element.get("labels")
                if labels is not None and self.has_eval_loss:
                    loss, count = self._batch_loss(labels, outputs, real)
                    loss_sum, loss_count = loss_sum + loss * count, loss_count + count
                parts.append((outputs, labels, element["meta"], real))
                display.update(display.done + int(real.sum()))
        predictions = self.gather(parts)
        if self.windowed and predictions.labels is not None and self.has_eval_loss:
            # The loss of the texts' combined outputs, not of their windows'.
            predictions.loss = self.task_loss(self.kind, predictions.labels, predictions.outputs)
        elif loss_count:
            predictions.loss = loss_sum / loss_count
        return predictions

    def _batch_predictor(self, model, input_spec) -> Callable:
        """model(inputs) -> numpy outputs, for batches of `input_spec`; `model` a Keras model,
        or any callable from a dict of numpy arrays to numpy outputs.

        On TensorFlow one graph for every batch shape, traced once (kept for the next
        evaluation of the same model), as `fit` traces its step: `predict_on_batch` traces
        a graph per new batch shape, three or four per evaluation of packed or dynamically
        padded batches, seconds each on a CPU. Other Keras backends (JAX) take numpy arrays.
        """
        if not isinstance(model, keras.Model):  # a callable on numpy arrays (a LiteRT file's signatures)
            return lambda inputs: model({name: value.numpy() for name, value in inputs.items()})
        if keras.backend.backend() != "tensorflow":
            return lambda inputs: model.predict_on_batch(
                {name: value.numpy() for name, value in inputs.items()}
            )
        cached = self._predictor
        if cached is None or cached[0] is not model or cached[1] != input_spec:
            # No AutoGraph: the model is keras.ops code without tensor-dependent Python control
            # flow, and converting this lambda prints a "please report this" warning.
            call = tf.function(
                lambda inputs: model(inputs, training=False), input_signature=[input_spec], autograph=False
            )
            cached = self._predictor = (model, input_spec, call)
        call = cached[2]
        return lambda inputs: tf.nest.map_structure(lambda tensor: tensor.numpy(), call(inputs))

    def _batch_loss(self, labels, outputs, real) -> tuple[float, float]:
        labels = tf.nest.map_structure(lambda t: np.asarray(t)[real], labels)
        outputs = tf.nest.map_structure(lambda t: np.asarray(t)[real], outputs)
        if not real.any():
            return 0.0, 0.0
        # The loss is a mean over the labelled positions: rows, or (token labels) the
        # pieces whose label is not ignore_label.
        count = (
            float((labels != self.ignore_label).sum()) if self.ignore_label is not None else float(real.sum())
        )
        return self.task_loss(self.kind, labels, outputs), count

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

    def majority_baseline(self, predictions: Predictions) -> tuple[str, float] | None:
        """(label, accuracy) of always answering the commonest class, on labelled `predictions`,
        for families whose score is an accuracy over classes; None for the others."""
        return None

    def fit_baseline(self, train: TaskData) -> Baseline | None:
        """A simple model fitted on the training data, scored beside the fine-tuned one (the
        run's --baseline); None for families that have none. TaskDataError where the data
        cannot teach it (the run then stops before writing anything)."""
        return None

    # -- loss and metrics --------------------------------------------------------------------
    @classmethod
    def compile_args(cls, kind: str) -> dict:
        """`loss`, `metrics` (and `loss_weights`) for `model.compile` of a model of `kind`."""
        raise NotImplementedError(f"{cls.__name__} defines no loss")

    @classmethod
    def task_loss(cls, kind: str, labels, outputs) -> float:
        """The training loss of `compile_args(kind)` on whole arrays (e.g. eval_loss)."""
        args = cls.compile_args(kind)
        loss = args["loss"]
        if isinstance(loss, dict):
            weights = args.get("loss_weights", {})
            return float(
                sum(
                    weights.get(name, 1.0) * float(fn(labels[name], outputs[name]))
                    for name, fn in loss.items()
                )
            )
        return float(loss(labels, outputs))

    # -- serving (bert_tf.serving.task) ------------------------------------------------------
    @classmethod
    def serving_preprocessor(cls, tokenizer, info: FinetunedModelInfo, seq_length: int):
        """The fine-tuning preprocessor of a saved model of this family: the same rules,
        traced into its SavedModel."""
        raise NotImplementedError(f"{cls.__name__} is not served")

    @classmethod
    def serving_signatures(
        cls, serving, info: FinetunedModelInfo, seq_length: int
    ) -> dict[str, tf.types.experimental.ConcreteFunction]:
        """The SavedModel's signatures (`serving_default` first) of `serving`, the
        `bert_tf.serving.task.TaskServing` being exported (its `model`, `preprocessor`,
        `tokenizer`, `info`), traced from the family's own graph programs."""
        raise NotImplementedError(f"{cls.__name__} is not served")

    @classmethod
    def export_info(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        """What this family adds to the export's assets.extra/export_info.json."""
        return {}

    # -- LiteRT (bert_tf.serving.litert_conversion) ------------------------------------------
    # The file's inputs are token ids [batch, length] (`litert_input_rank` 3: [batch, choices,
    # length]); a family whose model reads packed rows also gets `serving_packed`.
    litert_input_rank: ClassVar[int] = 2
    # The TensorFlow-free client of the family's files (MODULE:CLASS), recorded in the export so
    # that `bert_tf.serving.litert.load` finds it; None: the file is served by the app.
    litert_client: ClassVar[str | None] = None

    @classmethod
    def litert_packed(cls, info: FinetunedModelInfo) -> bool:
        """Whether the file gets the packed signature (`serving_packed`)."""
        return False

    @classmethod
    def litert_info(cls, info: FinetunedModelInfo) -> dict[str, Any]:
        """What a client needs beyond the outputs, in the file's export_info.json."""
        return {}

    # -- export kinds of the family's own (bert_tf.serving.exporter) -------------------------
    # Beside bert_tf.export's kinds, `--kind=NAME` of a fine-tuned model of this family:
    # {NAME: "MODULE:FUNCTION"}, FUNCTION(model, export_dir, overwrite) -> the folder written.
    export_kinds: ClassVar[dict[str, str]] = {}

    # -- other formats (bert_tf.tasks.finetuned: Hugging Face and original checkpoints) -----
    @classmethod
    def head(cls, kind: str) -> TaskHead | None:
        """Where the head of a model of `kind` lives in a Hugging Face folder (the
        transformers class and problem_type) and in an original checkpoint (its names);
        None for a head those formats do not have."""
        return None

    @classmethod
    def keras_hub_classifier(cls, model, info: FinetunedModelInfo) -> KerasHubClassifier | None:
        """The model's head as keras-hub's `BertTextClassifier` head (`--kind=keras_hub`), or
        None where keras-hub has no task class for it (its encoder is then written alone)."""
        return None
