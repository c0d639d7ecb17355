"""The settings of `python -m pipelines.create_pretraining_data` (`GenerationConfig`, one
field per flag), apart from the generator so that the command parses its flags before
loading TensorFlow.

Example:

>>> from pipelines.settings import GenerationConfig
>>> GenerationConfig(input_file="corpus.txt", output_file="out.tfrecord", vocab_file="vocab.txt").dupe_factor
10
"""

from __future__ import annotations

import dataclasses
import math

from bert_tf.cli import setting
from bert_tf.errors import UsageError
from pipelines import segmenters, text_input

# Records shuffled together (serialized, ~0.7 KB each at length 128): the bound on memory
# that replaces the original's shuffle of all instances in memory.
DEFAULT_SHUFFLE_BUFFER_SIZE = 50_000
# Beyond half the tokens masked there is too little context left to predict them from.
MAX_MASKED_LM_PROB = 0.5
ORIGINAL_MAX_PREDICTIONS = 20  # the original generator's default


def predictions_for(max_seq_length: int, masked_lm_prob: float) -> int:
    """The default max_predictions_per_seq: what `masked_lm_prob` of a full sequence masks,
    rounded up (20 at 128 and 0.15, as the original recipe; 39 at 128 and 0.3).

    >>> predictions_for(128, 0.15), predictions_for(512, 0.15), predictions_for(128, 0.3)
    (20, 77, 39)
    """
    return max(1, math.ceil(round(max_seq_length * masked_lm_prob, 6)))


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """The flags of the original create_pretraining_data.py, plus some of ours."""

    input_file: str = dataclasses.field(metadata={"help": "Input raw text file(s): comma-separated globs."})
    output_file: str = dataclasses.field(
        metadata={
            "help": "Output TFRecord file(s): comma-separated, written round-robin; with --runner, the prefix "
            "of the shards PREFIX-00000-of-000NN."
        }
    )
    vocab_file: str = dataclasses.field(
        metadata={"help": "The vocabulary file that the BERT model was trained on."}
    )
    do_lower_case: bool = setting(True, "Lower-case the input (True for uncased models).")
    do_whole_word_mask: bool = setting(False, "Mask whole words (a piece and its ## continuations).")
    max_seq_length: int = setting(128, "Maximum sequence length.")
    max_predictions_per_seq: int | None = setting(
        None,
        "Maximum number of masked-LM predictions per sequence (default: the original's 20, or max_seq_length x "
        "masked_lm_prob rounded up where that is more).",
    )
    random_seed: int = setting(12345, "Random seed: the same flags and seed give byte-identical files.")
    dupe_factor: int = setting(10, "Number of passes over the input (each with different pairs and masks).")
    masked_lm_prob: float = setting(0.15, "Masked LM probability (at most 0.5).")
    next_sentence_prediction: bool = setting(
        True,
        "Make next-sentence pairs (the original); false: masked-LM-only records of whole sentences across "
        "documents filling --max_seq_length (RoBERTa's FULL-SENTENCES), with no next_sentence_labels.",
    )
    short_seq_prob: float = setting(0.1, "Probability of a target length shorter than the maximum.")
    # Ours: write unmasked records that pretraining_dataset masks afresh every epoch.
    dynamic_masking: bool = setting(
        False, "Write unmasked records; pipelines.pretraining_dataset masks them afresh each epoch."
    )
    shuffle_buffer_size: int = setting(
        DEFAULT_SHUFFLE_BUFFER_SIZE, "Records shuffled together (bounds memory)."
    )
    input_encoding: str | None = setting(
        None,
        "The input's text encoding (latin-1, cp1252, ...; default UTF-8, and input that is not UTF-8 is refused "
        "with the fix).",
    )
    accept_non_text: bool = setting(
        False,
        "Use the input even if some lines do not decode (their bad bytes dropped) or most of them are not "
        "text (no word pieces).",
    )
    overwrite: bool = setting(False, "Replace existing --output_file files.")
    # Ours: a name from pipelines.segmenters.SEGMENTERS, or (from Python) a callable from
    # text to (start, end) word spans.
    word_segmenter: str | segmenters.Segmenter | None = setting(
        None,
        "With --do_whole_word_mask: segment CJK text into words with this segmenter (jieba) and mask all "
        'characters of a word together; pip install "bert_tf[chinese]".',
    )

    # Ours: the same program as an Apache Beam pipeline (pipelines.beam.generate).
    runner: str | None = setting(
        None,
        "Run as an Apache Beam pipeline on this runner (DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, "
        "PortableRunner, ...); Beam's pipeline options follow as flags. Without it: one process, no Beam.",
    )
    num_output_shards: int = setting(
        0, "With --runner: the number of output shards (0: one per 100 MB of input text per pass)."
    )

    def __post_init__(self) -> None:
        if self.max_predictions_per_seq is None and 0 < self.masked_lm_prob <= MAX_MASKED_LM_PROB:
            # frozen: the default follows the length and the masking rate
            predictions = max(
                ORIGINAL_MAX_PREDICTIONS, predictions_for(self.max_seq_length, self.masked_lm_prob)
            )
            object.__setattr__(self, "max_predictions_per_seq", predictions)

    def validate(self) -> None:
        problems = []
        if self.max_seq_length < 5:
            problems.append(f"max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP]), got {self.max_seq_length}")
        if (
            self.max_predictions_per_seq is not None
            and not 1 <= self.max_predictions_per_seq <= self.max_seq_length
        ):
            problems.append(
                f"max_predictions_per_seq must be in [1, max_seq_length={self.max_seq_length}], got {self.max_predictions_per_seq}"
            )
        if self.dupe_factor < 1:
            problems.append(f"dupe_factor must be >= 1, got {self.dupe_factor}")
        if not 0.0 < self.masked_lm_prob <= MAX_MASKED_LM_PROB:
            problems.append(
                f"masked_lm_prob must be in (0, {MAX_MASKED_LM_PROB}], got {self.masked_lm_prob} (the original "
                "masks 0.15; MosaicBERT 0.3)"
            )
        if not 0.0 <= self.short_seq_prob <= 1.0:
            problems.append(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.shuffle_buffer_size < 1:
            problems.append(f"shuffle_buffer_size must be >= 1, got {self.shuffle_buffer_size}")
        if self.num_output_shards < 0:
            problems.append(f"num_output_shards must be >= 0, got {self.num_output_shards}")
        if self.num_output_shards and not self.runner:
            problems.append(
                "num_output_shards applies with --runner; without it, name each output file in --output_file"
            )
        if not [o for o in self.output_file.split(",") if o.strip()]:
            problems.append(f"output_file names no file: {self.output_file!r}")
        problems += segmenters.setting_problems(
            self.word_segmenter, whole_word_mask=self.do_whole_word_mask, dynamic_masking=self.dynamic_masking
        )
        if problems:
            raise UsageError("; ".join(problems))
        text_input.line_encoding(self.input_encoding)
