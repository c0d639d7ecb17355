"""Where bert_tf keeps what it derives once and reuses (the XDG base-directory convention).

$BERT_TF_CACHE, else $XDG_CACHE_HOME/bert_tf, else ~/.cache/bert_tf.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The cache directory (created): `override`, else $BERT_TF_CACHE, else
    $XDG_CACHE_HOME/bert_tf, else ~/.cache/bert_tf (an empty variable counts as unset)."""
    xdg_cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    path = Path(override or os.environ.get("BERT_TF_CACHE") or Path(xdg_cache) / "bert_tf")
    path.mkdir(parents=True, exist_ok=True)
    return path
