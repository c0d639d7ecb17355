"""build_vocab on Apache Beam learns the one-process program's vocab."""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

from pipelines import build_vocab, corpus
from pipelines.beam.vocab import learn_vocab_on_beam


class BeamVocabTest(tf.test.TestCase):
    def test_the_same_vocab_as_the_one_process_learner(self):
        directory = tempfile.mkdtemp()
        documents = list(corpus.documents())
        # Two files, a cased vocab (case kept through the counts), ranges of 20 KB.
        paths = []
        for index, part in enumerate((documents[:120], documents[120:])):
            path = os.path.join(directory, f"part{index}.txt")
            with open(path, "w", encoding="utf-8") as file:
                file.write("\n\n".join("\n".join(document) for document in part) + "\n")
            paths.append(path)
        expected = build_vocab.build_vocab(
            paths, 1500, os.path.join(directory, "one.txt"), lower_case=False, progress=False
        )
        output = os.path.join(directory, "beam.txt")
        vocab = learn_vocab_on_beam(
            paths,
            1500,
            output,
            runner_name="DirectRunner",
            beam_args=["--direct_num_workers=1", "--direct_running_mode=in_memory"],
            lower_case=False,
            range_bytes=20_000,
        )
        self.assertGreater(len(expected), 500)
        self.assertEqual(vocab, expected)
        with open(output, encoding="utf-8") as file:
            self.assertEqual(file.read().splitlines(), expected)


if __name__ == "__main__":
    tf.test.main()
