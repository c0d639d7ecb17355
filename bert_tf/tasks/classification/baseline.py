"""The bag-of-words baseline a fine-tuned classifier should beat.

TF-IDF of word 1- and 2-grams with scikit-learn's defaults otherwise, then logistic regression
(classification), one logistic regression per label (multi-label) or ridge regression
(regression); the two texts of a pair get a vectorizer each. It is fitted on the training
data (a random sample of `MAX_TRAINING_ROWS` examples where there are more, so its time and
memory stay bounded) and scored on the eval data with the task's own metrics.

>>> from bert_tf.tasks.classification.tables import InputExample
>>> train = [InputExample(str(i), text, None, label) for i, (text, label) in
...          enumerate([("good film", "pos"), ("bad film", "neg")] * 5)]
>>> model = BagOfWords.fit(train, "classification", ["neg", "pos"])
>>> model.predict([InputExample("a", "a good one")]).tolist()
[1]
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Sequence

import numpy as np

from bert_tf.tasks.features import TaskDataError

MAX_TRAINING_ROWS = 100_000  # a larger training file is sampled: said in the run's log
DESCRIPTIONS = {
    "classification": "TF-IDF of word 1-2-grams + logistic regression",
    "multi_label": "TF-IDF of word 1-2-grams + one-vs-rest logistic regression",
    "regression": "TF-IDF of word 1-2-grams + ridge regression",
}


def vectorizer():
    """The texts' features: TF-IDF of word unigrams and bigrams (lower-cased, as scikit-learn does)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(ngram_range=(1, 2))


def estimator(kind: str):
    """The model on the features, for a task of `kind`."""
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.multiclass import OneVsRestClassifier

    if kind == "regression":
        return Ridge()
    classifier = LogisticRegression(max_iter=1000)  # converges on every data set tried; 100 did not
    return OneVsRestClassifier(classifier) if kind == "multi_label" else classifier


def pipeline(kind: str, pair: bool):
    """scikit-learn's pipeline of the baseline: it takes rows of [text] or [text_a, text_b]."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline

    columns = [(f"text_{name}", vectorizer(), i) for i, name in enumerate("ab"[: 1 + pair])]
    return make_pipeline(ColumnTransformer(columns), estimator(kind))


@dataclasses.dataclass
class BagOfWords:
    """A fitted bag-of-words baseline of a classification, multi-label or regression task."""

    kind: str
    label_list: Sequence[str] | None
    pair: bool
    model: object  # the fitted scikit-learn pipeline
    num_examples: int  # training examples in the data
    num_fitted: int  # of them, those it was fitted on

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.kind]

    @classmethod
    def fit(
        cls,
        examples: Iterable,
        kind: str,
        label_list: Sequence[str] | None,
        max_rows: int = MAX_TRAINING_ROWS,
        seed: int = 0,
    ) -> BagOfWords:
        """Fits on the labelled `examples` (InputExample), at most `max_rows` of them (a
        uniform sample, drawn with `seed`); TaskDataError when the labels teach it nothing."""
        sample, total = _sample((e for e in examples if e.label is not None), max_rows, seed)
        if not sample:
            raise TaskDataError("the training data has no labelled examples to fit the baseline on")
        pair = sample[0].text_b is not None
        targets = _targets([e.label for e in sample], kind, label_list)
        if kind == "classification" and len(np.unique(targets)) < 2:
            raise TaskDataError(
                f"the training data has one class ({sample[0].label!r}): a classifier learns nothing from "
                "it; add examples of the other classes (or pass --nobaseline to fine-tune anyway)"
            )
        model = pipeline(kind, pair)
        model.fit(_rows(sample, pair), targets)
        return cls(kind, label_list, pair, model, total, len(sample))

    def predict(self, examples: Iterable) -> np.ndarray:
        """Class ids [n] (classification), scores [n] (regression) or multi-hot rows [n, labels]."""
        return np.asarray(self.model.predict(_rows(list(examples), self.pair)))

    def targets(self, labels: Iterable) -> np.ndarray:
        """Labels as the predictions are: class ids, scores or multi-hot rows."""
        return _targets(list(labels), self.kind, self.label_list)


def _sample(examples: Iterable, size: int, seed: int) -> tuple[list, int]:
    """(a uniform sample of at most `size` of the examples, in their order; how many there were):
    reservoir sampling, so a file of any length is read once and never held whole."""
    rng = random.Random(seed)
    chosen: list[tuple[int, object]] = []
    total = 0
    for index, example in enumerate(examples):
        total = index + 1
        if len(chosen) < size:
            chosen.append((index, example))
        else:
            slot = rng.randrange(total)
            if slot < size:
                chosen[slot] = (index, example)
    return [example for _, example in sorted(chosen, key=lambda pair: pair[0])], total


def _rows(examples: Sequence, pair: bool) -> np.ndarray:
    """The examples' texts as a [n, 1 or 2] array of objects (the pipeline's columns)."""
    rows = np.empty((len(examples), 1 + pair), dtype=object)
    for i, example in enumerate(examples):
        rows[i, 0] = example.text_a
        if pair:
            rows[i, 1] = example.text_b or ""
    return rows


def _targets(labels: list, kind: str, label_list: Sequence[str] | None) -> np.ndarray:
    if kind == "regression":
        return np.asarray([float(label) for label in labels], dtype=np.float64)
    index = {name: i for i, name in enumerate(label_list)}
    if kind == "multi_label":
        hot = np.zeros((len(labels), len(label_list)), dtype=np.int64)
        for row, names in enumerate(labels):
            hot[row, [index[name] for name in names]] = 1
        return hot
    return np.asarray([index[str(label)] for label in labels], dtype=np.int64)
