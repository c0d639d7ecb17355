"""Metrics against values computed by hand and against transcriptions of the official scripts."""

import collections
import math
import random
import re
import string
import warnings

import tensorflow as tf

from bert_tf.tasks import metrics
from bert_tf.tasks.span import metrics as squad_metrics
from bert_tf.tasks.token.metrics import ner_metrics


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
        result = ner_metrics(gold, predicted)
        # gold entities 3, predicted 4, correct 2.
        self.assertAllClose(result["precision"], 2 / 4)
        self.assertAllClose(result["recall"], 2 / 3)
        self.assertAllClose(result["f1"], 2 * (0.5 * 2 / 3) / (0.5 + 2 / 3))
        self.assertAllClose(result["accuracy"], 4 / 6)


class SquadMetricsTest(tf.test.TestCase):
    def test_normalization_as_official_script(self):
        self.assertEqual(squad_metrics.normalize_answer("The  Eiffel-Tower!"), "eiffeltower")
        self.assertEqual(squad_metrics.normalize_answer("An apple, a day"), "apple day")
        self.assertEqual(squad_metrics.normalize_answer("theatre"), "theatre")  # "the" only as a word

    def test_f1_is_over_token_bags(self):
        # pred tokens: cat sat on mat; gold: cat on mat -> P=3/4, R=1.
        self.assertAllClose(
            squad_metrics.squad_f1("the cat sat on the mat", "a cat on a mat"), 2 * 0.75 / 1.75
        )
        self.assertEqual(squad_metrics.squad_f1("cat cat", "cat"), 2 * 0.5 * 1 / 1.5)
        self.assertEqual(squad_metrics.squad_f1("", ""), 1.0)
        self.assertEqual(squad_metrics.squad_f1("", "cat"), 0.0)
        self.assertEqual(squad_metrics.squad_exact_match("Paris.", "paris"), 1.0)

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
        result = squad_metrics.squad_scores(self._dataset(), predictions)
        # q3: P=1, R=1/2 -> F1 2/3.
        self.assertAllClose(result["exact_match"], 200 / 3)
        self.assertAllClose(result["f1"], 100 * (1 + 1 + 2 / 3) / 3)
        self.assertAllClose(result["HasAns_exact"], 50.0)
        self.assertAllClose(result["HasAns_f1"], 100 * (1 + 2 / 3) / 2)
        self.assertAllClose(result["NoAns_f1"], 100.0)
        self.assertEqual(result["total"], 3)

    def test_missing_prediction_scores_zero(self):
        result = squad_metrics.squad_scores(self._dataset(), {"q1": "paris"})
        self.assertAllClose(result["exact_match"], 100 / 3)
        # Also in the threshold search: the unpredicted q2 is not counted right.
        result = squad_metrics.squad_scores(self._dataset(), {"q1": "paris"}, {"q1": -1.0})
        self.assertAllClose((result["best_exact"], result["best_exact_thresh"]), (100 / 3, -1.0))

    def test_best_null_threshold(self):
        predictions = {"q1": "Paris", "q2": "", "q3": "Broncos"}
        null_odds = {"q1": -5.0, "q2": 2.0, "q3": -1.0}
        result = squad_metrics.squad_scores(self._dataset(), predictions, null_odds)
        # Abstaining everywhere scores 1 (q2); answering q1 adds 1 (thresh -5), q3 adds 2/3
        # F1 (thresh -1) but 0 exact; answering q2 changes nothing ("" predicted).
        self.assertAllClose(result["best_f1"], 100 * (2 + 2 / 3) / 3)
        self.assertEqual(result["best_f1_thresh"], -1.0)
        self.assertAllClose(result["best_exact"], 200 / 3)
        self.assertEqual(result["best_exact_thresh"], -5.0)


# --- Independent transcriptions of the official scripts' rules, written for these tests ----


