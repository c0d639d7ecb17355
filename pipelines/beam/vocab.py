"""Vocabulary learning with the word counts made by an Apache Beam pipeline.

`python -m pipelines.build_vocab --runner=...`: the input files are cut into byte ranges
(as `pipelines.beam.generate` cuts them), each range's lines are split into words by the
same `BasicTokenizer` the one-process count uses, the counts are summed per word across
workers (`CombinePerKey`), and one worker learns the vocab from all of them with the same
tensorflow-text learner (`build_vocab.learn_vocab`) and writes it (`build_vocab.write_vocab`:
whole or not at all). The same corpus gives the same counts, hence the same vocab, as the
one-process program.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence

import apache_beam as beam
import tensorflow as tf

from bert_tf import fileio
from bert_tf.basic_tokenizer import BasicTokenizer
from pipelines import text_input
from pipelines.beam import runner
from pipelines.beam.generate import RANGE_BYTES

# Lines split into words per TensorFlow call.
BATCH_LINES = 1024


class _CountWords(beam.DoFn):
    """(path, start, end) → (word, count) for the words of the lines of the range."""

    def __init__(self, lower_case: bool):
        self.lower_case = lower_case

    def setup(self) -> None:
        basic_tokenizer = BasicTokenizer(lower_case=self.lower_case)
        self.words = tf.function(
            lambda lines: basic_tokenizer.tokenize(lines).flat_values,
            input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False,
        )

    def process(self, file_range: tuple[str, int, int]) -> Iterable[tuple[str, int]]:
        path, start, end = file_range
        counts: collections.Counter = collections.Counter()
        stats = text_input.ReadStats()
        batch: list[str] = []
        # Blank lines have no words: the documents' lines are all the words of the range.
        for document in text_input.documents_in_range(path, start, end, stats=stats):
            batch.extend(document)
            if len(batch) >= BATCH_LINES:
                counts.update(self.words(tf.constant(batch)).numpy().tolist())
                batch = []
        if batch:
            counts.update(self.words(tf.constant(batch)).numpy().tolist())
        beam.metrics.Metrics.counter(runner.NAMESPACE, "lines").inc(stats.lines)
        for word, count in counts.items():
            yield word.decode("utf-8"), count


def _learn_and_write(counts: dict[str, int], vocab_size: int, output_file: str, learn_params: dict) -> None:
    from pipelines.build_vocab import learn_vocab, write_vocab

    beam.metrics.Metrics.counter(runner.NAMESPACE, "distinct_words").inc(len(counts))
    write_vocab(
        learn_vocab(collections.Counter(counts), vocab_size, progress=False, **learn_params), output_file
    )


def learn_vocab_on_beam(
    paths: Sequence[str],
    vocab_size: int,
    output_file: str,
    *,
    runner_name: str,
    beam_args: Sequence[str] = (),
    lower_case: bool = True,
    range_bytes: int = RANGE_BYTES,
    **learn_params,
) -> list[str]:
    """Counts the words of `paths` on Beam, learns a vocab from them, writes it; returns it."""
    pipeline_runner, options = runner.pipeline_options(runner_name, beam_args)
    sizes = [fileio.size(path) for path in paths]
    ranges = [
        (path, start, min(start + range_bytes, size))
        for path, size in zip(paths, sizes, strict=True)
        for start in range(0, size, range_bytes)
    ]
    pipeline = beam.Pipeline(runner=pipeline_runner, options=options)
    _ = (
        pipeline
        | "Ranges" >> beam.Create(ranges)
        | "Spread" >> beam.Reshuffle()
        | "CountWords" >> beam.ParDo(_CountWords(lower_case))
        | "SumCounts" >> beam.CombinePerKey(sum)
        | "AllCounts" >> beam.combiners.ToDict()
        | "Learn" >> beam.Map(_learn_and_write, vocab_size, output_file, learn_params)
    )
    runner.run(pipeline)
    return fileio.read_text(output_file).splitlines()
