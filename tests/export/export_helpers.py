"""Shared by the export tests: the original feature rules and the fresh-process loader."""

import json
import os
import subprocess
import sys

import numpy as np

LOADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "load_exported.py")
VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "bert_uncased_vocab.txt")

CLS, SEP, PAD = 101, 102, 0


def original_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """A transcription of the rule in the original run_classifier.py."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def original_features(tokens_a, tokens_b, max_seq_length):
    """input_ids/input_mask/segment_ids as the original convert_single_example builds them."""
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b is not None else None
    if tokens_b is not None:
        original_truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        tokens_a = tokens_a[: max_seq_length - 2]
    ids = [CLS] + tokens_a + [SEP]
    segments = [0] * len(ids)
    if tokens_b is not None:
        ids += tokens_b + [SEP]
        segments += [1] * (len(tokens_b) + 1)
    mask = [1] * len(ids)
    padding = max_seq_length - len(ids)
    return ids + [PAD] * padding, mask + [0] * padding, segments + [0] * padding


def run_in_fresh_process(calls: list, work_dir: str) -> dict:
    """Runs load_exported.py on `calls` in a new interpreter; returns its outputs.

    The child gets no PYTHONPATH and runs from `work_dir`, so bert_tf is importable only
    if installed; load_exported.py reports whether anything imported it.
    """
    request = os.path.join(work_dir, "request.json")
    output = os.path.join(work_dir, "outputs.npz")
    with open(request, "w", encoding="utf-8") as file:
        json.dump(calls, file)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [sys.executable, LOADER, request, output],
        cwd=work_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise AssertionError(f"fresh-process loader failed:\n{result.stderr[-4000:]}")
    with np.load(output) as arrays:
        return {key: arrays[key] for key in arrays.files}


def strings(values) -> dict:
    return {"string": list(values)}


def int32(values) -> dict:
    return {"int32": np.asarray(values).tolist()}
