"""Word counts for vocabulary learning, made by an Apache Beam pipeline.

`python -m pipelines.build_vocab --runner=...`: the input files are cut into byte ranges
(as `pipelines.beam.generate` cuts them), each range's lines are split into words by the
same `BasicTokenizer` the one-process count uses, and the counts are summed per word
across workers (`CombinePerKey`). `build_vocab` then learns the vocab from them as from
its own counts (tensorflow-text's learner): the same corpus gives the same counts, hence
the same vocab, as the one-process program.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Sequence

import apache_beam as beam

from pipelines import text_input
from pipelines.beam import files, runner
from pipelines.beam.generate import RANGE_BYTES, byte_ranges

# Lines split into words per TensorFlow call.
BATCH_LINES = 1024


class _CountWords(beam.DoFn):
    """(path, start, end) → (word, count) for the words of the lines of the range."""

    def __init__(self, lower_case: bool, encoding: str = "utf-8"):
        self.lower_case = lower_case
        self.encoding = encoding

    def setup(self) -> None:
        # In the worker: the launcher imports none of TensorFlow.
        import tensorflow as tf

        from bert_tf.basic_tokenizer import BasicTokenizer

        basic_tokenizer = BasicTokenizer(lower_case=self.lower_case)
        split = tf.function(
            lambda lines: basic_tokenizer.tokenize(lines).flat_values,
            input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False,
        )
        self.words = lambda lines: split(tf.constant(lines)).numpy().tolist()

    def process(self, file_range: tuple[str, int, int]) -> Iterable[tuple[str, int]]:
        path, start, end = file_range
        counts: collections.Counter = collections.Counter()
        stats = text_input.ReadStats()
        batch: list[str] = []
        # Blank lines have no words: the documents' lines are all the words of the range.
        for document in text_input.documents_in_range(path, start, end, stats=stats, encoding=self.encoding):
            batch.extend(document)
            if len(batch) >= BATCH_LINES:
                counts.update(self.words(batch))
                batch = []
        if batch:
            counts.update(self.words(batch))
        beam.metrics.Metrics.counter(runner.NAMESPACE, "lines").inc(stats.lines)
        for word, count in counts.items():
            yield word.decode("utf-8"), count


def count_words_on_beam(
    paths: Sequence[str],
    counts_prefix: str,
    *,
    runner_name: str,
    beam_args: Sequence[str] = (),
    lower_case: bool = True,
    encoding: str = "utf-8",
) -> collections.Counter:
    """The BasicTokenizer word counts of `paths`, counted on Beam (as `build_vocab.count_words`).

    The pipeline writes the summed counts as JSON lines to files `counts_prefix`-*, on a
    filesystem the runner's workers and this process share (next to the vocab); they are
    read back here and removed (through `pipelines.beam.files`: this process loads no TensorFlow).
    """
    pipeline_runner, options = runner.pipeline_options(runner_name, beam_args)
    sizes = [files.size(path) for path in paths]
    ranges = byte_ranges(paths, sizes, RANGE_BYTES)
    pipeline = beam.Pipeline(runner=pipeline_runner, options=options)
    _ = (
        pipeline
        | "Ranges" >> beam.Create(ranges)
        | "Spread" >> beam.Reshuffle()
        | "CountWords" >> beam.ParDo(_CountWords(lower_case, encoding))
        | "SumCounts" >> beam.CombinePerKey(sum)
        | "ToJson" >> beam.Map(json.dumps)
        | "Write" >> beam.io.WriteToText(counts_prefix)
    )
    try:
        runner.run(pipeline)
        counts: collections.Counter = collections.Counter()
        for path in files.glob(counts_prefix + "*"):
            for line in files.read_bytes(path).decode("utf-8").splitlines():
                word, count = json.loads(line)
                counts[word] += count
    finally:
        for path in files.glob(counts_prefix + "*"):
            files.remove(path)
    return counts