def _official_normalize(text):
    # lower case → strip ASCII punctuation → articles become spaces → single spaces
    text = text.lower().translate(str.maketrans("", "", string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _bag_f1(prediction_tokens, gold_tokens):
    shared = sum((collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)).values())
    if shared == 0:
        return 0
    precision, recall = shared / len(prediction_tokens), shared / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _all_questions(dataset):
    return [qa for article in dataset for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def _official_v1(dataset, predictions):
    """SQuAD v1.1 evaluate(): every question counts; the best over all answer texts."""
    exact = f1 = total = 0
    for qa in _all_questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue  # "will receive score 0"
        prediction = _official_normalize(predictions[qa["id"]])
        truths = [_official_normalize(answer["text"]) for answer in qa["answers"]]
        exact += max(prediction == truth for truth in truths)
        f1 += max(_bag_f1(prediction.split(), truth.split()) for truth in truths)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def _v2_f1(gold, prediction):
    # Two empty answers agree (F1 1); one empty answer scores 0.
    gold_tokens = _official_normalize(gold).split()
    prediction_tokens = _official_normalize(prediction).split()
    if not gold_tokens or not prediction_tokens:
        return int(gold_tokens == prediction_tokens)
    return _bag_f1(prediction_tokens, gold_tokens)


def _official_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """SQuAD v2.0 main(): answerability from the raw answers list, scores per question
    id, optional no-answer threshold, and the best-threshold search over na_probs."""
    answerable = {qa["id"]: bool(qa["answers"]) for qa in _all_questions(dataset)}
    exact, f1 = {}, {}
    for qa in _all_questions(dataset):
        golds = [answer["text"] for answer in qa["answers"] if _official_normalize(answer["text"])]
        golds = golds or [""]
        if qa["id"] not in predictions:
            continue
        prediction = predictions[qa["id"]]
        exact[qa["id"]] = max(int(_official_normalize(g) == _official_normalize(prediction)) for g in golds)
        f1[qa["id"]] = max(_v2_f1(g, prediction) for g in golds)

    odds = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}

    def thresholded(scores):
        return {q: (float(not answerable[q]) if odds[q] > na_prob_thresh else s) for q, s in scores.items()}

    exact_t, f1_t = thresholded(exact), thresholded(f1)

    def summary(qids):
        return (
            100.0 * sum(exact_t[q] for q in qids) / len(qids),
            100.0 * sum(f1_t[q] for q in qids) / len(qids),
            len(qids),
        )

    out = dict(zip(("exact_match", "f1", "total"), summary(list(exact_t)), strict=True))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q, has in answerable.items() if has == wanted]
        if qids:
            out.update(
                zip((f"{prefix}_exact", f"{prefix}_f1", f"{prefix}_total"), summary(qids), strict=True)
            )
    if na_probs is not None:
        for name, scores in (("exact", exact), ("f1", f1)):
            running = best = sum(1 for has in answerable.values() if not has)
            best_thresh = 0.0
            for qid in sorted(na_probs, key=lambda q: na_probs[q]):
                if qid not in scores:
                    continue
                if answerable[qid]:
                    running += scores[qid]
                elif predictions[qid]:
                    running -= 1
                if running > best:
                    best, best_thresh = running, na_probs[qid]
            out[f"best_{name}"] = 100.0 * best / len(scores)
            out[f"best_{name}_thresh"] = best_thresh
    return out


# Words of random answers: plain words in two cases, articles, punctuation-only tokens,
# and tokens that are partly punctuation; "a", "The", "--", "!?" normalise to nothing.
_WORDS = ["cat", "Cat", "dog", "Paris", "river", "blue", "42", "x-ray", "U.S.", "o'clock", "théâtre"]
_EMPTY_WORDS = ["a", "an", "The", "the", "--", "!?", ".", "A,"]


def _random_text(rng, empty=False):
    pool = _EMPTY_WORDS if empty else _WORDS + _EMPTY_WORDS
    return " ".join(rng.choice(pool) for _ in range(rng.randint(1, 4)))


def _random_squad(rng, num_questions, version_2):
    """A SQuAD `data` list with predictions: several golds, golds that all normalise to
    empty, unanswerable questions (2.0), empty and copied predictions."""
    qas, predictions = [], {}
    for index in range(num_questions):
        kind = rng.random()
        if version_2 and kind < 0.25:
            texts = []
        elif kind < 0.4:
            texts = [_random_text(rng, empty=True) for _ in range(rng.randint(1, 3))]
        else:
            texts = [_random_text(rng, empty=rng.random() < 0.2) for _ in range(rng.randint(1, 4))]
        qa = {"id": f"q{index}", "question": "?", "answers": [{"text": t, "answer_start": 0} for t in texts]}
        if version_2:
            qa["is_impossible"] = not texts
        qas.append(qa)
        choice = rng.random()
        if choice < 0.25:
            predictions[qa["id"]] = ""
        elif choice < 0.35:
            predictions[qa["id"]] = _random_text(rng, empty=True)
        elif choice < 0.65 and texts:
            predictions[qa["id"]] = rng.choice(texts) + rng.choice(["", " cat", "."])
        else:
            predictions[qa["id"]] = _random_text(rng)
    # Several paragraphs and articles, as real files have.
    paragraphs = [{"context": "...", "qas": qas[i : i + 7]} for i in range(0, len(qas), 7)]
    dataset = [{"title": str(i), "paragraphs": paragraphs[i : i + 5]} for i in range(0, len(paragraphs), 5)]
    return dataset, predictions


