"""`--extend_vocab`: a released checkpoint's vocab grown with its new corpus' words.

Domain-adaptive pretraining continues a released model on a domain's text; words the
domain uses often and the released vocab splits into many pieces (or cannot spell) get
tokens of their own (`pipelines.vocab_extension` picks them). They go into the vocab's
`[unusedN]` slots first, so ids and the embedding shape stay those of the release, and
after its last token only with `--extend_vocab_append` (the config's vocab_size grows).
Each new token's embedding row, and its masked-LM output bias, starts as the mean of
those of the pieces the old vocab split the word into, so the model starts from what it
knew of the word.

The extended vocab is learnt into the cache and kept by the run in model_dir/vocab.txt;
a rerun (a resume) uses that one and restores the weights from the run's checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import keras
import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.config import BertConfig
from bert_tf.tokenization import BertTokenizer, load_vocab
from pipelines import build_vocab, vocab_extension


@dataclasses.dataclass(frozen=True)
class GrownVocab:
    """What the run needs to start from the checkpoint with the extended vocab."""

    vocab_file: str
    config: BertConfig  # the run's: vocab_size grown when words were appended
    checkpoint_config: BertConfig  # the checkpoint's own
    new_rows: dict[int, list[int]]  # new token id -> the ids of the pieces its word had


def extend_for_run(
    settings, config: BertConfig, vocab_file: str, files: list[str], model_dir: str, resuming: bool = False
):
    """The run's vocab and config with `settings.extend_vocab` domain words (a `GrownVocab`),
    or, when model_dir already holds the run's extended vocab and a run to resume
    (`resuming`), that vocab and config (no new rows: the run resumes from its own weights)."""
    stored = fileio.join(model_dir, "vocab.txt")
    if fileio.isfile(stored) and resuming:
        return GrownVocab(stored, config.replace(vocab_size=len(load_vocab(stored))), config, {})
    vocab = load_vocab(vocab_file)
    count, append = settings.extend_vocab, settings.extend_vocab_append
    vocab_extension.check_room(vocab, count, append, vocab_file)
    stats = [(fileio.abspath(f), fileio.size(f), tf.io.gfile.stat(f).mtime_nsec) for f in files]
    key = json.dumps([fileio.read_text(vocab_file), stats, count, append, settings.do_lower_case])
    target = settings_cache(settings) / f"extended_vocab_{hashlib.sha256(key.encode()).hexdigest()[:12]}.txt"
    tokenizer = BertTokenizer(vocab_file, lower_case=settings.do_lower_case)
    if target.exists():
        extended = load_vocab(str(target))
        placed = {
            index: token
            for index, token in enumerate(extended)
            if index >= len(vocab) or token != vocab[index]
        }
    else:
        counts = build_vocab.count_words(
            files, lower_case=settings.do_lower_case, progress=False, encoding=settings_encoding(settings)
        )
        chosen = vocab_extension.words_to_add(counts, tokenizer, count)
        extended, placed = vocab_extension.extend(vocab, [word for word, _, _ in chosen], append)
        shown = ", ".join(f"{word} ({pieces} pieces, {seen:,}x)" for word, seen, pieces in chosen[:8])
        print(
            f"--extend_vocab={count}: {len(chosen)} words of the corpus that the vocab splits into 2+ pieces "
            f"(or cannot spell), by pieces saved: {shown}{', ...' if len(chosen) > 8 else ''}",
            flush=True,
        )
        build_vocab.write_vocab(extended, str(target))
    in_slots = sum(index < len(vocab) for index in placed)
    print(
        f"extended vocab: {in_slots} words in [unusedN] slots, {len(placed) - in_slots} appended "
        f"({len(extended)} tokens); the run keeps it as {fileio.abspath(stored)}",
        flush=True,
    )
    words = [placed[index] for index in sorted(placed)]
    old_pieces = [row.tolist() for row in tokenizer.tokenize(words).numpy()] if words else []
    new_rows = dict(zip(sorted(placed), old_pieces, strict=True))
    return GrownVocab(str(target), config.replace(vocab_size=len(extended)), config, new_rows)


def settings_cache(settings):
    from bert_tf.training.settings import cache_dir  # lazy: settings imports this package

    return cache_dir(settings)


def settings_encoding(settings) -> str:
    from pipelines.text_input import line_encoding

    return line_encoding(settings.input_encoding)


def load_grown(model, grown: GrownVocab | None, load) -> None:
    """Loads the start checkpoint into `model` with `load(a_model)`: directly where no vocab
    grew (`grown` None or without new rows); else into a model of the checkpoint's own vocab,
    then every weight copied into `model`, whose word embeddings and output bias may have
    more rows, each new token's rows the mean of its old pieces' rows."""
    if grown is None or not grown.new_rows:
        load(model)
        return
    from bert_tf.models import BertPretrainer
    from bert_tf.models.pretrainer import example_features

    source = BertPretrainer(grown.checkpoint_config)
    source(example_features(1, 8, 2))
    load(source)
    for old, new in zip(source.weights, model.weights, strict=True):
        value = keras.ops.convert_to_numpy(old)
        missing = new.shape[0] - value.shape[0] if value.ndim else 0
        if missing:  # appended tokens: word_embeddings [vocab, hidden] and output_bias [vocab]
            value = np.concatenate([value, np.zeros((missing, *value.shape[1:]), value.dtype)])
        new.assign(value)
    for variable in (model.encoder.embeddings.word_embeddings, model.masked_lm_head.output_bias):
        value = np.array(keras.ops.convert_to_numpy(variable))
        for index, pieces in grown.new_rows.items():
            value[index] = value[pieces].mean(axis=0)
        variable.assign(value)
