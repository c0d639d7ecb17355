"""NER post-processing exists once: the SavedModel's entities are those seqeval scores."""

import random

import numpy as np
import tensorflow as tf
from seqeval.metrics.sequence_labeling import get_entities

from bert_tf.serving.task import TaskServing
from bert_tf.tasks.finetuned import FinetunedModelInfo
from bert_tf.tasks.token import conll as ner
from bert_tf.tasks.token import entities as ner_entities
from bert_tf.tasks.token import signatures
from bert_tf.tokenization import BertTokenizer

VOCAB = "tests/fixtures/bert_uncased_vocab.txt"
IOB = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC-X", "I-MISC-X"]
IOBES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-ORG", "I-ORG", "E-ORG", "S-ORG"]
WORDS = ["Paris", "is", "in", "France", ".", "unaffable", "Smith's", "東京", "co-op", "a\u200bb", "Zoë"]


def seqeval_entities(tags):
    """(type, first word, last word) of one sentence, by the scorer."""
    return [tuple(entity) for entity in get_entities(list(tags))]


def served_entities(found, row):
    chosen = found.row.numpy() == row
    return list(
        zip(
            [name.decode() for name in found.type_name.numpy()[chosen]],
            found.first_word.numpy()[chosen].tolist(),
            found.last_word.numpy()[chosen].tolist(),
            strict=True,
        )
    )


class FixedLogits(tf.Module):
    """A token tagger that returns the logits last assigned, whatever its inputs."""

    def __init__(self, num_labels):
        super().__init__()
        self.logits = tf.Variable(np.zeros([1, 1, num_labels], np.float32), shape=tf.TensorShape(None))

    def __call__(self, inputs, training=False):
        return self.logits.read_value()


class EntityWordsTest(tf.test.TestCase):
    def test_random_tags_give_seqevals_entities(self):
        rng = random.Random(3)
        for labels in (IOB, IOBES):
            sentences = [
                [rng.randrange(-1, len(labels)) for _ in range(rng.randint(0, 12))] for _ in range(300)
            ]
            found = ner_entities.entity_words(tf.ragged.constant(sentences, tf.int64, ragged_rank=1), labels)
            for row, tags in enumerate(sentences):
                names = [labels[tag] if tag >= 0 else "O" for tag in tags]  # -1: a cut word, "O"
                self.assertEqual(served_entities(found, row), seqeval_entities(names), names)

    def test_sentences_without_words_have_no_entities(self):
        # A served batch of empty texts has no words at all: no entity, not an error.
        for sentences in ([[]], [[], []], []):
            tags = tf.ragged.constant(sentences, tf.int64, ragged_rank=1, inner_shape=())
            found = ner_entities.entity_words(tags, IOB)
            self.assertEqual(found.row.shape, [0])
            self.assertEqual(found.word_entity.to_list(), sentences)

    def test_ties_choose_the_first_label(self):
        logits = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0]], np.float32)
        self.assertEqual(ner_entities.word_tag_ids(logits).numpy().tolist(), [1, 0, 2])


class ServedEqualsScoredTest(tf.test.TestCase):
    def test_random_logits(self):
        rng = np.random.default_rng(4)
        tokenizer = BertTokenizer(VOCAB, lower_case=True)
        info = FinetunedModelInfo("ner", "token", IOBES, True, 16)
        model = FixedLogits(len(IOBES))
        serving = TaskServing(model, tokenizer, info, 16)
        features = tf.function(serving.preprocessor.features, autograph=False)
        entities = tf.function(lambda text: signatures.entities(serving, text), autograph=False)
        served_count = 0
        for draw in range(3):
            texts = [" ".join(rng.choice(WORDS, size=rng.integers(0, 14))) for _ in range(20)]
            words, begin, end = tokenizer.split_words_with_offsets(tf.constant(texts))
            positions = features(words)["word_positions"]
            shape = [len(texts), int(tf.reduce_max(positions.flat_values)) + 2, len(IOBES)]
            logits = rng.normal(size=shape)
            if draw == 2:  # many ties
                logits = np.round(logits)
            model.logits.assign(logits.astype(np.float32))
            got = entities(tf.constant(texts))
            # Evaluation: logits at each word's first piece, NaN for cut words, seqeval's entities.
            word_logits = []
            for row, where in enumerate(positions.to_list()):
                where = np.asarray(where, np.int64)
                rows = logits.astype(np.float32)[row, np.maximum(where, 0)].astype(np.float64)
                rows[where < 0] = np.nan
                word_logits.append(rows)
            tags = ner.word_predictions(word_logits, IOBES)
            for row, text in enumerate(texts):
                want = seqeval_entities(tags[row])
                count = int(got["num_entities"][row])
                self.assertEqual(count, len(want))
                served_count += count
                word_begin, word_end = begin[row].numpy(), end[row].numpy()
                raw = text.encode()
                for index, (kind, first, last) in enumerate(want):
                    self.assertEqual(got["entity_label"][row, index].numpy().decode(), kind)
                    start = len(raw[: word_begin[first]].decode())
                    stop = len(raw[: word_end[last]].decode())
                    self.assertEqual(
                        (int(got["entity_start"][row, index]), int(got["entity_end"][row, index])),
                        (start, stop),
                    )
                    self.assertEqual(got["entity_text"][row, index].numpy().decode(), text[start:stop])
        self.assertGreater(served_count, 20)


if __name__ == "__main__":
    tf.test.main()
