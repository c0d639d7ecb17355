"""The demo's last act: mask a word of a corpus sentence and show the model's guesses."""

from __future__ import annotations

import keras
import numpy as np

from bert_tf.tokenization import BertTokenizer
from bert_tf.training.inputs import InputError


def fill_mask_demo(
    model,
    vocab_file: str,
    lower_case: bool,
    corpus_file: str,
    top_k: int = 5,
    masked_lm_accuracy: float | None = None,
):
    """Masks a word of a corpus sentence and prints the model's top guesses for it, where
    the answer ranks among them all, and what a model of the demo's size can be expected to
    get right (`masked_lm_accuracy`: the run's last; it often misses a word like this one)."""
    tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)
    sentence, tokens, position = _pick_sentence(tokenizer, corpus_file)
    ids = [tokenizer.cls_id, *tokens, tokenizer.sep_id]
    answer = ids[position]
    ids[position] = tokenizer.mask_id
    features = {
        "input_ids": np.array([ids], "int32"),
        "input_mask": np.ones([1, len(ids)], "int32"),
        "segment_ids": np.zeros([1, len(ids)], "int32"),
        "masked_lm_positions": np.array([[position]], "int32"),
    }
    logits = keras.ops.cast(model(features, training=False)["mlm_logits"][0, 0], "float32")
    probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(logits))
    ranking = probabilities.argsort()[::-1]
    best = ranking[:top_k]
    rank = int(np.flatnonzero(ranking == answer)[0]) + 1
    vocab = tokenizer.vocab
    masked_text = " ".join(vocab[i] for i in ids[1:-1]).replace(" ##", "")
    guesses = [(vocab[i], float(probabilities[i])) for i in best]
    print(f"\nfill the mask: {masked_text}")
    print(
        f"  answer: {vocab[answer]} (the model's guess number {rank} of {len(vocab)}, "
        f"probability {probabilities[answer]:.2f})"
    )
    print("  model:  " + ", ".join(f"{token} ({p:.2f})" for token, p in guesses))
    if masked_lm_accuracy is not None:
        print(
            f"  (a model of the demo's size gets {masked_lm_accuracy:.0%} of masked pieces right after these minutes "
            "on a CPU: mostly frequent words and the corpus' set phrases, so a miss here is expected; "
            "docs/pretraining.md#what-to-expect)"
        )
    return guesses


def _pick_sentence(tokenizer, corpus_file: str):
    """A corpus sentence of 8-30 pieces with a whole word (a single piece) to mask."""
    vocab = tokenizer.vocab
    with open(corpus_file, encoding="utf-8") as lines:
        for line in lines:
            sentence = line.strip()
            if not sentence:
                continue
            tokens = [int(t) for t in tokenizer.tokenize([sentence])[0].numpy()]
            if not 8 <= len(tokens) <= 30:
                continue
            for index in range(len(tokens) // 2, len(tokens) - 1):
                piece, following = vocab[tokens[index]], vocab[tokens[index + 1]]
                if piece.isalpha() and len(piece) > 3 and not following.startswith("##"):
                    return sentence, tokens, index + 1  # +1 for [CLS]
    raise InputError(f"no sentence of 8-30 pieces in {corpus_file} to fill a [MASK] in")
