"""Vocabulary learning: specials first, bounded size, and a vocab that covers its corpus."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import flags  # noqa: E402

from bert_tf.errors import UsageError  # noqa: E402
from bert_tf.tokenization import BertTokenizer, load_vocab  # noqa: E402
from pipelines import build_vocab, corpus  # noqa: E402
from pipelines.text_input import InputFileError  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


class BuildVocabTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.corpus_file = corpus.write_corpus(os.path.join(tf.compat.v1.test.get_temp_dir(), "corpus.txt"))
        cls.sentences = [s for document in corpus.documents() for s in document]

    def test_uncased_vocab_of_the_embedded_corpus_covers_it(self):
        output = os.path.join(self.get_temp_dir(), "out", "vocab.txt")
        with self.assertLogs("pipelines.build_vocab", "INFO") as logs:
            vocab = build_vocab.build_vocab(
                self.corpus_file, vocab_size=1000, output_file=output, lower_case=True
            )
        self.assertEqual(vocab[:5], SPECIALS)
        self.assertLess(len(vocab), 1000)
        self.assertGreater(len(vocab), 500)
        # Fewer tokens than asked: the size learnt is said, and why.
        self.assertIn(
            f"learnt {len(vocab)} tokens in",
            "\n".join(logs.output),
        )
        self.assertIn(
            "fewer than vocab_size=1000: the corpus has no more word pieces worth adding",
            "\n".join(logs.output),
        )
        self.assertEqual(load_vocab(output), vocab)  # valid: no repeats, specials present
        self.assertEqual(os.listdir(os.path.dirname(output)), [os.path.basename(output)])  # no temporary left
        self.assertNotIn("The", vocab)  # uncased
        tokenizer = BertTokenizer(output, lower_case=True)
        ids = tokenizer.tokenize(self.sentences).flat_values.numpy()
        unk_rate = float((ids == tokenizer.unk_id).mean())
        # Every character of the corpus is in the alphabet (it has < 1000 distinct ones) as a
        # word start and as a ## piece, so no word should be [UNK] (measured: 0 of 77653).
        self.assertLess(unk_rate, 0.001)
        # A real vocab, not just characters: most words are one piece (measured: 1.24 pieces
        # per word with this 864-token vocab).
        num_words = int(tokenizer.split_words(self.sentences).flat_values.shape[0])
        self.assertLess(len(ids), 1.4 * num_words)

    def test_cased_vocab_via_the_command_line(self):
        output = os.path.join(self.get_temp_dir(), "cased.txt")
        flag_values = flags.FlagValues()
        build_vocab.define_flags(flag_values)
        flag_values(
            [
                "build_vocab",
                f"--input_file={self.corpus_file}",
                "--vocab_size=600",
                f"--output_file={output}",
                "--nodo_lower_case",
                "--max_lines=800",
            ]
        )
        build_vocab.run_from_flags(flag_values)
        vocab = load_vocab(output)
        self.assertEqual(vocab[:5], SPECIALS)
        self.assertLessEqual(len(vocab), 600)
        self.assertIn("The", vocab)
        tokenizer = BertTokenizer(output, lower_case=False)
        ids = tokenizer.tokenize(self.sentences[:800]).flat_values.numpy()
        self.assertLess(float((ids == tokenizer.unk_id).mean()), 0.001)

    def test_word_counts_stream_several_files_with_the_tokenizer_rules(self):
        directory = self.get_temp_dir()
        with open(os.path.join(directory, "part-0.txt"), "w", encoding="utf-8") as handle:
            handle.write("Hello, hello\u200bworld!\n\nHÉLLO 中文\n")
        with open(os.path.join(directory, "part-1.txt"), "wb") as handle:
            handle.write(b"caf\xc3\xa9 \xff[MASK]\n")
        counts = build_vocab.count_words(os.path.join(directory, "part-*.txt"), lower_case=True, batch_size=2)
        expected = {
            "hello": 2,
            ",": 1,
            "helloworld": 1,
            "!": 1,
            "中": 1,
            "文": 1,
            "cafe": 1,
            "[": 1,
            "mask": 1,
            "]": 1,
        }
        self.assertEqual(dict(counts), expected)
        cased = build_vocab.count_words(os.path.join(directory, "part-*.txt"), lower_case=False, max_lines=1)
        self.assertEqual(dict(cased), {"Hello": 1, ",": 1, "helloworld": 1, "!": 1})

    def test_an_existing_vocab_is_replaced_only_with_overwrite(self):
        output = os.path.join(self.get_temp_dir(), "existing", "vocab.txt")
        os.makedirs(os.path.dirname(output))
        with open(output, "w", encoding="utf-8") as handle:
            handle.write("the user's vocab\n")
        with self.assertRaisesRegex(
            UsageError, f"--output_file={output} already exists; pass --overwrite to replace it"
        ):
            build_vocab.build_vocab(self.corpus_file, vocab_size=200, output_file=output, max_lines=50)
        with open(output, encoding="utf-8") as handle:
            self.assertEqual(handle.read(), "the user's vocab\n")
        vocab = build_vocab.build_vocab(
            self.corpus_file, vocab_size=200, output_file=output, max_lines=50, overwrite=True
        )
        self.assertEqual(load_vocab(output), vocab)

    def test_input_that_is_mostly_not_text_is_refused_unless_accepted(self):
        directory = self.get_temp_dir()
        random_bytes = os.path.join(directory, "random.bin")
        with open(random_bytes, "wb") as handle:
            handle.write(np.random.default_rng(0).bytes(20_000))
        output = os.path.join(directory, "random_vocab", "vocab.txt")
        with self.assertRaisesRegex(
            InputFileError,
            r"--input_file: \d+ of the first \d+ lines of .*random.bin are not text \(\d+ have invalid UTF-8\); "
            r".*--accept_non_text",
        ):
            build_vocab.build_vocab(random_bytes, vocab_size=100, output_file=output)
        self.assertFalse(os.path.exists(os.path.dirname(output)))
        with self.assertLogs("pipelines.text_input", "WARNING"):
            vocab = build_vocab.build_vocab(
                random_bytes, vocab_size=100, output_file=output, accept_non_text=True
            )
        self.assertEqual(load_vocab(output), vocab)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(InputFileError, "--input_file=/no/such/\\*.txt matches no file"):
            build_vocab.count_words("/no/such/*.txt")
        with self.assertRaisesRegex(ValueError, "vocab_size must be > 5"):
            build_vocab.learn_vocab({"a": 1}, vocab_size=5)
        with self.assertRaisesRegex(ValueError, "no words"):
            build_vocab.learn_vocab({}, vocab_size=100)


class EncodingTest(tf.test.TestCase):
    def test_a_latin1_corpus_is_refused_and_learnt_whole_with_its_encoding(self):
        # "für" and "größe" often enough to be learnt as words: read as UTF-8 they would be
        # learnt as "fr" and "gre" (the bytes dropped), which is what the refusal prevents.
        text = "\n".join(["die größe ist für alle da", "und noch mehr text hier"] * 30) + "\n"
        path = os.path.join(self.get_temp_dir(), "latin1.txt")
        with open(path, "wb") as file:
            file.write(text.encode("latin-1"))
        output = os.path.join(self.get_temp_dir(), "vocab_latin1.txt")
        with self.assertRaisesRegex(InputFileError, "is not UTF-8 text: 30 of the 60 lines read"):
            build_vocab.build_vocab(
                path, vocab_size=200, output_file=output, lower_case=False, progress=False
            )
        self.assertFalse(os.path.exists(output))
        vocab = build_vocab.build_vocab(
            path, 200, output, lower_case=False, progress=False, input_encoding="latin-1"
        )
        self.assertIn("größe", vocab)
        self.assertIn("für", vocab)
        self.assertNotIn("fr", vocab)