class SquadOfficialScriptTest(tf.test.TestCase):
    """squad_scores against the transcriptions above on thousands of random questions."""

    def _assert_same_figures(self, expected, actual):
        self.assertEqual(sorted(expected), sorted(actual))
        for name in expected:
            self.assertEqual(expected[name], actual[name], name)

    def test_v2_every_figure_as_the_official_script(self):
        rng = random.Random(7)
        dataset, predictions = _random_squad(rng, 3000, version_2=True)
        qas = _all_questions(dataset)
        all_empty = [
            qa
            for qa in qas
            if qa["answers"] and not any(_official_normalize(a["text"]) for a in qa["answers"])
        ]
        # The random data holds the cases the rules are about.
        self.assertGreater(len(all_empty), 200)
        self.assertGreater(sum(len(qa["answers"]) > 1 for qa in qas), 500)
        self.assertGreater(sum(not qa["answers"] for qa in qas), 500)
        self.assertGreater(sum(prediction == "" for prediction in predictions.values()), 500)

        self._assert_same_figures(
            _official_v2(dataset, predictions), squad_metrics.squad_scores(dataset, predictions)
        )

        # Random null odds, on a coarse grid so that many tie, in a shuffled order (ties
        # are visited in the dict's order), with ids the dataset does not have.
        ids = list(predictions) + ["not-a-question-1", "not-a-question-2"]
        rng.shuffle(ids)
        null_odds = {qid: rng.randint(-12, 12) / 4 for qid in ids}
        for threshold in (1.0, -0.5, math.inf):
            expected = _official_v2(dataset, predictions, null_odds, threshold)
            actual = squad_metrics.squad_scores(
                dataset, predictions, null_odds, null_odds_threshold=threshold
            )
            self._assert_same_figures(expected, actual)
        # The search moved away from abstaining everywhere.
        abstain_everywhere = 100.0 * actual["NoAns_total"] / actual["total"]
        self.assertGreater(actual["best_f1"], abstain_everywhere)
        self.assertGreater(actual["best_exact"], abstain_everywhere)

    def test_v1_every_figure_as_the_official_script(self):
        rng = random.Random(11)
        dataset, predictions = _random_squad(rng, 3000, version_2=False)
        for qid in rng.sample(sorted(predictions), 100):  # unanswered questions score 0
            del predictions[qid]
        self.assertFalse(squad_metrics.is_squad_v2(dataset))
        expected = _official_v1(dataset, predictions)
        actual = squad_metrics.squad_scores(dataset, predictions)
        self.assertEqual(actual.pop("total"), 3000)
        self._assert_same_figures(expected, actual)

    def test_answers_that_normalise_to_empty_are_answerable(self):
        # The v2.0 script reads answerability from the raw answers: "the"/"--" make an
        # answerable question whose only matching prediction is an empty one.
        dataset = [
            {
                "paragraphs": [
                    {
                        "qas": [
                            {
                                "id": "q1",
                                "answers": [{"text": "the"}, {"text": "--"}],
                                "is_impossible": False,
                            },
                            {"id": "q2", "answers": [], "is_impossible": True},
                        ]
                    }
                ]
            }
        ]
        result = squad_metrics.squad_scores(dataset, {"q1": "", "q2": "cat"})
        self.assertEqual((result["HasAns_total"], result["NoAns_total"]), (1, 1))
        self.assertEqual((result["HasAns_exact"], result["HasAns_f1"]), (100.0, 100.0))
        self.assertEqual((result["NoAns_exact"], result["exact_match"]), (0.0, 50.0))
        self.assertEqual(squad_metrics.squad_scores(dataset, {"q1": "The", "q2": ""})["HasAns_exact"], 100.0)
        self.assertEqual(squad_metrics.squad_scores(dataset, {"q1": "the cat", "q2": ""})["HasAns_f1"], 0.0)

    def test_v1_scores_two_empty_answers_f1_zero(self):
        # v1.1 keeps golds that normalise to empty: EM matches them, F1 (no shared token) not.
        dataset = [{"paragraphs": [{"qas": [{"id": "q1", "answers": [{"text": "The"}]}]}]}]
        result = squad_metrics.squad_scores(dataset, {"q1": "a"})
        self.assertEqual((result["exact_match"], result["f1"]), (100.0, 0.0))
        self.assertEqual(
            squad_metrics.squad_scores(dataset, {"q1": "a"}, version_2_with_negative=True)["f1"], 100.0
        )

    def test_bad_inputs_are_named(self):
        dataset = [{"paragraphs": [{"qas": [{"id": "q1", "answers": [{"text": "x"}]}]}]}]
        with self.assertRaisesRegex(ValueError, "version_2_with_negative"):
            squad_metrics.squad_scores(dataset, {"q1": "x"}, {"q1": 0.0}, version_2_with_negative=False)
        with self.assertRaisesRegex(ValueError, "'q1'"):
            squad_metrics.squad_scores(dataset, {"q1": "x"}, {"q2": 0.0})
        with self.assertRaisesRegex(ValueError, "'q2'.*no gold answer"):
            squad_metrics.squad_scores(
                [{"paragraphs": [{"qas": [{"id": "q2", "answers": []}]}]}], {}, version_2_with_negative=False
            )


