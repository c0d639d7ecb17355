"""SQuAD post-processing with hand-made features and known logits."""

import json
import os

import numpy as np
import tensorflow as tf

from bert_tf.tasks.span.postprocess import final_text, postprocess, write_predictions
from bert_tf.tasks.span.squad import SquadExample, SquadFeature

DOC = ["The", "Eiffel", "Tower", "(1889)", "stands", "in", "Paris."]
# [CLS] where ? [SEP] | the e ##iff ##el tower ( 1889 ) stands in paris . | [SEP]
PIECES = ["the", "e", "##iff", "##el", "tower", "(", "1889", ")", "stands", "in", "paris", "."]
PIECE_WORD = [0, 1, 1, 1, 2, 3, 3, 3, 4, 5, 6, 6]


def make_feature(example_index=0, span=(0, 12), max_context=None, unique_id=1):
    start, end = span
    tokens = ["[CLS]", "where", "?", "[SEP]", *PIECES[start:end], "[SEP]"]
    token_to_orig = {4 + i: PIECE_WORD[start + i] for i in range(end - start)}
    is_max = {position: True for position in token_to_orig}
    if max_context is not None:
        # max_context: the doc piece indexes this window is the best window for.
        is_max = {position: (position - 4 + start) in max_context for position in token_to_orig}
    return SquadFeature(unique_id, example_index, 0, tokens, token_to_orig, is_max, [], [], [])


def logits_for(feature, start_at=None, end_at=None, high=8.0, null=0.0):
    """Logits that peak at the given window positions and give [CLS] a null score `null`."""
    starts = np.zeros(len(feature.tokens) + 3)  # padding positions beyond the tokens
    ends = np.zeros(len(feature.tokens) + 3)
    starts[0] = ends[0] = null / 2
    if start_at is not None:
        starts[start_at] = high
    if end_at is not None:
        ends[end_at] = high
    return starts, ends


