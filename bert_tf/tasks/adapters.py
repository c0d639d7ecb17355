"""One adapter per task family: where its data comes from, its model, metrics and outputs.

An adapter turns the run's settings into `TaskData` (model inputs, targets and what
post-processing needs), builds the Keras model on an encoder, scores model outputs with
the task's official metric, and writes predictions in the task's official format. The
runner (`bert_tf.tasks.runner`) drives all of them the same way.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import numpy as np

from bert_tf import fileio
from bert_tf.tasks import classification, glue, metrics, ner, squad, swag, tfds_sources
from bert_tf.tasks.features import ConversionStats, TaskDataError
from bert_tf.tasks.squad_postprocess import postprocess, write_predictions

logger = logging.getLogger(__name__)

SQUAD_TASKS = ("squad", "squad_v2")
TASKS = (*glue.GLUE_TASKS, "classification", "regression", *SQUAD_TASKS, "ner", "swag")


@dataclasses.dataclass
class TaskData:
    name: str  # "train", "eval", "eval_mismatched", "predict", ...
    x: dict[str, np.ndarray]
    y: Any  # targets for model.fit / evaluate, None when unlabelled
    stats: ConversionStats
    meta: Any = None  # what scoring and writing predictions need


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


class ClassificationAdapter:
    """GLUE (TSV files, a GLUE data_dir or TFDS glue/*) and users' own CSV/TSV/JSONL."""

    def __init__(self, settings, tokenizer):
        self.settings, self.tokenizer = settings, tokenizer
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
        self.kind = "regression" if regression else "classification"
        self.metric_names = self.glue.metrics if self.glue else ("accuracy",)
        self.label_list = list(self.glue.label_list) if self.glue and self.glue.label_list else None

    # -- sources -----------------------------------------------------------------------
    def _examples(self, split: str) -> dict[str, list]:
        """split ("train", "eval", "predict") → {data name: examples}."""
        s = self.settings
        labelled = split != "predict"
        file = {"train": s.train_file, "eval": s.eval_file, "predict": s.predict_file}[split]
        if file and self.glue is not None:
            return {split: glue.read_examples(self.glue, file, labelled=labelled)}
        if file:
            label_column = s.label_column if labelled else None
            return {split: classification.read_table(file, s.text_column, s.text_b_column, label_column)}
        if self.glue is None:
            return {}
        if s.data_dir:  # a GLUE task directory as distributed
            splits = {"train": ("train",), "eval": self.glue.eval_splits, "predict": self.glue.test_splits}[
                split
            ]
            files = glue.split_files(self.glue, s.data_dir)

            def read(name):
                return (
                    glue.read_examples(self.glue, files[name], labelled)
                    if os.path.isfile(files[name])
                    else None
                )

        elif s.tfds_name or s.tfds_data_dir:
            tfds_splits = {"eval": self.glue.tfds_eval_splits, "predict": self.glue.tfds_test_splits}
            splits = tfds_splits.get(split, ("train",))

            def read(name):
                return glue.tfds_examples(self.glue, name, s.tfds_data_dir)

        else:
            return {}
        result = {}
        for index, name in enumerate(splits):
            examples = read(name)
            if examples is not None:
                # MNLI: "eval" is the matched dev set, "eval_mismatched" the other one.
                result[split if index == 0 else f"{split}_{_suffix(name)}"] = examples
        return result

    def load(self, split: str) -> list[TaskData]:
        loaded = self._examples(split)
        if split == "train" and loaded and self.label_list is None and self.kind == "classification":
            self.label_list = classification.label_list_from(loaded["train"])
        result = []
        for name, examples in loaded.items():
            if split == "predict":
                examples = [dataclasses.replace(e, label=None) for e in examples]
            x, y, stats = classification.convert_examples(
                self.tokenizer, examples, self.label_list, self.settings.max_seq_length
            )
            result.append(TaskData(name, x, y, stats, examples))
        return result

    # -- model and outputs ---------------------------------------------------------------
    def build_model(self, encoder):
        from bert_tf.models import BertClassifier

        return BertClassifier(encoder, num_classes=1 if self.kind == "regression" else len(self.label_list))

    def _values(self, outputs):
        outputs = np.asarray(outputs)
        return outputs[:, 0] if self.kind == "regression" else outputs.argmax(axis=-1)

    def score(self, data: TaskData, outputs) -> dict[str, float]:
        if self.kind == "regression":
            return metrics.regression_metrics(data.y, self._values(outputs))
        return metrics.classification_metrics(data.y, self._values(outputs), self.metric_names)

    def write(self, data: TaskData, outputs, output_dir: str) -> list[str]:
        values = self._values(outputs)
        if self.glue is not None:
            names = self.glue.submission_names
            name = names[1] if data.name.endswith("mismatched") and len(names) > 1 else names[0]
            # Leaderboard files for the test sets; eval_<name>.tsv for the dev sets.
            file_name = f"{name}.tsv" if data.name.startswith("predict") else f"eval_{name}.tsv"
            path = os.path.join(output_dir, file_name)
            glue.write_submission(path, self.glue, data.meta, values)
            return [path]
        path = os.path.join(output_dir, f"{data.name}_predictions.tsv")
        with fileio.writing(path) as handle:
            handle.write("id\tprediction\n")
            for example, value in zip(data.meta, values, strict=True):
                label = f"{float(value):.6g}" if self.kind == "regression" else self.label_list[int(value)]
                handle.write(f"{example.guid}\t{label}\n")
        return [path]


class SquadAdapter:
    kind = "span"
    label_list = None

    def __init__(self, settings, tokenizer):
        self.settings, self.tokenizer = settings, tokenizer
        self.version_2 = settings.task.lower() == "squad_v2" or (
            bool(settings.tfds_name) and tfds_sources.squad_version(settings.tfds_name)
        )

    def load(self, split: str) -> list[TaskData]:
        s = self.settings
        file = {"train": s.train_file, "eval": s.eval_file, "predict": s.predict_file}[split]
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
        features, stats = squad.convert_examples(
            self.tokenizer, examples, training, s.max_seq_length, s.doc_stride, s.max_query_length
        )
        stats.num_skipped = skipped
        arrays = squad.feature_arrays(features)
        x = {name: arrays[name] for name in ("input_ids", "input_mask", "segment_ids")}
        y = (
            {"start_logits": arrays["start_position"], "end_logits": arrays["end_position"]}
            if training
            else None
        )
        return [TaskData(split, x, y, stats, (dataset, examples, features))]

    def build_model(self, encoder):
        from bert_tf.models import BertSpanLabeler

        return BertSpanLabeler(encoder)

    def _answers(self, data: TaskData, outputs):
        _, examples, features = data.meta
        s = self.settings
        return postprocess(
            examples,
            features,
            np.asarray(outputs["start_logits"]),
            np.asarray(outputs["end_logits"]),
            n_best_size=s.n_best_size,
            max_answer_length=s.max_answer_length,
            lower_case=self.tokenizer.lower_case,
            version_2_with_negative=self.version_2,
            null_score_diff_threshold=s.null_score_diff_threshold,
        )

    def score(self, data: TaskData, outputs) -> dict[str, float]:
        predictions, _, null_odds = self._answers(data, outputs)
        return metrics.squad_scores(data.meta[0], predictions, null_odds if self.version_2 else None)

    def write(self, data: TaskData, outputs, output_dir: str) -> list[str]:
        predictions, nbest, null_odds = self._answers(data, outputs)
        # predictions.json of the predict file at the top; the eval file's beside it only
        # when there is no predict file, else in eval/.
        separate = data.name != "predict" and self.settings.predict_file
        directory = os.path.join(output_dir, "eval") if separate else output_dir
        return write_predictions(directory, predictions, nbest, null_odds if self.version_2 else None)


class NerAdapter:
    kind = "token"

    def __init__(self, settings, tokenizer):
        self.settings, self.tokenizer = settings, tokenizer
        self.label_list = None

    def load(self, split: str) -> list[TaskData]:
        s = self.settings
        file = {"train": s.train_file, "eval": s.eval_file, "predict": s.predict_file}[split]
        if file:
            sentences = ner.read_conll(file, labelled=split != "predict")
        elif s.tfds_name:
            tfds_split = {"train": "train", "eval": "validation", "predict": "test"}[split]
            sentences = tfds_sources.conll_sentences(s.tfds_name, tfds_split, s.tfds_data_dir)
        else:
            return []
        if split == "train":
            self.label_list = ner.label_list_from(sentences)
        converted = ner.convert_sentences(self.tokenizer, sentences, self.label_list, s.max_seq_length)
        x = {name: converted.arrays[name] for name in ("input_ids", "input_mask", "segment_ids")}
        y = converted.arrays["label_ids"] if split != "predict" else None
        return [TaskData(split, x, y, converted.stats, (sentences, converted.first_piece))]

    def build_model(self, encoder):
        from bert_tf.models import BertTokenClassifier

        return BertTokenClassifier(encoder, num_classes=len(self.label_list))

    def score(self, data: TaskData, outputs) -> dict[str, float]:
        sentences, first_piece = data.meta
        predicted = ner.word_predictions(outputs, first_piece, self.label_list)
        return metrics.ner_metrics([sentence.tags for sentence in sentences], predicted)

    def write(self, data: TaskData, outputs, output_dir: str) -> list[str]:
        sentences, first_piece = data.meta
        path = os.path.join(output_dir, f"{data.name}_predictions.txt")
        ner.write_predictions(path, sentences, ner.word_predictions(outputs, first_piece, self.label_list))
        return [path]


class ChoiceAdapter:
    kind = "multiple_choice"
    label_list = None

    def __init__(self, settings, tokenizer):
        self.settings, self.tokenizer = settings, tokenizer

    def load(self, split: str) -> list[TaskData]:
        s = self.settings
        file = {"train": s.train_file, "eval": s.eval_file, "predict": s.predict_file}[split]
        if not file:
            return []
        examples = swag.read_swag(file)
        x, y, stats = swag.convert_examples(self.tokenizer, examples, s.max_seq_length)
        if split != "predict" and y is None:
            raise TaskDataError(f"{file}: the {split} data needs a label column")
        return [TaskData(split, x, y if split != "predict" else None, stats, examples)]

    def build_model(self, encoder):
        from bert_tf.models import BertMultipleChoice

        return BertMultipleChoice(encoder)

    def score(self, data: TaskData, outputs) -> dict[str, float]:
        return metrics.classification_metrics(data.y, np.asarray(outputs).argmax(axis=-1), ("accuracy",))

    def write(self, data: TaskData, outputs, output_dir: str) -> list[str]:
        path = os.path.join(output_dir, f"{data.name}_predictions.tsv")
        with fileio.writing(path) as handle:
            handle.write("id\tprediction\n")
            for example, choice in zip(data.meta, np.asarray(outputs).argmax(axis=-1), strict=True):
                handle.write(f"{example.guid}\t{int(choice)}\n")
        return [path]
