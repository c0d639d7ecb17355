"""build_vocab on Apache Beam learns the one-process program's vocab."""

from __future__ import annotations

import os
import tempfile
from unittest import mock

import tensorflow as tf

from pipelines import build_vocab, corpus
from pipelines.beam import vocab as beam_vocab


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
        with mock.patch.object(beam_vocab, "RANGE_BYTES", 20_000):
            vocab = build_vocab.build_vocab(
                paths,
                1500,
                output,
                lower_case=False,
                progress=False,
                runner="DirectRunner",
                beam_args=["--direct_num_workers=1", "--direct_running_mode=in_memory"],
            )
        self.assertGreater(len(expected), 500)
        self.assertEqual(vocab, expected)
        with open(output, encoding="utf-8") as file:
            self.assertEqual(file.read().splitlines(), expected)
        self.assertEqual(sorted(os.listdir(directory)), ["beam.txt", "one.txt", "part0.txt", "part1.txt"])


if __name__ == "__main__":
    tf.test.main()
