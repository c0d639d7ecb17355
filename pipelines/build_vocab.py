r"""Learns a WordPiece vocab from raw text with tensorflow-text's vocabulary learner.

The corpus is streamed through `tf.data` (any number of files, any size): each batch of
lines is split into words by the same `BasicTokenizer` that `bert_tf.tokenization.BertTokenizer`
runs, and only the word counts are kept in memory. tensorflow-text's WordPiece learner
(`tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib.learn`) then picks
the pieces. Because words are split exactly as the tokenizer will split them, and the
learner adds every character of its alphabet both as a word start and as a `##` piece, every
word made of those characters can be covered.

The vocab starts with [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4) and is written under a
temporary name, then renamed, so an interrupted run never leaves a half-written vocab.

Usage:

  python -m pipelines.build_vocab --input_file='corpus/*.txt' --vocab_size=30522 \
      --output_file=vocab.txt [--nodo_lower_case]

Example from Python:

>>> from pipelines import corpus
>>> from pipelines.build_vocab import build_vocab
>>> path = corpus.write_corpus("/tmp/pydoc_corpus.txt")
>>> vocab = build_vocab(path, vocab_size=2000, output_file="/tmp/pydoc_vocab.txt", overwrite=True)
>>> vocab[:5], len(vocab) <= 2000
(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True)
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Sequence

from absl import flags

from bert_tf import cli, fileio
from bert_tf.cli import setting
from bert_tf.errors import InputFileError, UsageError
from bert_tf.outputs import check_output
from pipelines import text_input

# By name: this module is also the program (__main__).
logger = logging.getLogger("pipelines.build_vocab")

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def count_words(
    input_files: str | Sequence[str],
    lower_case: bool = True,
    batch_size: int = 1024,
    max_lines: int = 0,
    progress: bool = True,
    encoding: str = "utf-8",
) -> collections.Counter:
    """Counts the BasicTokenizer words of text files, streaming them (memory holds counts only).

    Args:
      input_files: a path, a glob, a comma-separated list of them, or a list.
      lower_case: normalize as the uncased tokenizer does.
      batch_size: lines tokenized per TensorFlow call.
      max_lines: stop after this many non-empty lines (0: read everything).
      progress: show the share of the input read, its rate and ETA on stderr (see
        `bert_tf.progress_display.Progress`).
      encoding: the files' text encoding (Python's name), read as pretraining reads them
        (`pipelines.text_input`).
    """
    # lazy: importing this module loads no TensorFlow (basic_tokenizer does)
    import tensorflow as tf

    from bert_tf.basic_tokenizer import BasicTokenizer
    from bert_tf.progress_display import Progress

    paths = fileio.expand_files(input_files, "input_file")
    basic_tokenizer = BasicTokenizer(lower_case=lower_case)
    stats = text_input.ReadStats()

    def line_batches():
        # Lines are read and decoded as pretraining reads them, then tokenized in batches.
        batch, count = [], 0
        for document in text_input.iter_documents(paths, stats=stats, encoding=encoding):
            for line in document:
                batch.append(line.encode("utf-8"))
                count += 1
                if len(batch) == batch_size or count == max_lines:
                    yield batch
                    batch = []
                if count == max_lines:
                    return
        if batch:
            yield batch

    batches = tf.data.Dataset.from_generator(
        line_batches, output_signature=tf.TensorSpec([None], tf.string)
    ).map(
        lambda batch: (basic_tokenizer.tokenize(batch).flat_values, tf.size(batch)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    counts: collections.Counter = collections.Counter()
    num_lines = 0
    logger.debug(
        "counting words of %d file(s): %s",
        len(paths),
        ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else ""),
    )
    # The share of the input read, in bytes. With max_lines only part of it is read: no total.
    total_bytes = sum(tf.io.gfile.stat(path).length for path in paths)
    display = Progress(
        "counting words", total=None if max_lines else total_bytes, unit="bytes", enabled=progress
    )
    with display:
        for words, batch_lines in batches.as_numpy_iterator():
            counts.update(words.tolist())
            num_lines += int(batch_lines)
            display.update(stats.bytes, note=f"{num_lines:,} lines, {len(counts):,} distinct words")
    logger.info("read %d lines (%.1f MB): %d distinct words", num_lines, stats.bytes / 1e6, len(counts))
    return collections.Counter({word.decode("utf-8"): count for word, count in counts.items()})


def learn_vocab(
    word_counts: collections.Counter, vocab_size: int, progress: bool = True, **learn_params
) -> list[str]:
    """tensorflow-text's WordPiece learner on word counts; specials first, at most `vocab_size` tokens.

    The learner counts nothing it could report as it goes: with `progress` its start is
    announced on stderr, and its time when it is done.

    Fewer when the corpus has no more pieces worth adding (the learner keeps a piece only
    if it is seen `lower_thresh` times, 10 by default): the size learnt is logged, and why.
    """
    # lazy: tensorflow-text's package loads TensorFlow
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    from bert_tf.progress_display import TimedStep

    if vocab_size < len(SPECIAL_TOKENS) + 1:
        raise UsageError(f"vocab_size must be > {len(SPECIAL_TOKENS)} (the special tokens); got {vocab_size}")
    if not word_counts:
        raise InputFileError("the input has no words to learn a vocab from; check --input_file")
    start = time.perf_counter()
    what = f"learning a vocab of up to {vocab_size:,} tokens from {len(word_counts):,} distinct words"
    with TimedStep(what, enabled=progress) as phase:
        vocab = learner.learn(word_counts, vocab_size, SPECIAL_TOKENS, **learn_params)
        phase.note = f"{min(len(vocab), vocab_size):,} tokens"
    if vocab[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS or len(set(vocab)) != len(vocab):
        raise RuntimeError(
            "the WordPiece learner returned a vocab without the specials first or with repeats"
        )
    if len(vocab) > vocab_size:
        # The learner's threshold search can overshoot when the alphabet alone is large; the
        # tail holds the rarest pieces.
        logger.warning("learnt %d tokens; keeping the first %d (vocab_size)", len(vocab), vocab_size)
        vocab = vocab[:vocab_size]
    seconds = time.perf_counter() - start
    if len(vocab) < vocab_size:
        logger.info(
            "learnt %d tokens in %.1f s, fewer than vocab_size=%d: the corpus has no more word pieces worth "
            "adding (each must be seen at least %d times; a larger corpus gives more)",
            len(vocab),
            seconds,
            vocab_size,
            learn_params.get("lower_thresh", 10),
        )
    else:
        logger.info("learnt %d tokens in %.1f s", len(vocab), seconds)
    return vocab


def write_vocab(vocab: Sequence[str], output_file: str) -> str:
    """Writes one token per line under a temporary name, then renames it into place."""
    return fileio.write_text(os.fspath(output_file), "".join(token + "\n" for token in vocab))


def build_vocab(
    input_files: str | Sequence[str],
    vocab_size: int,
    output_file: str,
    lower_case: bool = True,
    max_lines: int = 0,
    accept_non_text: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    runner: str | None = None,
    beam_args: Sequence[str] = (),
    input_encoding: str | None = None,
    **learn_params,
) -> list[str]:
    """Counts words, learns a WordPiece vocab and writes it to `output_file`; returns the vocab.

    An existing `output_file` is refused unless `overwrite`. Input that is mostly not text
    (over half of its first lines have invalid UTF-8: a binary file), or not in
    `input_encoding` (default UTF-8: a Latin-1 file, whose "für" would be learnt as "fr"),
    is refused with the fix unless `accept_non_text`. `progress`: show each phase's progress on stderr.
    `learn_params` go to tensorflow-text's learner
    (`max_unique_chars`, `max_token_length`, `num_iterations`, ...). With a Beam `runner`
    the words are counted by a Beam pipeline with Beam's options `beam_args`
    (`pipelines.beam.vocab`).
    """
    if runner and max_lines:
        raise UsageError(
            "--max_lines reads the first lines in order: it has no meaning with --runner; drop it"
        )
    filesystem = None  # bert_tf.fileio's
    if runner:  # Beam's options first: nothing is read if they cannot work
        from pipelines.beam import require_beam

        require_beam()
        from pipelines.beam import files
        from pipelines.beam import runner as beam_runner

        beam_runner.pipeline_options(runner, beam_args)
        filesystem = files  # the workers run the TensorFlow ops: this process loads none to check
    check_output(output_file, "--output_file", overwrite=overwrite, is_file=True, filesystem=filesystem)
    paths = fileio.expand_files(input_files, "input_file", filesystem=filesystem)
    encoding = text_input.line_encoding(input_encoding)
    text_input.check_mostly_text(
        paths, None, "--input_file", accept=accept_non_text, filesystem=filesystem, encoding=encoding
    )
    if runner:
        from pipelines.beam.vocab import count_words_on_beam

        counts = count_words_on_beam(
            paths,
            f"{output_file}.word-counts-{uuid.uuid4().hex}",
            runner_name=runner,
            beam_args=beam_args,
            lower_case=lower_case,
            encoding=encoding,
        )
        logger.info("counted %d distinct words on %s", len(counts), runner)
    else:
        counts = count_words(
            paths, lower_case=lower_case, max_lines=max_lines, progress=progress, encoding=encoding
        )
    vocab = learn_vocab(counts, vocab_size, progress=progress, **learn_params)
    write_vocab(vocab, output_file)
    return vocab


@dataclasses.dataclass(frozen=True)
class VocabSettings:
    """`python -m pipelines.build_vocab`: `build_vocab(**dataclasses.asdict(settings))`."""

    input_files: str = dataclasses.field(
        metadata={
            "help": "Text files: a path, a glob or a comma-separated list of them.",
            "flag": "input_file",
        }
    )
    output_file: str = dataclasses.field(metadata={"help": "Where to write the vocab, one token per line."})
    vocab_size: int = setting(30522, "Largest vocab size to learn (the special tokens included).")
    lower_case: bool = setting(
        True,
        "Learn an uncased vocab (--nodo_lower_case for a cased one).",
        flag="do_lower_case",
        old_flags=("lower_case",),
    )
    max_lines: int = setting(0, "Read at most this many non-empty lines (0: all of them).")
    input_encoding: str | None = setting(
        None,
        "The input's text encoding (latin-1, cp1252, ...; default UTF-8, and input that is not UTF-8 is refused "
        "with the fix).",
    )
    accept_non_text: bool = setting(
        False,
        "Learn from the input even if some lines do not decode (their bad bytes dropped) or most are not text.",
    )
    overwrite: bool = setting(False, "Replace an existing --output_file.")
    runner: str | None = setting(
        None,
        "Count the words with an Apache Beam pipeline on this runner (DirectRunner, DataflowRunner, FlinkRunner, "
        "...); Beam's pipeline options follow as flags. Without it: one process, no Beam.",
    )

    def __post_init__(self) -> None:
        if self.vocab_size <= len(SPECIAL_TOKENS):
            raise UsageError(
                f"--vocab_size must be > {len(SPECIAL_TOKENS)} (the special tokens), got {self.vocab_size}"
            )
        if self.max_lines < 0:
            raise UsageError(f"--max_lines must be >= 0 (0: all), got {self.max_lines}")
        text_input.line_encoding(self.input_encoding)


define_flags = cli.settings_flags(VocabSettings, required=("input_files", "output_file"))


def run_from_flags(flag_values: flags.FlagValues = flags.FLAGS, beam_args: Sequence[str] = ()) -> list[str]:
    settings = cli.settings_from_flags(VocabSettings, flag_values)
    if beam_args and not settings.runner:
        raise UsageError(
            f"unknown flag(s) or argument(s) {' '.join(beam_args)}: see --helpshort for this program's flags "
            "(Beam's pipeline options go with --runner)"
        )
    return build_vocab(**dataclasses.asdict(settings), beam_args=beam_args)


def main(flag_values: flags.FlagValues, args: Sequence[str]) -> None:
    output_file = os.path.abspath(flag_values.output_file)
    print(f"output_file: {output_file}", flush=True)  # on stderr, as the progress (cli.run)
    if flag_values.runner and not flag_values.verbose:
        from pipelines.beam import quiet_logs

        args = quiet_logs(args)
    run_from_flags(flag_values, args)
    cli.result(f"wrote {output_file}")


def command() -> None:
    """The `bert-tf-build-vocab` command (setup.py's entry point), also `python -m pipelines.build_vocab`."""
    cli.run(main, define_flags, pass_unknown_flags=True)


if __name__ == "__main__":
    command()