def _conlleval(gold_sentences, predicted_sentences):
    """CoNLL-2003 conlleval's counts (its 2004 version), streamed over tokens as the Perl
    script reads them.

    A tag splits at its first "-" into a chunk tag and a type; a blank line between
    sentences reads as tag O. A chunk is found where a start rule fires, and counted
    correct when gold and prediction start together with one type and end together.
    The script knows the tags B, I, E and O (IOB1, IOB2, IOE1, IOE2), not S.
    """
    end_pairs = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}
    start_pairs = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}

    def ends(prev, tag, prev_type, type_):
        return (prev, tag) in end_pairs or (prev not in ("O", ".") and prev_type != type_)

    def starts(prev, tag, prev_type, type_):
        return (prev, tag) in start_pairs or (tag not in ("O", ".") and prev_type != type_)

    lines = []
    for gold, predicted in zip(gold_sentences, predicted_sentences, strict=True):
        lines += [(g, p, True) for g, p in zip(gold, predicted, strict=True)] + [
            ("O", "O", False)
        ]  # blank line
    found_gold = found_predicted = correct = correct_tags = tokens = 0
    in_correct = False
    last_gold, last_gold_type, last_predicted, last_predicted_type = "O", "", "O", ""
    for gold_label, predicted_label, is_token in lines:
        gold, _, gold_type = gold_label.partition("-")
        predicted, _, predicted_type = predicted_label.partition("-")
        gold_ends = ends(last_gold, gold, last_gold_type, gold_type)
        predicted_ends = ends(last_predicted, predicted, last_predicted_type, predicted_type)
        if in_correct:
            if gold_ends and predicted_ends and last_gold_type == last_predicted_type:
                in_correct = False
                correct += 1
            elif gold_ends != predicted_ends or gold_type != predicted_type:
                in_correct = False
        gold_starts = starts(last_gold, gold, last_gold_type, gold_type)
        predicted_starts = starts(last_predicted, predicted, last_predicted_type, predicted_type)
        if gold_starts and predicted_starts and gold_type == predicted_type:
            in_correct = True
        found_gold += gold_starts
        found_predicted += predicted_starts
        if is_token:
            correct_tags += gold_label == predicted_label
            tokens += 1
        last_gold, last_gold_type, last_predicted, last_predicted_type = (
            gold,
            gold_type,
            predicted,
            predicted_type,
        )
    correct += in_correct
    precision = correct / found_predicted if found_predicted else 0.0
    recall = correct / found_gold if found_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "accuracy": correct_tags / tokens}


def _ranks(values):
    # 1-based ranks, tied values sharing their mean rank.
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        stop = start
        while stop + 1 < len(order) and values[order[stop + 1]] == values[order[start]]:
            stop += 1
        for position in range(start, stop + 1):
            ranks[order[position]] = (start + stop) / 2 + 1
        start = stop + 1
    return ranks


def _pearson(x, y):
    mean_x, mean_y = sum(x) / len(x), sum(y) / len(y)
    covariance = sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y, strict=True))
    return covariance / math.sqrt(sum((a - mean_x) ** 2 for a in x) * sum((b - mean_y) ** 2 for b in y))


