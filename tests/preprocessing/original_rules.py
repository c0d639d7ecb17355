"""The original feature rules in plain Python: the independent reference of the preprocessors.

Transcriptions of google-research/bert's run_classifier.py (`_truncate_seq_pair` and the
`[CLS] A [SEP] B [SEP]` layout), run_squad.py (doc tokens, query truncation, windows every
doc_stride, the max-context rule, the answer mapping with `_improve_answer_span`) and
the first-piece labels of BERT NER fine-tuning, over word-piece ids from the toolkit's
tokenizer (whose own rules are tested in tests/test_tokenization.py).
"""

from __future__ import annotations

IGNORE = -1


def pieces_of(tokenizer, texts):
    return tokenizer.tokenize(list(texts)).to_list() if texts else []


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def classifier_features(tokenizer, text_a, text_b, max_seq_length):
    """(input_ids, segment_ids, truncated) without padding."""
    a = pieces_of(tokenizer, [text_a])[0]
    b = pieces_of(tokenizer, [text_b])[0] if text_b is not None else None
    before = len(a) + len(b or [])
    if b is not None:
        truncate_seq_pair(a, b, max_seq_length - 3)
    else:
        a = a[: max_seq_length - 2]
    ids = [tokenizer.cls_id, *a, tokenizer.sep_id]
    segments = [0] * len(ids)
    if b is not None:
        ids += [*b, tokenizer.sep_id]
        segments += [1] * (len(b) + 1)
    return ids, segments, len(a) + len(b or []) < before


def tagger_features(tokenizer, words, tags, label_list, max_seq_length):
    """(input_ids, label_ids, first-piece position of each word or -1, truncated)."""
    index = {tag: i for i, tag in enumerate(label_list)}
    ids, labels, positions, truncated = [tokenizer.cls_id], [IGNORE], [], False
    for pieces in pieces_of(tokenizer, words):
        pieces = pieces or [tokenizer.unk_id]  # a word of removed characters keeps a position
        if truncated or len(ids) + len(pieces) > max_seq_length - 1:
            truncated = True
            positions.append(-1)
            continue
        positions.append(len(ids))
        ids.extend(pieces)
        tag = tags[len(positions) - 1] if tags is not None else None
        labels.extend([index[tag] if tag is not None else IGNORE] + [IGNORE] * (len(pieces) - 1))
    return [*ids, tokenizer.sep_id], [*labels, IGNORE], positions, truncated


def _is_whitespace(char):
    return char in " \t\r\n" or ord(char) == 0x202F


def doc_tokens_of(context):
    """run_squad's whitespace split and each character's word."""
    doc_tokens, char_to_word, previous_is_whitespace = [], [], True
    for char in context:
        if _is_whitespace(char):
            previous_is_whitespace = True
        else:
            if previous_is_whitespace:
                doc_tokens.append(char)
            else:
                doc_tokens[-1] += char
            previous_is_whitespace = False
        char_to_word.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word


def _improve_answer_span(doc_ids, start, end, answer_ids):
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if doc_ids[new_start : new_end + 1] == answer_ids:
                return new_start, new_end
    return start, end


def _check_is_max_context(spans, span_index, position):
    best_score, best_index = None, None
    for index, (span_start, span_length) in enumerate(spans):
        end = span_start + span_length - 1
        if position < span_start or position > end:
            continue
        score = min(position - span_start, end - position) + 0.01 * span_length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return span_index == best_index


def squad_features(
    tokenizer, question, context, answer_text, answer_start, max_seq_length, doc_stride, max_query_length
):
    """Window dicts: input_ids, segment_ids, token_to_orig {position: word},
    token_is_max_context {position: bool}, start, end (training: answer_start not None)."""
    query = pieces_of(tokenizer, [question])[0][:max_query_length]
    doc_tokens, char_to_word = doc_tokens_of(context)
    tok_to_orig, orig_to_tok, doc_ids = [], [], []
    for i, pieces in enumerate(pieces_of(tokenizer, doc_tokens)):
        orig_to_tok.append(len(doc_ids))
        tok_to_orig.extend([i] * len(pieces))
        doc_ids.extend(pieces)
    training = answer_start is not None
    impossible = training and answer_start < 0
    if training and not impossible:
        start_word = char_to_word[answer_start]
        end_word = char_to_word[answer_start + len(answer_text) - 1]
        tok_start = orig_to_tok[start_word]
        tok_end = orig_to_tok[end_word + 1] - 1 if end_word < len(doc_tokens) - 1 else len(doc_ids) - 1
        tok_start, tok_end = _improve_answer_span(
            doc_ids, tok_start, tok_end, pieces_of(tokenizer, [answer_text])[0]
        )
    max_doc = max_seq_length - len(query) - 3
    spans, offset = [], 0
    while offset < len(doc_ids):
        length = min(len(doc_ids) - offset, max_doc)
        spans.append((offset, length))
        if offset + length == len(doc_ids):
            break
        offset += min(length, doc_stride)
    windows = []
    for span_index, (span_start, span_length) in enumerate(spans):
        ids = [tokenizer.cls_id, *query, tokenizer.sep_id]
        segments = [0] * len(ids)
        to_orig, max_context = {}, {}
        for i in range(span_length):
            position = span_start + i
            to_orig[len(ids)] = tok_to_orig[position]
            max_context[len(ids)] = _check_is_max_context(spans, span_index, position)
            ids.append(doc_ids[position])
            segments.append(1)
        ids.append(tokenizer.sep_id)
        segments.append(1)
        start = end = 0
        if training and not impossible:
            span_end = span_start + span_length - 1
            if span_start <= tok_start and tok_end <= span_end:
                start = tok_start - span_start + len(query) + 2
                end = tok_end - span_start + len(query) + 2
        windows.append(
            {
                "input_ids": ids,
                "segment_ids": segments,
                "token_to_orig": to_orig,
                "token_is_max_context": max_context,
                "start": start,
                "end": end,
            }
        )
    return windows
