"""Predictions do not depend on padding: dynamic padding equals padding to max length.

For every task family a small random model runs on the same texts twice, once with rows
padded to their batch's longest row rounded up to 8 and once padded to the full
sequence length (classification also packed several to a row); the outputs at the real
positions agree to 1e-5 (float32).
"""

import os

import numpy as np
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.models import BertEncoder
from bert_tf.preprocessing import packing
from bert_tf.tasks.choice.model import BertMultipleChoice
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.span.model import BertSpanLabeler
from bert_tf.tasks.token.model import BertTokenClassifier
from bert_tf.tokenization import BertTokenizer
from tests import harness

VOCAB = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bert_uncased_vocab.txt")
SEQ = 64
TEXTS = ["the cat sat on the mat .", "a much longer sentence , with some commas , and more words in it", "hi"]
OTHER = ["short", "the second text of a pair", "and a third one here, longer than the others by far"]


class PaddingInvarianceTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = BertTokenizer(VOCAB)
        tf.keras.utils.set_random_seed(3)
        cls.config = harness.tiny_config(cls.tokenizer.vocab_size, hidden_dropout_prob=0.0)

    def both(self, make, x):
        """The features of x with dynamic padding (to a multiple of 8) and static padding."""
        dynamic, static = make(8), make(None)
        return dynamic.features(x), static.features(x)

    def assert_same(self, dynamic, static):
        self.assertAllClose(np.asarray(dynamic), np.asarray(static), atol=1e-5, rtol=0)

    def run_model(self, model, features):
        return model({name: features[name] for name in preprocessing.base.MODEL_INPUTS}, training=False)

    def test_classification(self):
        model = BertClassifier(BertEncoder(self.config), num_classes=3, dropout_rate=0.0)
        for x in (tf.constant(TEXTS), (tf.constant(TEXTS), tf.constant(OTHER))):
            dynamic, static = self.both(
                lambda m: preprocessing.TextClassifierPreprocessor(self.tokenizer, SEQ, pad_to_multiple_of=m),
                x,
            )
            self.assertLess(dynamic["input_ids"].shape[1], SEQ)
            self.assert_same(self.run_model(model, dynamic), self.run_model(model, static))
            # Packed rows (several examples per row, as training and prediction batch them).
            rows = packing.pack_sequences(
                {name: dynamic[name] for name in preprocessing.base.MODEL_INPUTS}, row_length=SEQ
            )
            self.assertEqual(rows["input_ids"].shape[0], 1)
            self.assert_same(model(rows, training=False), self.run_model(model, static))

    def test_token_tagging(self):
        model = BertTokenClassifier(BertEncoder(self.config), num_classes=5, dropout_rate=0.0)
        dynamic, static = self.both(
            lambda m: preprocessing.TokenTaggerPreprocessor(self.tokenizer, SEQ, pad_to_multiple_of=m),
            tf.constant(TEXTS),
        )
        width = dynamic["input_ids"].shape[1]
        self.assertLess(width, SEQ)
        mask = static["input_mask"].numpy()[:, :width, None]
        got, want = self.run_model(model, dynamic).numpy(), self.run_model(model, static).numpy()
        self.assert_same(got * mask, want[:, :width] * mask)

    def test_span_extraction(self):
        model = BertSpanLabeler(BertEncoder(self.config))
        context = " ".join(TEXTS * 6)  # several windows
        x = (tf.constant(["where is the cat ?", "who"]), tf.constant([context, "the mat"]))
        dynamic, static = self.both(
            lambda m: preprocessing.SpanPreprocessor(self.tokenizer, SEQ, 16, 8, pad_to_multiple_of=m), x
        )
        self.assertAllEqual(dynamic["example_index"], static["example_index"])
        self.assertGreater(len(dynamic["example_index"]), 3)
        width = dynamic["input_ids"].shape[1]
        mask = static["input_mask"].numpy()[:, :width]
        got, want = self.run_model(model, dynamic), self.run_model(model, static)
        for name in ("start_logits", "end_logits"):
            self.assert_same(got[name].numpy() * mask, want[name].numpy()[:, :width] * mask)

    def test_multiple_choice(self):
        model = BertMultipleChoice(BertEncoder(self.config), dropout_rate=0.0)
        x = (tf.constant(TEXTS), tf.constant([OTHER, OTHER[::-1], OTHER]))
        dynamic, static = self.both(
            lambda m: preprocessing.MultipleChoicePreprocessor(self.tokenizer, SEQ, pad_to_multiple_of=m), x
        )
        self.assertLess(dynamic["input_ids"].shape[-1], SEQ)
        self.assert_same(self.run_model(model, dynamic), self.run_model(model, static))