class GlueAgainstDefinitionsTest(tf.test.TestCase):
    """The GLUE figures against their definitions from counts, on random labels."""

    def test_binary_f1_and_matthews_from_counts(self):
        rng = random.Random(3)
        for trial in range(30):
            size = rng.randint(1, 60)
            bias = rng.random()
            labels = [int(rng.random() < bias) for _ in range(size)]
            # Include degenerate predictions: all 0 (no positive), all 1.
            predictions = (
                [0] * size
                if trial == 0
                else [1] * size
                if trial == 1
                else [rng.randint(0, 1) for _ in range(size)]
            )
            pairs = list(zip(labels, predictions, strict=True))
            tp, tn = pairs.count((1, 1)), pairs.count((0, 0))
            fp, fn = pairs.count((0, 1)), pairs.count((1, 0))
            f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
            denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
            mcc = (tp * tn - fp * fn) / denominator if denominator else 0.0
            result = metrics.classification_metrics(labels, predictions, metrics.CLASSIFICATION_METRICS)
            self.assertAllClose(
                result,
                {"accuracy": (tp + tn) / size, "f1": f1, "matthews_corrcoef": mcc},
                rtol=1e-12,
                atol=1e-12,
            )

    def test_pearson_and_spearman_with_ties(self):
        rng = random.Random(5)
        for _ in range(20):
            # STS-B-like gold scores on a 0.2 grid (many ties), noisy predictions.
            labels = [rng.randint(0, 25) / 5 for _ in range(50)]
            predictions = [round(label + rng.gauss(0, 1), 1) for label in labels]
            result = metrics.regression_metrics(labels, predictions)
            self.assertAllClose(result["pearson"], _pearson(labels, predictions), rtol=1e-10)
            self.assertAllClose(result["spearman"], _pearson(_ranks(labels), _ranks(predictions)), rtol=1e-10)


class NerAgainstConllevalTest(tf.test.TestCase):
    def _random_tagging(self, rng, tag_letters):
        # Random tags: entities starting with I- (IOB1) or E-, type changes inside
        # entities, B- right after an entity of the same type, empty sentences;
        # predictions are noisy copies so that many entities match.
        tags = ["O", "O", "O"] + [f"{tag}-{type_}" for tag in tag_letters for type_ in ("PER", "LOC", "MISC")]
        gold, predicted = [], []
        for _ in range(400):
            sentence = [rng.choice(tags) for _ in range(rng.randint(0, 12))]
            gold.append(sentence)
            predicted.append([tag if rng.random() < 0.7 else rng.choice(tags) for tag in sentence])
        return gold, predicted

    def test_seqeval_default_mode_is_conlleval_on_iob_tags(self):
        gold, predicted = self._random_tagging(random.Random(13), "BI")
        self.assertAllClose(ner_metrics(gold, predicted), _conlleval(gold, predicted), rtol=1e-12, atol=0)

    def test_seqeval_default_mode_is_conlleval_on_ioe_tags(self):
        gold, predicted = self._random_tagging(random.Random(17), "IE")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # seqeval warns about tags it does not expect
            result = ner_metrics(gold, predicted)
        self.assertAllClose(result, _conlleval(gold, predicted), rtol=1e-12, atol=0)

    def test_iobes_tags_are_read_as_iobes(self):
        # conlleval has no S- and merges "E-PER B-PER" into one chunk; as documented, an
        # E-/S- tag ends an entity here and B-/S- always start one.
        gold = [["E-PER", "B-PER", "E-PER", "S-LOC", "S-LOC", "O"]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = ner_metrics(gold, [["S-PER", "B-PER", "E-PER", "S-LOC", "B-LOC", "O"]])
        # Four entities on both sides, PER(0) PER(1-2) LOC(3) LOC(4), where conlleval would
        # read two, PER(0-2) and LOC(3-4).
        self.assertAllClose((result["precision"], result["recall"]), (1.0, 1.0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = ner_metrics(gold, [["S-PER", "I-PER", "E-PER", "S-LOC", "O", "O"]])
        # predicted PER(0), PER(1-2), LOC(3): three right of three, three of four found.
        self.assertAllClose((result["precision"], result["recall"]), (1.0, 3 / 4))

    def test_chunk_rules_by_hand(self):
        # I-PER after O starts an entity; I-LOC after B-PER ends PER and starts LOC.
        gold = [["I-PER", "I-PER", "O", "B-PER", "I-LOC"]]
        result = ner_metrics(gold, [["B-PER", "I-PER", "O", "B-PER", "B-LOC"]])
        # gold PER(0-1), PER(3), LOC(4); predicted the same three: all correct.
        self.assertAllClose((result["precision"], result["recall"]), (1.0, 1.0))
        self.assertAllClose(result["accuracy"], 3 / 5)

    def test_misaligned_sentences_are_named(self):
        with self.assertRaisesRegex(ValueError, "sentence 1 has 2 gold tags but 1 predicted"):
            ner_metrics([["O"], ["O", "B-PER"]], [["O"], ["O"]])


if __name__ == "__main__":
    tf.test.main()
