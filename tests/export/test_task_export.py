"""Task SavedModels from bert_tf.finetune model directories, run without bert_tf.

References are the fine-tuning code's own feature conversion and post-processing
(bert_tf.tasks) with `model.predict`, so the in-graph tokenizing, packing, span search
and entity grouping are checked against an independent implementation.
"""

import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import CheckpointError, from_pretrained
from bert_tf.models import BertEncoder
from bert_tf.preprocessing.spans import doc_windows, is_max_context
from bert_tf.serving.exporter import export_saved_model
from bert_tf.serving.saving import ExportError
from bert_tf.serving.task import TaskServing
from bert_tf.tasks.choice import signatures as choice_signatures
from bert_tf.tasks.choice.model import BertMultipleChoice
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.finetuned import FinetunedModelInfo, save_finetuned
from bert_tf.tasks.preprocessor import TaskPreprocessor
from bert_tf.tasks.registry import make_family
from bert_tf.tasks.runner import FinetuneSettings
from bert_tf.tasks.span import signatures as span_signatures
from bert_tf.tasks.span import squad
from bert_tf.tasks.span.family import SpanFamily
from bert_tf.tasks.span.model import BertSpanLabeler
from bert_tf.tasks.span.postprocess import postprocess
from bert_tf.tasks.token.model import BertTokenClassifier
from bert_tf.tokenization import BertTokenizer
from tests.harness import reference as original_rules
from tests.harness.exports import CLASSIFIER_SEQ_LENGTH, VOCAB, export_config, fine_tuned_classifier, strings
from tests.harness.processes import run_in_fresh_process
from tests.harness.reference import original_features


def padded(rows, length, value=0):
    return np.asarray([row + [value] * (length - len(row)) for row in rows], dtype=np.int32)


def reference_windows(tokenizer, examples, seq_length, doc_stride, max_query_length):
    """SquadFeatures (and model inputs) of the original rules for unanswered examples."""
    features, inputs = [], {"input_ids": [], "input_mask": [], "segment_ids": []}
    for index, example in enumerate(examples):
        windows = original_rules.squad_features(
            tokenizer,
            example.question_text,
            example.context,
            None,
            None,
            seq_length,
            doc_stride,
            max_query_length,
        )
        for span_index, window in enumerate(windows):
            ids = window["input_ids"]
            features.append(
                squad.SquadFeature(
                    1000000000 + len(features),
                    index,
                    span_index,
                    [tokenizer.vocab[i] for i in ids],
                    window["token_to_orig"],
                    window["token_is_max_context"],
                    [],
                    [],
                    [],
                )
            )
            inputs["input_ids"].append(ids)
            inputs["input_mask"].append([1] * len(ids))
            inputs["segment_ids"].append(window["segment_ids"])
    return features, {name: padded(rows, seq_length) for name, rows in inputs.items()}


SEQ_LENGTH = CLASSIFIER_SEQ_LENGTH  # the shared classifier's; the other task models use it too
TEXTS = ["a good movie", "a bad film", "", "naïve café — 東京 😀 " * 10, "good good good"]
TEXTS_B = ["it was good", "", "bad", "short", "x " * 40]
NER_TEXTS = [
    "John Smith lives in Paris.",
    "",
    "Élodie Dupont met Anna at the river bank today",
    "one two three " * 8,
]
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
MAX_QUERY_LENGTH = 6
# Each word of these contexts (as the basic tokenizer splits them: "(1895)" is three) is one
# word piece; answers inside words, ties and the original's text rule on random logits are
# tested in tests/tasks/test_squad_answers.py.
_SQUAD_WORDS = ["the", "old", "house", "by", "river.", "John", "went", "to", "(1895)", "city,", "is", "in",
                "north", "Café", "naïve", "Zoë", "東京", "Paris", "sea"]  # fmt: skip
_rng = random.Random(7)
QUESTIONS = ["who went there", "where is it"] + [
    "which old house is by the river near the sea",  # longer than MAX_QUERY_LENGTH: cut
    "Zoë?",
    "in Paris",
    "where did John go",
    "when",
    "what is north of the city",
]
CONTEXTS = [
    "john went to the old house by the river",
    "the city is in the north of the country near the sea",
    *(" ".join(_rng.choice(_SQUAD_WORDS) for _ in range(n)) for n in (30, 45, 60, 25, 50, 40)),  # 3+ windows
]

