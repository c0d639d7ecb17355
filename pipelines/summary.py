"""What a run of the generator read and wrote, one-process (`pipelines.generate`) or on
Beam (`pipelines.beam.generate`): its `Summary`, the `COUNTERS` it keeps, and the warning
they share. Imports no TensorFlow, so that a Beam launcher loads none.
"""

from __future__ import annotations

import dataclasses
import logging

from pipelines import text_input

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Summary(text_input.ReadStats):
    """What a run read (the first pass's `ReadStats`: files, bytes, lines, ...) and wrote."""

    empty_sentences: int = 0
    empty_documents: int = 0
    single_sentence_documents: int = 0
    instances: int = 0
    random_next: int = 0
    tokens: int = 0
    masked_lm_predictions: int = 0
    output_files: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def lines_of_text(self) -> list[str]:
        per_pass = "(per pass over the input)"
        text = [
            f"read {self.files} files, {self.bytes / 1e6:.1f} MB, {self.lines} lines, {self.documents} documents",
            f"wrote {self.instances} instances ({self.tokens} tokens, {self.masked_lm_predictions} masked-LM "
            f"predictions, {100 * self.random_next / max(self.instances, 1):.2f}% random next) to "
            f"{len(self.output_files)} files in {self.seconds:.1f} s",
        ]
        skipped = [
            (
                self.invalid_utf8_lines,
                "lines with invalid UTF-8 (bad bytes replaced, then dropped by the tokenizer)",
            ),
            (
                self.long_lines_cut,
                f"lines longer than {text_input.DEFAULT_MAX_LINE_BYTES} bytes cut to that length",
            ),
            (self.empty_sentences, f"lines that tokenize to nothing, skipped {per_pass}"),
            (self.empty_documents, f"documents left empty by those, skipped {per_pass}"),
            (
                self.single_sentence_documents,
                f"one-sentence documents, used only as random-next text (no next sentence to pair with) {per_pass}",
            ),
            (len(self.empty_files), "empty input files: " + ", ".join(self.empty_files)),
        ]
        text += [f"  {count} {why}" for count, why in skipped if count]
        return text


COUNTERS = (
    "instances",
    "random_next",
    "tokens",
    "masked_lm_predictions",
    "empty_sentences",
    "empty_documents",
    "single_sentence_documents",
)


def warn_if_single_document(summary: Summary) -> None:
    """One corpus document: every random-next segment came from that same document; say so."""
    if summary.documents == 1:
        logger.warning(
            "the corpus has a single document, so every random-next segment was drawn from that same document "
            "(NSP then only tells near from far text); separate documents with blank lines"
        )