class SquadPostprocessTest(tf.test.TestCase):
    def setUp(self):
        self.example = SquadExample("q1", "where?", DOC)

    def run_one(self, start, end, **kwargs):
        feature = make_feature()
        starts, ends = logits_for(feature, start, end, null=kwargs.pop("null", 0.0))
        return postprocess([self.example], [feature], [starts], [ends], **kwargs)

    def test_answer_inside_a_word_is_cut_from_the_original_text(self):
        # Pieces "1889" (window position 10) inside the word "(1889)".
        predictions, nbest, _ = self.run_one(10, 10)
        self.assertEqual(predictions, {"q1": "1889"})
        self.assertEqual(nbest["q1"][0]["text"], "1889")

    def test_answer_spanning_word_pieces_keeps_original_case(self):
        # "e ##iff ##el tower" -> "eiffel tower" -> "Eiffel Tower".
        predictions, _, _ = self.run_one(5, 8)
        self.assertEqual(predictions["q1"], "Eiffel Tower")
        # Ending on a piece before the word's end gives the part of the word.
        predictions, _, _ = self.run_one(5, 6)
        self.assertEqual(predictions["q1"], "Eiff")

    def test_trailing_punctuation_is_dropped(self):
        predictions, _, _ = self.run_one(14, 14)  # "paris" of "Paris."
        self.assertEqual(predictions["q1"], "Paris")

    def test_invalid_spans_are_skipped(self):
        # Best end before best start: the best valid span wins instead.
        feature = make_feature()
        starts, ends = logits_for(feature, 14, 5)
        starts[5] = 7.0  # second-best start, before the end at 5
        predictions, nbest, _ = postprocess([self.example], [feature], [starts], [ends])
        self.assertEqual(predictions["q1"], "E")  # start 5, end 5: piece "e"
        for entry in nbest["q1"]:
            self.assertNotEqual(entry["text"], "")
        # An answer longer than max_answer_length is not allowed.
        predictions, _, _ = self.run_one(4, 15, max_answer_length=5)
        self.assertNotEqual(predictions["q1"], "The Eiffel Tower (1889) stands in Paris.")

    def test_nbest_is_ranked_unique_and_normalised(self):
        feature = make_feature()
        rng = np.random.default_rng(0)
        starts, ends = rng.normal(size=(2, len(feature.tokens)))
        _, nbest, _ = postprocess([self.example], [feature], [starts], [ends], n_best_size=6)
        entries = nbest["q1"]
        self.assertBetween(len(entries), 3, 6)
        scores = [e["start_logit"] + e["end_logit"] for e in entries]
        self.assertEqual(scores, sorted(scores, reverse=True))
        self.assertLen({e["text"] for e in entries}, len(entries))
        self.assertAllClose(sum(e["probability"] for e in entries), 1.0)

    def test_null_answer_and_threshold(self):
        # Null score 20 vs best span 16: difference 4.
        predictions, nbest, null_odds = self.run_one(10, 10, null=20.0, version_2_with_negative=True)
        self.assertEqual(predictions["q1"], "")
        self.assertAllClose(null_odds["q1"], 4.0)
        self.assertIn("", [e["text"] for e in nbest["q1"]])
        predictions, _, _ = self.run_one(
            10, 10, null=20.0, version_2_with_negative=True, null_score_diff_threshold=5.0
        )
        self.assertEqual(predictions["q1"], "1889")
        # Version 1.1 never answers "".
        predictions, _, null_odds = self.run_one(10, 10, null=20.0)
        self.assertEqual(predictions["q1"], "1889")
        self.assertEqual(null_odds, {})

    def test_only_the_window_with_most_context_may_start_a_span(self):
        # Two windows share pieces 4..7; window A (pieces 0..8) is the max context for
        # pieces 0..5, window B (pieces 4..12) for 6..11. Both put the best start at
        # piece 5 ("##iff") ... but only A may use it.
        window_a = make_feature(span=(0, 8), max_context=set(range(0, 6)))
        window_b = make_feature(span=(4, 12), max_context=set(range(6, 12)), unique_id=2)
        a_starts, a_ends = logits_for(window_a, 4 + 4, 4 + 4, high=5.0)  # piece 4 "tower"
        b_starts, b_ends = logits_for(window_b, 4 + 0, 4 + 0, high=9.0)  # piece 4 in B: not max
        b_starts[4 + 6], b_ends[4 + 6] = 3.0, 3.0  # piece 10 "paris" (B has max context)
        predictions, nbest, _ = postprocess(
            [self.example], [window_a, window_b], [a_starts, b_starts], [a_ends, b_ends]
        )
        self.assertEqual(predictions["q1"], "Tower")
        self.assertIn("Paris", [e["text"] for e in nbest["q1"]])

    def test_final_text(self):
        self.assertEqual(final_text("smith", "Smith's,", lower_case=True), "Smith")
        self.assertEqual(final_text("cafe", "Café!", lower_case=True), "Café")
        self.assertEqual(final_text("new york", "(New  York)", lower_case=True), "New  York")
        self.assertEqual(final_text("[UNK] x", "☃ X", lower_case=True), "☃ X")  # not found: whole span
        # Cased models compare case-sensitively.
        self.assertEqual(final_text("Ab", "xAb.", lower_case=False), "Ab")
        self.assertEqual(final_text("ab", "xAb.", lower_case=False), "xAb.")

    def test_write_predictions(self):
        predictions, nbest, null_odds = self.run_one(10, 10, null=20.0, version_2_with_negative=True)
        out = self.get_temp_dir()
        paths = write_predictions(out, predictions, nbest, null_odds)
        self.assertEqual(
            sorted(os.path.basename(p) for p in paths),
            ["nbest_predictions.json", "null_odds.json", "predictions.json"],
        )
        with open(os.path.join(out, "predictions.json")) as handle:
            self.assertEqual(json.load(handle), {"q1": ""})
        with open(os.path.join(out, "null_odds.json")) as handle:
            self.assertAllClose(json.load(handle)["q1"], 4.0)


if __name__ == "__main__":
    tf.test.main()
