"""What every task's data shares: the user-facing data error and the conversion counts.

Features themselves are made in the graph by `bert_tf.preprocessing`; the counts of what
it had to change (truncated or skipped examples) are kept here so the user can see them.

Example:

>>> ConversionStats(num_examples=3, num_truncated=1).as_dict()["num_truncated"]
1
"""

from __future__ import annotations

import dataclasses

from bert_tf.errors import BertTfError


class TaskDataError(BertTfError, ValueError):
    """Input data a user must fix; the message names the file, row and value."""


@dataclasses.dataclass
class ConversionStats:
    """What happened to the examples while they became features."""

    num_examples: int = 0
    num_features: int = 0
    num_truncated: int = 0  # examples cut to max_seq_length
    num_skipped: int = 0  # examples left out (e.g. SQuAD answers not found in the context)

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)
