"""Readers of users' classification files, CoNLL NER, SWAG and SQuAD JSON (no tokenizer)."""

import json
import os

import tensorflow as tf

from bert_tf.tasks.choice import swag
from bert_tf.tasks.classification import tables as classification
from bert_tf.tasks.classification.tables import InputExample
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.span import squad
from bert_tf.tasks.token import conll as ner


def write(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


class ClassificationReaderTest(tf.test.TestCase):
    def test_csv_tsv_jsonl_give_the_same_examples(self):
        d = self.get_temp_dir()
        csv_path = write(d, "a.csv", 'q,a,y\n"Is it, really?",Yes,2\nNo?,no,10\n')
        tsv_path = write(d, "a.tsv", "q\ta\ty\nIs it, really?\tYes\t2\nNo?\tno\t10\n")
        jsonl_path = write(
            d, "a.jsonl", '{"q": "Is it, really?", "a": "Yes", "y": 2}\n\n{"q": "No?", "a": "no", "y": 10}\n'
        )
        results = []
        for path in (csv_path, tsv_path, jsonl_path):
            examples = classification.read_table(path, "q", text_b_column="a", label_column="y")
            results.append([(e.text_a, e.text_b, e.label) for e in examples])
        self.assertEqual(results[0], [("Is it, really?", "Yes", "2"), ("No?", "no", "10")])
        self.assertEqual(results[0], results[1])
        self.assertEqual(results[0], results[2])
        # Integer labels sort numerically.
        self.assertEqual(
            classification.label_list_from(classification.read_table(csv_path, "q", label_column="y")),
            ["2", "10"],
        )

    def test_bad_files(self):
        d = self.get_temp_dir()
        with self.assertRaisesRegex(TaskDataError, "unknown extension '.txt'"):
            classification.read_table(write(d, "a.txt", "x"), "text")
        with self.assertRaisesRegex(TaskDataError, r"line 2: no column 'text'.*\['review'\]"):
            classification.read_table(write(d, "b.csv", "review\ngood\n"), "text")
        with self.assertRaisesRegex(TaskDataError, "line 2 is not valid JSON"):
            classification.read_table(write(d, "c.jsonl", '{"text": "a"}\n{oops\n'), "text")
        with self.assertRaisesRegex(TaskDataError, "not found"):
            classification.read_table(os.path.join(d, "missing.csv"), "text")

    def test_validation_names_the_row(self):
        examples = [
            InputExample("x.csv line 2", "fine", None, "pos"),
            InputExample("x.csv line 3", "ok", None, "meh"),
        ]
        with self.assertRaisesRegex(TaskDataError, "x.csv line 3: label 'meh' is not one of .*'neg', 'pos'"):
            list(classification.validate(examples, ["neg", "pos"]))
        with self.assertRaisesRegex(TaskDataError, "x.csv line 4: the text is empty"):
            list(classification.validate([InputExample("x.csv line 4", "  ", None, "pos")], ["pos"]))
        with self.assertRaisesRegex(TaskDataError, "x.csv line 5: the second text is empty"):
            list(classification.validate([InputExample("x.csv line 5", "a", "", "pos")], ["pos"]))
        with self.assertRaisesRegex(TaskDataError, "regression label 'high' is not a number"):
            list(classification.validate([InputExample("r", "a", None, "high")], None, regression=True))


class ConllReaderTest(tf.test.TestCase):
    def test_sentences_tags_and_docstart(self):
        path = write(
            self.get_temp_dir(),
            "train.txt",
            "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n\n"
            "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n",
        )
        sentences = ner.read_conll(path)
        self.assertEqual([s.words for s in sentences], [["EU", "rejects"], ["Peter", "Blackburn"]])
        self.assertEqual(sentences[1].tags, ["B-PER", "I-PER"])
        self.assertEqual(sentences[1].line, 7)
        self.assertEqual(ner.label_list_from(sentences), ["O", "B-ORG", "B-PER", "I-PER"])

    def test_malformed_lines_name_their_line_number(self):
        d = self.get_temp_dir()
        with self.assertRaisesRegex(TaskDataError, "bad.txt line 3: expected 'word ... TAG'"):
            ner.read_conll(write(d, "bad.txt", "EU B-ORG\nis O\nmissingtag\n"))
        with self.assertRaisesRegex(TaskDataError, "line 2: tag 'ORG' is not O or a B-/I-"):
            ner.read_conll(write(d, "bad2.txt", "EU B-ORG\nUN ORG\n"))


class SwagReaderTest(tf.test.TestCase):
    def test_swag_columns(self):
        header = (
            "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
        )
        row = 'v,1,x,"Someone opens a door.",He,gold,walks in.,eats the door.,sings.,flies.,0\n'
        path = write(self.get_temp_dir(), "train.csv", header + row)
        [example] = swag.read_swag(path)
        self.assertEqual(example.context, "Someone opens a door.")
        self.assertEqual(example.endings, ["He walks in.", "He eats the door.", "He sings.", "He flies."])
        self.assertEqual(example.label, 0)

    def test_bad_label_and_missing_columns(self):
        d = self.get_temp_dir()
        with self.assertRaisesRegex(TaskDataError, "line 2: label '7' is not an ending index 0..1"):
            swag.read_swag(write(d, "a.csv", "sent1,sent2,ending0,ending1,label\nc,s,a,b,7\n"))
        with self.assertRaisesRegex(TaskDataError, "expected SWAG columns"):
            swag.read_swag(write(d, "b.csv", "text,label\nc,1\n"))


class SquadReaderTest(tf.test.TestCase):
    def data(self):
        return [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": "Beyoncé  Knowles (born 1981) is\u202fa singer.",
                        "qas": [
                            {
                                "id": "a",
                                "question": "Born?",
                                "answers": [{"text": "1981", "answer_start": 23}],
                            },
                            {
                                "id": "b",
                                "question": "Who?",
                                "answers": [{"text": "Beyoncé Knowles", "answer_start": 0}],
                            },
                            {
                                "id": "c",
                                "question": "Bad offset?",
                                "answers": [{"text": "singer", "answer_start": 3}],
                            },
                            {"id": "d", "question": "Unanswerable?", "answers": [], "is_impossible": True},
                        ],
                    }
                ],
            }
        ]

    def test_char_offsets_become_word_offsets(self):
        examples, skipped = squad.read_examples(self.data(), is_training=True, version_2_with_negative=True)
        self.assertEqual(
            examples[0].doc_tokens, ["Beyoncé", "Knowles", "(born", "1981)", "is", "a", "singer."]
        )
        by_id = {e.qas_id: e for e in examples}
        self.assertEqual((by_id["a"].start_position, by_id["a"].end_position), (3, 3))
        # Extra whitespace inside the answer span is normalised before matching.
        self.assertEqual((by_id["b"].start_position, by_id["b"].end_position), (0, 1))
        self.assertTrue(by_id["d"].is_impossible)
        self.assertNotIn("c", by_id)  # answer text not at its offset: skipped and counted
        self.assertEqual(skipped, 1)

    def test_prediction_examples_keep_every_question(self):
        examples, skipped = squad.read_examples(self.data(), is_training=False)
        self.assertLen(examples, 4)
        self.assertEqual(skipped, 0)

    def test_training_needs_one_answer(self):
        data = self.data()
        data[0]["paragraphs"][0]["qas"][0]["answers"].append({"text": "a", "answer_start": 0})
        with self.assertRaisesRegex(TaskDataError, "'a' has 2 answers"):
            squad.read_examples(data, is_training=True)

    def test_load_dataset(self):
        path = write(self.get_temp_dir(), "dev.json", json.dumps({"version": "1.1", "data": self.data()}))
        self.assertEqual(squad.load_dataset(path), self.data())
        with self.assertRaisesRegex(TaskDataError, "no 'data' list"):
            squad.load_dataset(write(self.get_temp_dir(), "x.json", "[]"))


if __name__ == "__main__":
    tf.test.main()
