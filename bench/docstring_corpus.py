"""A pretraining corpus of short English documents, built offline from installed Python code.

The docstrings of the standard library and of the packages installed beside bert_tf
(TensorFlow, PyTorch, transformers, NumPy, ...) are tens of MB of English prose about
software, in short documents: each docstring is one (its prose paragraphs, sentences split
as the embedded corpus splits them; doctest lines, indented blocks and reST field lines are
dropped; a docstring seen twice is kept once). The files are read in sorted order, so the
same installation gives the same corpus. Every 20th document goes to the held-out file.

    python bench/docstring_corpus.py --output_dir=/tmp/corpus --megabytes=11
    # -> /tmp/corpus/train.txt (one sentence per line, a blank line between documents),
    #    /tmp/corpus/heldout.txt
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import re
import sys
import sysconfig
import warnings
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.corpus import split_sentences  # noqa: E402

PACKAGES = ("transformers", "torch", "tensorflow", "keras", "numpy", "scipy", "sklearn", "pandas", "jax")
_FIELD = re.compile(r"^(:\w|\.\. |[A-Z][\w ]*:$|-{3,}|={3,}|Args|Returns|Raises|Example)")
HELD_OUT_EVERY = 20


def source_roots() -> list[Path]:
    """The standard library, then the installed packages of PACKAGES that exist."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])
    return [stdlib, *(site / name for name in PACKAGES if (site / name).is_dir())]


def docstrings(path: Path) -> Iterator[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node)
            if text:
                yield text


def prose(docstring: str) -> list[str]:
    """The sentences of a docstring's prose paragraphs."""
    paragraphs, current = [], []
    for line in docstring.splitlines():
        stripped = line.strip()
        if (
            not stripped
            or line.startswith((" ", "\t"))
            or stripped.startswith(">>>")
            or _FIELD.match(stripped)
        ):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        current.append(stripped)
    if current:
        paragraphs.append(" ".join(current))
    # Prose has letters and spaces: a paragraph that is mostly symbols is code or a table.
    prose_paragraphs = [
        p for p in paragraphs if len(p) > 20 and sum(c.isalpha() or c == " " for c in p) > 0.8 * len(p)
    ]
    return [s for p in prose_paragraphs for s in split_sentences(p)]


def documents() -> Iterator[list[str]]:
    seen = set()
    for root in source_roots():
        for path in sorted(root.rglob("*.py")):
            if "test" in path.parts or "tests" in path.parts:
                continue
            for text in docstrings(path):
                sentences = prose(text)
                if not sentences:
                    continue
                key = hashlib.sha1("\n".join(sentences).encode()).digest()
                if key not in seen:
                    seen.add(key)
                    yield sentences


def write(output_dir: str, megabytes: float) -> tuple[str, str]:
    os.makedirs(output_dir, exist_ok=True)
    train, heldout = os.path.join(output_dir, "train.txt"), os.path.join(output_dir, "heldout.txt")
    limit = int(megabytes * 1e6)
    written = 0
    with (
        open(train, "w", encoding="utf-8") as train_file,
        open(heldout, "w", encoding="utf-8") as heldout_file,
    ):
        for index, sentences in enumerate(documents()):
            text = "\n".join(sentences) + "\n\n"
            if index % HELD_OUT_EVERY == HELD_OUT_EVERY - 1:
                heldout_file.write(text)
                continue
            train_file.write(text)
            written += len(text.encode("utf-8"))
            if written >= limit:
                break
    return train, heldout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--megabytes", type=float, default=11.0, help="Size of train.txt.")
    args = parser.parse_args()
    train, heldout = write(args.output_dir, args.megabytes)
    for path in (train, heldout):
        text = Path(path).read_text(encoding="utf-8")
        documents = [d for d in text.split("\n\n") if d.strip()]
        print(f"{path}: {len(text.encode()) / 1e6:.1f} MB, {len(documents):,} documents")


if __name__ == "__main__":
    main()
