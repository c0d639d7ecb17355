"""Feature conversion with the real bert-base-uncased vocab: layouts, truncation, maps."""

import os

import numpy as np
import tensorflow as tf

from bert_tf.tasks import classification, features, ner, squad, swag
from bert_tf.tasks.classification import InputExample
from bert_tf.tasks.features import TaskDataError
from bert_tf.tokenization import BertTokenizer

VOCAB = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bert_uncased_vocab.txt")


class FeaturesTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = BertTokenizer(VOCAB, lower_case=True)
        cls.vocab = cls.tokenizer.vocab

    def pieces(self, ids):
        return [self.vocab[i] for i in ids]

    def test_truncate_pair_trims_the_longer_side_from_the_end(self):
        a, b = list("abcdef"), list("xyz")
        self.assertTrue(features.truncate_pair(a, b, 6))
        self.assertEqual((a, b), (list("abc"), list("xyz")))
        a, b = list("ab"), list("xyz")
        self.assertTrue(features.truncate_pair(a, b, 3))  # equal lengths: b goes first
        self.assertEqual((a, b), (list("ab"), list("x")))
        self.assertFalse(features.truncate_pair(list("ab"), None, 2))

    def test_pair_layout_segments_padding_and_truncation_count(self):
        stats = features.ConversionStats()
        arrays = features.encode_pairs(
            self.tokenizer,
            ["Hello world", "a b c d e f g h"],
            ["Goodbye!", "z"],
            max_seq_length=10,
            stats=stats,
        )
        self.assertEqual(
            self.pieces(arrays["input_ids"][0]),
            ["[CLS]", "hello", "world", "[SEP]", "goodbye", "!", "[SEP]", "[PAD]", "[PAD]", "[PAD]"],
        )
        self.assertAllEqual(arrays["segment_ids"][0], [0, 0, 0, 0, 1, 1, 1, 0, 0, 0])
        self.assertAllEqual(arrays["input_mask"][0], [1] * 7 + [0] * 3)
        # 8 + 1 pieces into 10 - 3 = 7: the longer (first) text loses its end.
        self.assertEqual(self.pieces(arrays["input_ids"][1]), ["[CLS]", *"abcdef", "[SEP]", "z", "[SEP]"])
        self.assertEqual((stats.num_examples, stats.num_truncated), (2, 1))
        self.assertEqual(arrays["input_ids"].dtype, np.int32)

    def test_classification_labels_and_regression(self):
        examples = [InputExample("1", "good", None, "pos"), InputExample("2", "bad", None, "neg")]
        x, y, stats = classification.convert_examples(self.tokenizer, examples, ["neg", "pos"], 8)
        self.assertAllEqual(y, [1, 0])
        self.assertEqual(x["input_ids"].shape, (2, 8))
        examples = [InputExample("1", "a", "b", "3.5")]
        _, y, _ = classification.convert_examples(self.tokenizer, examples, None, 8)
        self.assertAllClose(y, [3.5])
        with self.assertRaisesRegex(TaskDataError, "row 7: label 'meh'"):
            classification.convert_examples(
                self.tokenizer, [InputExample("row 7", "a", None, "meh")], ["neg"], 8
            )

    def test_ner_label_on_the_first_piece_only(self):
        sentence = ner.Sentence(["Johanson", "visits", "Kraków"], ["B-PER", "O", "B-LOC"], line=1)
        labels = ["O", "B-LOC", "B-PER"]
        converted = ner.convert_sentences(self.tokenizer, [sentence], labels, max_seq_length=12)
        ids = converted.arrays["input_ids"][0]
        label_ids = converted.arrays["label_ids"][0]
        pieces = self.pieces(ids[ids > 0])
        self.assertEqual(pieces, ["[CLS]", "johan", "##son", "visits", "krakow", "[SEP]"])
        self.assertAllEqual(label_ids[:6], [-1, 2, -1, 0, 1, -1])
        self.assertAllEqual(label_ids[6:], [-1] * 6)
        self.assertEqual(converted.first_piece, [[1, 3, 4]])
        # Back to words from per-piece logits.
        logits = np.zeros((1, 12, 3))
        logits[0, [1, 3, 4], [2, 0, 1]] = 5.0
        self.assertEqual(
            ner.word_predictions(logits, converted.first_piece, labels), [["B-PER", "O", "B-LOC"]]
        )
        # Truncation: words that do not fit get no position and count.
        short = ner.convert_sentences(self.tokenizer, [sentence], labels, max_seq_length=4)
        self.assertEqual(short.first_piece, [[1, None, None]])
        self.assertEqual(short.stats.num_truncated, 1)
        with self.assertRaisesRegex(TaskDataError, "line 1: tag 'B-PER'"):
            ner.convert_sentences(self.tokenizer, [sentence], ["O", "B-LOC"], 12)

    def test_multiple_choice_shapes(self):
        examples = [
            swag.ChoiceExample("1", "A man sits.", ["He eats.", "He flies away quickly now."], 1),
            swag.ChoiceExample("2", "Rain.", ["Wet.", "Dry."], 0),
        ]
        x, y, stats = swag.convert_examples(self.tokenizer, examples, max_seq_length=8)
        self.assertEqual(x["input_ids"].shape, (2, 2, 8))
        self.assertAllEqual(y, [1, 0])
        self.assertEqual(self.pieces(x["input_ids"][1, 0][:5]), ["[CLS]", "rain", ".", "[SEP]", "wet"])
        self.assertEqual(stats.num_truncated, 1)  # only example 1's long ending is cut


class SquadFeaturesTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = BertTokenizer(VOCAB, lower_case=True)

    def test_answer_inside_a_word_is_narrowed_to_its_pieces(self):
        data = [
            {
                "paragraphs": [
                    {
                        "context": "The tower (built 1889) is tall.",
                        "qas": [
                            {
                                "id": "q",
                                "question": "When?",
                                "answers": [{"text": "1889", "answer_start": 17}],
                            }
                        ],
                    }
                ]
            }
        ]
        examples, _ = squad.read_examples(data, is_training=True)
        self.assertEqual((examples[0].start_position, examples[0].end_position), (3, 3))  # word "1889)"
        [feature], stats = squad.convert_examples(self.tokenizer, examples, True, max_seq_length=32)
        tokens = feature.tokens
        self.assertEqual(tokens[: tokens.index("[SEP]") + 1], ["[CLS]", "when", "?", "[SEP]"])
        self.assertEqual(tokens[feature.start_position : feature.end_position + 1], ["1889"])
        self.assertEqual(feature.token_to_orig_map[feature.start_position], 3)
        self.assertAllEqual(feature.segment_ids[:5], [0, 0, 0, 0, 1])
        self.assertEqual(stats.num_features, 1)

    def test_sliding_windows_max_context_and_out_of_span_answers(self):
        words = [f"w{i}" for i in range(40)]
        context = " ".join(words)
        answer_start = context.index("w35")
        data = [
            {
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {
                                "id": "q",
                                "question": "which one is it?",
                                "answers": [{"text": "w35", "answer_start": answer_start}],
                            }
                        ],
                    }
                ]
            }
        ]
        examples, _ = squad.read_examples(data, is_training=True)
        # "wN" is two pieces (w ##N); a question of 5 pieces: 32 - 5 - 3 = 24 context pieces.
        found, stats = squad.convert_examples(
            self.tokenizer, examples, True, max_seq_length=32, doc_stride=10, max_query_length=5
        )
        starts = [f.token_to_orig_map[min(f.token_to_orig_map)] for f in found]
        self.assertEqual(stats.num_features, len(found))
        self.assertGreater(len(found), 3)
        self.assertEqual(stats.num_truncated, 0)
        for feature in found:
            self.assertLen(feature.input_ids, 32)
            if feature.start_position:
                answer = feature.tokens[feature.start_position : feature.end_position + 1]
                self.assertEqual(answer, ["w", "##35"])
            else:  # the answer is not in this window: the target is [CLS]
                self.assertEqual(feature.end_position, 0)
        self.assertTrue(any(f.start_position for f in found))
        self.assertEqual(starts, sorted(starts))
        # Every context piece is "max context" in exactly one window.
        owners = {}
        for feature in found:
            span_start = min(feature.token_to_orig_map)
            for position, is_max in feature.token_is_max_context.items():
                if is_max:
                    key = (feature.doc_span_index, position - span_start)
                    owners.setdefault(feature.token_to_orig_map[position], []).append(key)
        self.assertEqual(sorted(owners), list(range(40)))

    def test_long_question_is_cut(self):
        data = [{"paragraphs": [{"context": "yes", "qas": [{"id": "q", "question": "why " * 10}]}]}]
        examples, _ = squad.read_examples(data, is_training=False)
        [feature], stats = squad.convert_examples(self.tokenizer, examples, False, 16, 8, max_query_length=4)
        self.assertEqual(feature.tokens, ["[CLS]", "why", "why", "why", "why", "[SEP]", "yes", "[SEP]"])
        self.assertEqual(stats.num_truncated, 1)


if __name__ == "__main__":
    tf.test.main()
