"""Where bert_tf keeps what it derives once and reuses: $BERT_TF_CACHE, else ~/.cache/bert_tf."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The cache directory (created): `override`, else $BERT_TF_CACHE, else ~/.cache/bert_tf."""
    path = Path(override or os.environ.get("BERT_TF_CACHE") or Path.home() / ".cache" / "bert_tf")
    path.mkdir(parents=True, exist_ok=True)
    return path
