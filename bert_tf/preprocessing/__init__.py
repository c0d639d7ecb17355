"""In-graph preprocessors: raw text (and labels) in, BERT features out, one per task family.

Each is a `tf.Module` of TensorFlow and tensorflow-text ops, used three ways with the same
rules: mapped over `tf.data` batches for training, evaluation and prediction
(`dataset.batch(32).map(preprocessor)`), called from Python, and inside the exported task
SavedModel (`bert_tf.serving.task`).

- `TextClassifierPreprocessor`: one or two texts (classification, regression).
- `TokenTaggerPreprocessor`: words and their tags (NER).
- `SpanPreprocessor`: question and context, in windows (SQuAD).
- `MultipleChoicePreprocessor`: a context and its endings (SWAG).

A text longer than a row is read in overlapping windows (`bert_tf.preprocessing.windows`):
SQuAD's contexts always, the classifier's and tagger's texts when given a `doc_stride`.
"""

from bert_tf.preprocessing.choice import MultipleChoicePreprocessor
from bert_tf.preprocessing.classifier import TextClassifierPreprocessor
from bert_tf.preprocessing.spans import SpanPreprocessor
from bert_tf.preprocessing.tagger import IGNORE_LABEL, TokenTaggerPreprocessor

__all__ = [
    "IGNORE_LABEL",
    "MultipleChoicePreprocessor",
    "SpanPreprocessor",
    "TextClassifierPreprocessor",
    "TokenTaggerPreprocessor",
]
