"""Metrics against values computed by hand."""

import math

import tensorflow as tf

from bert_tf.tasks import metrics


class ClassificationMetricsTest(tf.test.TestCase):
    def test_accuracy_f1_matthews(self):
        labels = [1, 0, 1, 1, 0, 0]
        predictions = [1, 0, 0, 1, 1, 0]
        # TP=2 FP=1 FN=1 TN=2: P=R=2/3; MCC=(TP*TN-FP*FN)/sqrt(3*3*3*3)=3/9.
        result = metrics.classification_metrics(labels, predictions, ("accuracy", "f1", "matthews_corrcoef"))
        self.assertAllClose(result, {"accuracy": 4 / 6, "f1": 2 / 3, "matthews_corrcoef": 1 / 3})

    def test_unknown_metric_is_named(self):
        with self.assertRaisesRegex(ValueError, "'auc'"):
            metrics.classification_metrics([0], [0], ("auc",))

    def test_pearson_and_spearman(self):
        # y = x^2 is monotone (Spearman 1); Pearson = 25 / sqrt(5 * 129) by hand.
        result = metrics.regression_metrics([1, 2, 3, 4], [1, 4, 9, 16])
        self.assertAllClose(result, {"pearson": 25 / math.sqrt(5 * 129), "spearman": 1.0})


class NerMetricsTest(tf.test.TestCase):
    def test_entity_level_scores(self):
        gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
        # PER is cut short (wrong entity), LOC right, ORG right, plus one spurious MISC.
        predicted = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-MISC"]]
        result = metrics.ner_metrics(gold, predicted)
        # gold entities 3, predicted 4, correct 2.
        self.assertAllClose(result["precision"], 2 / 4)
        self.assertAllClose(result["recall"], 2 / 3)
        self.assertAllClose(result["f1"], 2 * (0.5 * 2 / 3) / (0.5 + 2 / 3))
        self.assertAllClose(result["accuracy"], 4 / 6)


class SquadMetricsTest(tf.test.TestCase):
    def test_normalization_as_official_script(self):
        self.assertEqual(metrics.normalize_answer("The  Eiffel-Tower!"), "eiffeltower")
        self.assertEqual(metrics.normalize_answer("An apple, a day"), "apple day")
        self.assertEqual(metrics.normalize_answer("theatre"), "theatre")  # "the" only as a word

    def test_f1_is_over_token_bags(self):
        # pred tokens: cat sat on mat; gold: cat on mat -> P=3/4, R=1.
        self.assertAllClose(metrics.squad_f1("the cat sat on the mat", "a cat on a mat"), 2 * 0.75 / 1.75)
        self.assertEqual(metrics.squad_f1("cat cat", "cat"), 2 * 0.5 * 1 / 1.5)
        self.assertEqual(metrics.squad_f1("", ""), 1.0)
        self.assertEqual(metrics.squad_f1("", "cat"), 0.0)
        self.assertEqual(metrics.squad_exact_match("Paris.", "paris"), 1.0)

    def _dataset(self):
        return [
            {
                "paragraphs": [
                    {
                        "context": "...",
                        "qas": [
                            {"id": "q1", "answers": [{"text": "Paris"}, {"text": "paris city"}]},
                            {"id": "q2", "answers": [], "is_impossible": True},
                            {"id": "q3", "answers": [{"text": "Denver Broncos"}]},
                        ],
                    }
                ]
            }
        ]

    def test_squad_v2_scores_and_breakdown(self):
        predictions = {"q1": "Paris", "q2": "", "q3": "Broncos"}
        result = metrics.squad_scores(self._dataset(), predictions)
        # q3: P=1, R=1/2 -> F1 2/3.
        self.assertAllClose(result["exact_match"], 200 / 3)
        self.assertAllClose(result["f1"], 100 * (1 + 1 + 2 / 3) / 3)
        self.assertAllClose(result["HasAns_exact"], 50.0)
        self.assertAllClose(result["HasAns_f1"], 100 * (1 + 2 / 3) / 2)
        self.assertAllClose(result["NoAns_f1"], 100.0)
        self.assertEqual(result["total"], 3)

    def test_missing_prediction_scores_zero(self):
        result = metrics.squad_scores(self._dataset(), {"q1": "paris"})
        self.assertAllClose(result["exact_match"], 100 / 3)

    def test_best_null_threshold(self):
        predictions = {"q1": "Paris", "q2": "", "q3": "Broncos"}
        null_odds = {"q1": -5.0, "q2": 2.0, "q3": -1.0}
        result = metrics.squad_scores(self._dataset(), predictions, null_odds)
        # Abstaining everywhere scores 1 (q2); answering q1 adds 1 (thresh -5), q3 adds 2/3
        # F1 (thresh -1) but 0 exact; answering q2 changes nothing ("" predicted).
        self.assertAllClose(result["best_f1"], 100 * (2 + 2 / 3) / 3)
        self.assertEqual(result["best_f1_thresh"], -1.0)
        self.assertAllClose(result["best_exact"], 200 / 3)
        self.assertEqual(result["best_exact_thresh"], -5.0)


if __name__ == "__main__":
    tf.test.main()