# SWAG rows: the context (sent1) and the whole candidate continuations (sent2 + ending_i);
# never empty (read_swag refuses empty ones).
CHOICE_CONTEXTS = [
    "She opens the door.",
    "A man sits at the piano in an old hall by the river and looks at the keys for a while.",
    "Zoë pours the tea.",
    "Rain.",
]
CHOICE_ENDINGS = [
    ["She walks in.", "She flies away.", "She eats the door.", "She sleeps."],
    ["He plays a song.", "He jumps " + "very " * 12 + "high.", "He", "He swims in the sea."],  # trimmed
    ["Café au lait — 東京.", "She drinks it.", "It boils.", "\u200bNothing happens."],
    ["It is wet.", "It is dry.", "It stops.", "Snow falls."],
]


def python_entities(text, tags):
    """BIO tags of the words of `text` (split on whitespace and punctuation) -> entity dicts."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", text)]
    entities, current = [], None
    for (start, end), tag in zip(spans, tags, strict=True):
        prefix, _, kind = tag.partition("-")
        if tag == "O":
            current = None
            continue
        if prefix == "B" or current is None or current["label"] != kind:
            current = {"label": kind, "start": start, "end": end}
            entities.append(current)
        else:
            current["end"] = end
    for entity in entities:
        entity["text"] = text[entity["start"] : entity["end"]]
    return entities


def spread_out(model, head: str) -> None:
    """Kernels of unit-variance outputs, so that windows, positions and choices really compete.

    With the initial 0.02 kernels the [CLS] vector hardly depends on the text (every choice
    gets probability 0.250 +- 0.001) and the span logits are about 0.1.
    """
    rng = np.random.default_rng(5)
    for weight in model.encoder.weights:
        if weight.path.endswith("kernel"):
            weight.assign(rng.normal(size=weight.shape) / np.sqrt(weight.shape[0]))
    kernel = model.get_layer(head).kernel
    kernel.assign(rng.normal(size=kernel.shape))


def squad_reference(model, tokenizer, questions, contexts, doc_stride, **postprocess_args):
    """Answers, scores and character offsets by bert_tf.tasks: its windows, model.predict, its post-processing.

    n_best_size = SEQ_LENGTH (20, task.json's default that the export ranks with) makes every
    position a candidate. Also returns the number of windows and the SQuAD 2.0 null odds of
    each example.
    """
    dataset = [
        {"paragraphs": [{"context": context, "qas": [{"id": str(i), "question": question, "answers": []}]}]}
        for i, (question, context) in enumerate(zip(questions, contexts, strict=True))
    ]
    version_2 = postprocess_args.get("version_2_with_negative", False)
    examples, _ = squad.read_examples(dataset, False, version_2_with_negative=version_2)
    features, arrays = reference_windows(tokenizer, examples, SEQ_LENGTH, doc_stride, MAX_QUERY_LENGTH)
    outputs = model.predict(arrays, verbose=0)
    starts, ends = outputs["start_logits"], outputs["end_logits"]
    predictions, nbest, null_odds = postprocess(
        examples, features, starts, ends, n_best_size=SEQ_LENGTH, **postprocess_args
    )
    max_answer_length = postprocess_args.get("max_answer_length", 30)
    result = {name: [] for name in ("answer", "score", "answer_start", "answer_end", "windows", "null_odds")}
    for i, context in enumerate(contexts):
        answer = predictions[str(i)]
        best = next(entry for entry in nbest[str(i)] if entry["text"])  # the best span (not the null answer)
        # Where the best span is: the one (window, start, end) with its two logits.
        [(feature, start, end)] = [
            (feature, start, end)
            for index, feature in enumerate(features)
            if feature.example_index == i
            for start in feature.token_to_orig_map
            for end in feature.token_to_orig_map
            if feature.token_is_max_context[start]
            and 0 <= end - start < max_answer_length
            and starts[index][start] == np.float32(best["start_logit"])
            and ends[index][end] == np.float32(best["end_logit"])
        ]
        words = list(re.finditer(r"\S+", context))  # the doc tokens, with their character offsets
        first, last = words[feature.token_to_orig_map[start]], words[feature.token_to_orig_map[end]]
        answer_start = first.start() + context[first.start() : last.end()].find(answer) if answer else -1
        result["answer"].append(answer)
        result["score"].append(best["start_logit"] + best["end_logit"])
        result["answer_start"].append(answer_start)
        result["answer_end"].append(answer_start + len(answer) if answer else -1)
        result["windows"].append(sum(feature.example_index == i for feature in features))
        result["null_odds"].append(null_odds.get(str(i)))
    return result


class TaskExportTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        keras.utils.set_random_seed(3)
        cls.root = os.path.join(tempfile.gettempdir(), f"bert_tf_task_export_{os.getpid()}")
        shutil.rmtree(cls.root, ignore_errors=True)
        os.makedirs(cls.root)
        config_path = os.path.join(cls.root, "bert_config.json")
        export_config().to_json_file(config_path)
        cls.tokenizer = BertTokenizer(VOCAB, lower_case=True)

        # The classifier the export tests share, fine-tuned by the real runner.
        classifier = fine_tuned_classifier()
        cls.model_dirs = {"cls": classifier.model_dir}
        # Regression, NER and SQuAD models saved the way the runner saves them (untrained heads).
        for name, task, build in [
            ("reg", "regression", lambda encoder: BertClassifier(encoder, num_classes=1)),
            ("ner", "ner", lambda encoder: BertTokenClassifier(encoder, num_classes=len(NER_LABELS))),
            ("squad", "squad", BertSpanLabeler),
            ("swag", "swag", BertMultipleChoice),
        ]:
            settings = FinetuneSettings.of(
                task=task,
                output_dir=cls.root,
                max_seq_length=SEQ_LENGTH,
                options=dict(max_query_length=MAX_QUERY_LENGTH) if task == "squad" else {},
            )
            adapter = make_family(settings, cls.tokenizer)
            if task == "ner":
                adapter.label_list = NER_LABELS
            model = build(BertEncoder(export_config()))
            ids = np.ones((1, 2, SEQ_LENGTH) if task == "swag" else (1, SEQ_LENGTH), np.int32)
            model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})
            if task in ("squad", "swag"):
                spread_out(model, "span_dense" if task == "squad" else "scorer")
            model.preprocessor = TaskPreprocessor(adapter.task_info(), cls.tokenizer)
            cls.model_dirs[name] = save_finetuned(os.path.join(cls.root, name, "model"), model)
            if task == "squad":
                span_model = model
        # The same span model as a SQuAD 2.0 model with its own doc_stride and
        # max_answer_length, and a null threshold that half of the questions fall below.
        cls.squad_v2_settings = dict(doc_stride=5, max_answer_length=4, version_2_with_negative=True)
        odds = squad_reference(
            span_model,
            cls.tokenizer,
            QUESTIONS,
            CONTEXTS,
            doc_stride=5,
            max_answer_length=4,
            version_2_with_negative=True,
        )["null_odds"]
        cls.squad_v2_settings["null_score_diff_threshold"] = float(np.median(odds))
        settings = FinetuneSettings.of(
            task="squad_v2",
            output_dir=cls.root,
            max_seq_length=SEQ_LENGTH,
            options=dict(
                max_query_length=MAX_QUERY_LENGTH,
                doc_stride=5,
                max_answer_length=4,
                null_score_diff_threshold=cls.squad_v2_settings["null_score_diff_threshold"],
            ),
        )
        span_model.preprocessor = TaskPreprocessor(
            make_family(settings, cls.tokenizer).task_info(), cls.tokenizer
        )
        cls.model_dirs["squad_v2"] = save_finetuned(os.path.join(cls.root, "squad_v2", "model"), span_model)

        cls.exports = {
            name: export_saved_model("task", directory, os.path.join(cls.root, f"export_{name}"))
            for name, directory in cls.model_dirs.items()
            if name != "cls"
        }
        cls.exports["cls"] = classifier.float_export
        calls = [
            {
                "name": "cls",
                "export_dir": cls.exports["cls"],
                "endpoint": "signature:serving_default",
                "kwargs": {"text": strings(TEXTS)},
            },
            {
                "name": "cls_pair",
                "export_dir": cls.exports["cls"],
                "endpoint": "signature:serving_pair",
                "kwargs": {"text_a": strings(TEXTS), "text_b": strings(TEXTS_B)},
            },
            {
                "name": "reg",
                "export_dir": cls.exports["reg"],
                "endpoint": "signature:serving_default",
                "kwargs": {"text": strings(TEXTS)},
            },
            {
                "name": "ner",
                "export_dir": cls.exports["ner"],
                "endpoint": "signature:serving_default",
                "kwargs": {"text": strings(NER_TEXTS)},
            },
            *(
                {
                    "name": name,
                    "export_dir": cls.exports[name],
                    "endpoint": "signature:serving_default",
                    "kwargs": {"question": strings(QUESTIONS), "context": strings(CONTEXTS)},
                }
                for name in ("squad", "squad_v2")
            ),
            {
                "name": "swag",
                "export_dir": cls.exports["swag"],
                "endpoint": "signature:serving_default",
                "kwargs": {"context": strings(CHOICE_CONTEXTS), "endings": strings(CHOICE_ENDINGS)},
            },
        ]
        # Each text served alone too: its batch is padded to its own length, not the longest text's.
        alone = {
            "cls": {"text": TEXTS},
            "cls_pair": {"text_a": TEXTS, "text_b": TEXTS_B},
            "reg": {"text": TEXTS},
            "ner": {"text": NER_TEXTS},
            "swag": {"context": CHOICE_CONTEXTS, "endings": CHOICE_ENDINGS},
        }
        calls += [
            {
                **next(call for call in calls if call["name"] == name),
                "name": f"{name}_alone_{row}",
                "kwargs": {key: strings(values[row : row + 1]) for key, values in inputs.items()},
            }
            for name, inputs in alone.items()
            for row in range(len(next(iter(inputs.values()))))
        ]
        cls.loaded = run_in_fresh_process(calls, cls.root)
        cls.models = {
            name: keras.saving.load_model(os.path.join(directory, "model.keras"), compile=False)
            for name, directory in cls.model_dirs.items()
        }

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def classification_inputs(self, texts_b=None):
        # The original run_classifier.py rules (bert_tf.tasks refuses the empty text we also test).
        ids_a = self.tokenizer.tokenize(tf.constant(TEXTS)).to_list()
        ids_b = self.tokenizer.tokenize(tf.constant(texts_b)).to_list() if texts_b else [None] * len(TEXTS)
        rows = [original_features(a, b, SEQ_LENGTH) for a, b in zip(ids_a, ids_b, strict=True)]
        return {
            name: np.array([r[i] for r in rows], np.int32)
            for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))
        }

    def test_loading_process_never_imported_bert_tf(self):
        self.assertEqual(self.loaded["__bert_tf_modules__"].tolist(), [])

    def test_fine_tuned_classifier_matches_model_predict(self):
        for prefix, texts_b in (("cls", None), ("cls_pair", TEXTS_B)):
            logits = self.models["cls"].predict(self.classification_inputs(texts_b), verbose=0)
            probabilities = tf.nn.softmax(logits).numpy()
            self.assertLessEqual(np.abs(self.loaded[f"{prefix}/probabilities"] - probabilities).max(), 1e-5)
            self.assertAllEqual(self.loaded[f"{prefix}/label_id"], probabilities.argmax(axis=-1))
            names = np.array(["neg", "pos"])
            self.assertAllEqual(
                self.loaded[f"{prefix}/label"].astype(str), names[probabilities.argmax(axis=-1)]
            )
            self.assertAllEqual(
                self.loaded[f"{prefix}/label_names"].astype(str), np.tile(names, (len(TEXTS), 1))
            )

    def test_outputs_do_not_depend_on_the_batch(self):
        # A batch is padded to its longest row (this batch: SEQ_LENGTH) and, for the
        # classifiers, its short texts share rows; a text alone is padded to its own
        # length. The outputs agree.
        compared = 0
        for name in ("cls", "cls_pair", "reg", "ner", "swag"):
            for key, batch in self.loaded.items():
                if not key.startswith(f"{name}/"):
                    continue
                output = key.split("/", 1)[1]
                for row in range(len(batch)):
                    alone = self.loaded[f"{name}_alone_{row}/{output}"][0]
                    want = batch[row]
                    if alone.ndim:  # entities: the batch's rows are padded to its most entities
                        want = want[: len(alone)]
                    if batch.dtype.kind == "f":
                        self.assertAllClose(alone, want, atol=1e-5, rtol=0, msg=f"{key} row {row}")
                    else:
                        self.assertAllEqual(alone, want, msg=f"{key} row {row}")
                    compared += 1
        self.assertGreater(compared, 50)
        # The short texts alone were padded to their own length, less than SEQ_LENGTH.
        self.assertLess(len(self.tokenizer.tokenize(["a good movie"]).to_list()[0]) + 2, 8)

    def test_regression_score_matches_model_predict(self):
        scores = self.models["reg"].predict(self.classification_inputs(), verbose=0)[:, 0]
        self.assertLessEqual(np.abs(self.loaded["reg/score"] - scores).max(), 1e-5)

    def test_ner_entities_have_character_offsets(self):
        rows, positions = [], []
        for text in NER_TEXTS:
            words = [m.group() for m in re.finditer(r"\w+|[^\w\s]", text)]
            ids, _, first, _ = original_rules.tagger_features(
                self.tokenizer, words, None, NER_LABELS, SEQ_LENGTH
            )
            rows.append(ids)
            positions.append(first)
        x = {
            "input_ids": padded(rows, SEQ_LENGTH),
            "input_mask": padded([[1] * len(ids) for ids in rows], SEQ_LENGTH),
            "segment_ids": np.zeros([len(rows), SEQ_LENGTH], np.int32),
        }
        best = self.models["ner"].predict(x, verbose=0).argmax(axis=-1)
        tags = [
            [NER_LABELS[best[row, p]] if p >= 0 else "O" for p in first]
            for row, first in enumerate(positions)
        ]
        total = 0
        for row, text in enumerate(NER_TEXTS):
            entities = python_entities(text, tags[row])
            count = int(self.loaded["ner/num_entities"][row])
            self.assertEqual(count, len(entities), msg=text)
            total += count
            for slot, entity in enumerate(entities):
                got = {
                    "text": self.loaded["ner/entity_text"][row, slot].decode(),
                    "label": self.loaded["ner/entity_label"][row, slot].decode(),
                    "start": int(self.loaded["ner/entity_start"][row, slot]),
                    "end": int(self.loaded["ner/entity_end"][row, slot]),
                }
                self.assertEqual(got, entity)
                self.assertEqual(text[got["start"] : got["end"]], got["text"])
        self.assertGreater(total, 0)  # the random head does tag some words

    def test_words_and_pieces_follow_the_original_tokenizer(self):
        # Control, format and odd space characters, where tensorflow-text's BasicTokenizer
        # (used before) splits differently from the original: the export's pieces must be
        # the fine-tuning tokenizer's.
        texts = ["a\u200bb c", "x\x1by", "soft\u00adhyphen", "nul\x00l", "rep\ufffdlace", "v\x0bt",
                 "n\x85l", "x\u2028y", "a\u3000b", "\u00a0Zoë", "東京タワー!", "", "Naïve, CAFÉ\t(1895)"]  # fmt: skip
        # The words a served tagger reads (with their byte offsets), each in its word pieces.
        words, begin, end = self.tokenizer.split_words_with_offsets(tf.constant(texts))
        pieces = tf.cast(self.tokenizer.tokenize(words.flat_values), tf.int64)
        pieces = words.with_flat_values(pieces.merge_dims(1, -1) if pieces.ragged_rank > 1 else pieces)
        self.assertEqual(pieces.merge_dims(1, 2).to_list(), self.tokenizer.tokenize(texts).to_list())
        for text, starts, ends, word_pieces in zip(
            texts, begin.to_list(), end.to_list(), pieces.to_list(), strict=True
        ):
            spans = [text.encode()[b:e] for b, e in zip(starts, ends, strict=True)]
            self.assertEqual(
                [piece for span in spans for piece in self.tokenizer.tokenize([span]).to_list()[0]],
                [piece for word in word_pieces for piece in word],
                ascii(text),
            )

    def assert_answers_equal(self, got, want):
        self.assertEqual([answer.decode() for answer in got["answer"]], want["answer"])
        for name in ("answer_start", "answer_end"):
            self.assertEqual(np.asarray(got[name]).tolist(), want[name], name)
        self.assertLessEqual(np.abs(np.asarray(got["score"]) - np.asarray(want["score"])).max(), 1e-5)

    def test_squad_reads_every_window_like_the_fine_tuning_code(self):
        for name, settings in [
            ("squad", {"doc_stride": 128}),  # FinetuneSettings' default, saved in task.json
            ("squad_v2", self.squad_v2_settings),
        ]:
            want = squad_reference(self.models["squad"], self.tokenizer, QUESTIONS, CONTEXTS, **settings)
            self.assertGreaterEqual(min(want["windows"][2:]), 3)  # the long contexts have 3 or more windows
            got = {
                key: self.loaded[f"{name}/{key}"] for key in ("answer", "score", "answer_start", "answer_end")
            }
            self.assert_answers_equal(got, want)
            for row, context in enumerate(CONTEXTS):
                start, end = got["answer_start"][row], got["answer_end"][row]
                if start >= 0:
                    self.assertEqual(context[start:end], got["answer"][row].decode())
        # The saved threshold decides: some questions get the null answer, some a span.
        answers = [answer.decode() for answer in self.loaded["squad_v2/answer"]]
        self.assertIn("", answers)
        self.assertNotEqual(set(answers), {""})
        # Later windows do win: some answers lie beyond what a first window can hold (14 pieces).
        beyond = [
            len(CONTEXTS[row][:start].split()) > SEQ_LENGTH - 6
            for row, start in enumerate(self.loaded["squad/answer_start"])
            if start >= 0
        ]
        self.assertTrue(any(beyond))

    def test_squad_v2_answers_empty_when_the_null_score_wins(self):
        # task.json written before doc_stride and max_answer_length were saved: 128 and 30.
        info = FinetunedModelInfo.from_json(
            {
                "task": "squad_v2",
                "kind": "span",
                "label_list": None,
                "lower_case": True,
                "max_seq_length": SEQ_LENGTH,
                "max_query_length": MAX_QUERY_LENGTH,
                "version_2_with_negative": True,
            }
        )
        for threshold in (-1e6, 1e6):  # the null answer always / never wins
            serving = TaskServing(
                self.models["squad"],
                self.tokenizer,
                info.replace(null_score_diff_threshold=threshold),
                SEQ_LENGTH,
            )
            got = span_signatures.answer(
                serving,
                SpanFamily.squad_settings(serving.info),
                tf.constant(QUESTIONS),
                tf.constant(CONTEXTS),
            )
            want = squad_reference(
                self.models["squad"],
                self.tokenizer,
                QUESTIONS,
                CONTEXTS,
                doc_stride=128,
                version_2_with_negative=True,
                null_score_diff_threshold=threshold,
            )
            self.assert_answers_equal({key: value.numpy() for key, value in got.items()}, want)
            if threshold < 0:
                self.assertEqual(got["answer_start"].numpy().tolist(), [-1] * len(QUESTIONS))

    def test_squad_empty_context_has_no_answer(self):
        info = FinetunedModelInfo(
            "squad", "span", None, True, SEQ_LENGTH, {"max_query_length": MAX_QUERY_LENGTH}
        )
        serving = TaskServing(self.models["squad"], self.tokenizer, info, SEQ_LENGTH)
        got = span_signatures.answer(
            serving,
            SpanFamily.squad_settings(info),
            tf.constant(["who", "who"]),
            tf.constant(["", CONTEXTS[0]]),
        )
        self.assertEqual(got["answer"].numpy()[0], b"")
        self.assertEqual((int(got["answer_start"][0]), int(got["answer_end"][0])), (-1, -1))
        self.assertEqual(float(got["score"][0]), 0.0)
        self.assertNotEqual(got["answer"].numpy()[1], b"")  # its neighbour in the batch is answered

    def test_squad_seq_length_too_short_for_the_question_is_refused(self):
        target = os.path.join(self.root, "too_short")
        with self.assertRaisesRegex(
            ExportError, "no room for the context.*max_query_length=6.*--max_seq_length=10"
        ):
            export_saved_model("task", self.model_dirs["squad"], target, seq_length=9)
        self.assertFalse(os.path.exists(target))

    def test_multiple_choice_matches_model_predict_on_the_fine_tuning_features(self):
        rows, segments, truncated = [], [], 0
        for context, endings in zip(CHOICE_CONTEXTS, CHOICE_ENDINGS, strict=True):
            for ending in endings:
                ids, segment_ids, cut = original_rules.classifier_features(
                    self.tokenizer, context, ending, SEQ_LENGTH
                )
                rows.append(ids)
                segments.append(segment_ids)
                truncated += cut
        self.assertGreater(truncated, 0)  # trimming is part of what is compared
        shape = [len(CHOICE_CONTEXTS), 4, SEQ_LENGTH]
        features = {
            "input_ids": padded(rows, SEQ_LENGTH).reshape(shape),
            "input_mask": padded([[1] * len(ids) for ids in rows], SEQ_LENGTH).reshape(shape),
            "segment_ids": padded(segments, SEQ_LENGTH).reshape(shape),
        }
        probabilities = tf.nn.softmax(self.models["swag"].predict(features, verbose=0)).numpy()
        self.assertEqual(self.loaded["swag/probabilities"].shape, (len(CHOICE_CONTEXTS), 4))
        self.assertLessEqual(np.abs(self.loaded["swag/probabilities"] - probabilities).max(), 1e-5)
        self.assertAllEqual(self.loaded["swag/choice"], probabilities.argmax(axis=-1))
        self.assertGreater(len(set(self.loaded["swag/choice"].tolist())), 1)  # not one constant answer
        self.assertGreater(probabilities.max() - probabilities.min(), 0.1)  # the choices do differ

    def test_multiple_choice_signature_and_batch_check(self):
        from tensorflow.core.protobuf import saved_model_pb2

        saved = saved_model_pb2.SavedModel()
        with open(os.path.join(self.exports["swag"], "saved_model.pb"), "rb") as file:
            saved.ParseFromString(file.read())
        signature = saved.meta_graphs[0].signature_def["serving_default"]

        def described(tensors):
            return {
                name: (tf.dtypes.as_dtype(info.dtype).name, [dim.size for dim in info.tensor_shape.dim])
                for name, info in tensors.items()
            }

        self.assertEqual(
            described(signature.inputs), {"context": ("string", [-1]), "endings": ("string", [-1, -1])}
        )
        self.assertEqual(
            described(signature.outputs), {"probabilities": ("float32", [-1, -1]), "choice": ("int32", [-1])}
        )
        serving = TaskServing(
            self.models["swag"],
            self.tokenizer,
            FinetunedModelInfo("swag", "multiple_choice", None, True, 8),
            8,
        )
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "need the same batch"):
            choice_signatures.choose(serving, tf.constant(["a", "b"]), tf.constant([["x", "y"]]))
        three = choice_signatures.choose(
            serving, tf.constant(["a"]), tf.constant([["x", "y", "z"]])
        )  # any number of choices
        self.assertEqual(three["probabilities"].shape, (1, 3))

    def test_signatures_by_task(self):
        import json

        for name, expected in [("cls", False), ("reg", False)]:
            with open(os.path.join(self.exports[name], "assets.extra", "export_info.json")) as file:
                info = json.load(file)
            self.assertEqual(info["pair_input"], expected)
            self.assertEqual(info["seq_length"], SEQ_LENGTH)  # the fine-tuned max_seq_length

    @pytest.mark.slow
    def test_saved_model_cli_lists_the_task_signatures(self):
        cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")

        def show(name):
            return subprocess.run(
                [cli, "show", "--dir", self.exports[name], "--all"],
                capture_output=True,
                text=True,
                timeout=300,
            ).stdout

        shown = show("cls")
        for key in ("serving_default", "serving_single", "serving_pair"):
            self.assertIn(f"signature_def['{key}']", shown)
        self.assertIn(
            "outputs['probabilities'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1, 2)", shown
        )
        self.assertIn("outputs['label'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)", shown)
        shown = show("swag")
        self.assertIn("signature_def['serving_default']", shown)
        self.assertIn(
            "inputs['endings'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1, -1)", shown
        )
        self.assertIn("outputs['choice'] tensor_info:\n        dtype: DT_INT32\n        shape: (-1)", shown)

    def test_a_pretrained_checkpoint_is_not_a_task_model(self):
        with self.assertRaisesRegex(ExportError, "needs a fine-tuned model.*task head.*is neither"):
            export_saved_model("task", self.root, os.path.join(self.root, "never"))
        self.assertFalse(os.path.exists(os.path.join(self.root, "never")))

    def test_the_encoder_of_a_fine_tuned_model_is_exported_and_read(self):
        # `bert_tf.export --kind=encoder`, `extract_features` and the pretrained loader take a
        # fine-tuned folder's encoder: the vectors of the encoder the task model holds.
        ids = np.array([[101, 2023, 3185, 2001, 2204, 102, 0]], np.int32)
        features = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32), "segment_ids": 0 * ids}
        for name in ("cls", "squad"):
            with self.subTest(model=name):
                model = keras.saving.load_model(
                    os.path.join(self.model_dirs[name], "model.keras"), compile=False
                )
                expected = model.encoder(features)["sequence_output"].numpy()
                encoder, settings = from_pretrained(self.model_dirs[name], heads="encoder")
                self.assertAllClose(encoder(features)["sequence_output"], expected, atol=1e-6)
                self.assertTrue(settings.lower_case)
                self.assertIn("task.json", settings.lower_case_reason)
                exported = export_saved_model(
                    "encoder", self.model_dirs[name], os.path.join(self.root, f"enc_{name}")
                )
                served = tf.saved_model.load(exported).signatures["serving_default"](
                    **{key: tf.constant(value) for key, value in features.items()}
                )
                self.assertAllClose(served["sequence_output"], expected, atol=1e-5)
        # Fill-mask needs the masked-LM head, which a fine-tuned model does not have: said, with the fix.
        with self.assertRaisesRegex(CheckpointError, "fine-tuned model.*no masked-LM.*pretrained checkpoint"):
            export_saved_model("mlm", self.model_dirs["cls"], os.path.join(self.root, "never_mlm"))
        self.assertFalse(os.path.exists(os.path.join(self.root, "never_mlm")))


class SquadWindowsTest(tf.test.TestCase):
    """The export's windows and max-context rule against the fine-tuning features themselves."""

    def test_squad_windows_and_max_context_are_the_fine_tuning_features(self):
        # Random context and question lengths and strides; every word is one piece ("the"),
        # so the fine-tuning features' token_to_orig_map gives each window's pieces. Windows
        # of over 100 pieces (seq_length 160) are where the 0.01 * length term of the
        # max-context score decides against a shorter last window.
        tokenizer = BertTokenizer(VOCAB)
        rng = random.Random(11)
        settings = [(SEQ_LENGTH, 60, [1, 2, 3, 5, 8, 128]), (160, 400, [16, 30, 50, 128])]
        compared = 0
        for seq_length, longest, strides in settings:
            cases = [(rng.randint(0, longest), rng.randint(1, 6), rng.choice(strides)) for _ in range(40)]
            for doc_stride in strides:
                lengths = [(n, q) for n, q, stride in cases if stride == doc_stride]
                examples = [
                    squad.SquadExample(
                        str(i), " ".join(["the"] * q), ["the"] * n, context=" ".join(["the"] * n)
                    )
                    for i, (n, q) in enumerate(lengths)
                ]
                features, _ = reference_windows(tokenizer, examples, seq_length, doc_stride, 6)
                num_pieces = tf.constant([n for n, _ in lengths], tf.int64)
                max_pieces = seq_length - 3 - tf.constant([q for _, q in lengths], tf.int64)
                windows = doc_windows(num_pieces, max_pieces, doc_stride)
                position = tf.range(seq_length, dtype=tf.int64)[None, :]
                max_context = is_max_context(windows, windows.start[:, None] + position).numpy()
                got = [
                    (int(example), int(index), list(range(start, start + length)), flags[:length].tolist())
                    for example, index, start, length, flags in zip(
                        windows.example,
                        windows.index,
                        windows.start,
                        windows.length,
                        max_context,
                        strict=True,
                    )
                    if lengths[int(example)][0] > 0  # an empty context: one empty window here, none there
                ]
                want = [
                    (
                        feature.example_index,
                        feature.doc_span_index,
                        [feature.token_to_orig_map[p] for p in sorted(feature.token_to_orig_map)],
                        [feature.token_is_max_context[p] for p in sorted(feature.token_to_orig_map)],
                    )
                    for feature in features
                ]
                self.assertEqual(got, want, f"seq_length={seq_length} doc_stride={doc_stride}")
                compared += len(want)
        self.assertGreater(compared, 300)


if __name__ == "__main__":
    tf.test.main()
