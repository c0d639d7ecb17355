import os

import tensorflow as tf

from pipelines import corpus


class CorpusTest(tf.test.TestCase):
    def test_documents_are_prose_sentences(self):
        documents = list(corpus.documents())
        self.assertGreater(len(documents), 100)
        sentences = [s for doc in documents for s in doc]
        self.assertGreater(len(sentences), 2000)
        for sentence in sentences:
            self.assertEqual(sentence, sentence.strip())
            self.assertNotIn("\n", sentence)
            # Headings' underlines and indented code are not prose.
            self.assertNotRegex(sentence, r"^\*{3,}|^={3,}")
        # A known sentence of the "assert" topic survives intact.
        self.assertIn('Assignments to "__debug__" are illegal.', sentences)

    def test_file_format_and_repeat(self):
        path = corpus.write_corpus(os.path.join(self.get_temp_dir(), "sub", "corpus.txt"), repeat=2)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        once = corpus.corpus_text()
        self.assertEqual(text, once + "\n" + once)
        blocks = [b for b in once.split("\n\n") if b.strip()]
        self.assertLen(blocks, len(list(corpus.documents())))
        self.assertEqual(os.listdir(os.path.dirname(path)), ["corpus.txt"])  # no temporary left

    def test_split_sentences_keeps_abbreviations(self):
        self.assertEqual(
            corpus.split_sentences("Use a list, e.g. this one. Then stop!  Really?"),
            ["Use a list, e.g. this one.", "Then stop!", "Really?"],
        )


if __name__ == "__main__":
    tf.test.main()
