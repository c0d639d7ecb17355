"""The original feature rules in plain Python: the independent reference of the preprocessors.

Transcriptions of google-research/bert's run_classifier.py (`_truncate_seq_pair` and the
`[CLS] A [SEP] B [SEP]` layout), run_squad.py (doc tokens, query truncation, windows every
doc_stride, the max-context rule, the answer mapping with `_improve_answer_span`) and
the first-piece labels of BERT NER fine-tuning, over word-piece ids from the toolkit's
tokenizer (whose own rules are tested in tests/test_tokenization.py).
"""

from __future__ import annotations

import random
import unicodedata

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


def doc_spans(num_pieces, max_doc, doc_stride):
    """run_squad's `doc_spans`: (start, length) of each window over `num_pieces` pieces."""
    spans, offset = [], 0
    while offset < num_pieces:
        length = min(num_pieces - offset, max_doc)
        spans.append((offset, length))
        if offset + length == num_pieces:
            break
        offset += min(length, doc_stride)
    return spans


def max_context_span(spans, position):
    """The window (index into `spans`) where piece `position` has the most context."""
    return next(index for index in range(len(spans)) if _check_is_max_context(spans, index, position))


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
    spans = doc_spans(len(doc_ids), max_seq_length - len(query) - 3, doc_stride)
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


# --- run_squad.py's write_predictions and get_final_text ------------------------------


def get_final_text(pred_text, orig_text, basic_tokenize):
    """run_squad's get_final_text; `basic_tokenize` is its BasicTokenizer(...).tokenize."""
    tok_text = " ".join(basic_tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        return orig_text
    end_position = start_position + len(pred_text) - 1

    def strip_spaces(text):
        kept, ns_to_s = [], {}
        for index, char in enumerate(text):
            if char == " ":
                continue
            ns_to_s[len(kept)] = index
            kept.append(char)
        return "".join(kept), ns_to_s

    orig_ns_text, orig_ns_to_s = strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s = strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        return orig_text
    tok_s_to_ns = {index: ns for ns, index in tok_ns_to_s.items()}
    orig_start = orig_ns_to_s.get(tok_s_to_ns[start_position]) if start_position in tok_s_to_ns else None
    if orig_start is None:
        return orig_text
    orig_end = orig_ns_to_s.get(tok_s_to_ns[end_position]) if end_position in tok_s_to_ns else None
    if orig_end is None:
        return orig_text
    return orig_text[orig_start : orig_end + 1]


def _best_indexes(logits, n_best_size):
    return [index for index, _ in sorted(enumerate(logits), key=lambda x: x[1], reverse=True)][:n_best_size]


def squad_predictions(
    examples,
    features,
    starts,
    ends,
    n_best_size,
    max_answer_length,
    basic_tokenize,
    version_2_with_negative=False,
    null_score_diff_threshold=0.0,
):
    """run_squad's write_predictions -> (predictions, null score diffs). Logits are lists
    of Python floats over each feature's tokens. Where the original writes "empty" (no
    valid span) or fails (SQuAD 2.0 without a span in the n-best list), this gives ""
    (and a diff of 0.0), as bert_tf does."""
    predictions, diffs = {}, {}
    for example_index, example in enumerate(examples):
        rows = [
            (f, s, e)
            for f, s, e in zip(features, starts, ends, strict=True)
            if f.example_index == example_index
        ]
        prelim, score_null, null_start, null_end = [], 1000000, 0, 0
        for number, (feature, start_logits, end_logits) in enumerate(rows):
            if version_2_with_negative and start_logits[0] + end_logits[0] < score_null:
                score_null = start_logits[0] + end_logits[0]
                null_start, null_end = start_logits[0], end_logits[0]
            for start in _best_indexes(start_logits, n_best_size):
                for end in _best_indexes(end_logits, n_best_size):
                    if start >= len(feature.tokens) or end >= len(feature.tokens):
                        continue
                    if start not in feature.token_to_orig_map or end not in feature.token_to_orig_map:
                        continue
                    if not feature.token_is_max_context.get(start, False):
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    prelim.append((number, start, end, start_logits[start], end_logits[end]))
        if version_2_with_negative:
            prelim.append((None, 0, 0, null_start, null_end))
        prelim.sort(key=lambda p: p[3] + p[4], reverse=True)
        seen, nbest = set(), []
        for number, start, end, start_logit, end_logit in prelim:
            if len(nbest) >= n_best_size:
                break
            if start > 0:
                feature = rows[number][0]
                tok_text = " ".join(feature.tokens[start : end + 1]).replace(" ##", "").replace("##", "")
                tok_text = " ".join(tok_text.strip().split())
                first, last = feature.token_to_orig_map[start], feature.token_to_orig_map[end]
                orig_text = " ".join(example.doc_tokens[first : last + 1])
                text = get_final_text(tok_text, orig_text, basic_tokenize)
                if text in seen:
                    continue
            else:
                text = ""
            seen.add(text)
            nbest.append((text, start_logit, end_logit))
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0][0] if nbest else ""
            continue
        best = next((entry for entry in nbest if entry[0]), None)
        if best is None:
            predictions[example.qas_id], diffs[example.qas_id] = "", 0.0
            continue
        diffs[example.qas_id] = score_null - best[1] - best[2]
        predictions[example.qas_id] = "" if diffs[example.qas_id] > null_score_diff_threshold else best[0]
    return predictions, diffs


# --- the original run_classifier.py's features ------------------------------------------

CLS, SEP, PAD = 101, 102, 0  # the uncased vocab's


def original_features(tokens_a, tokens_b, max_seq_length):
    """input_ids/input_mask/segment_ids as the original convert_single_example builds them."""
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b is not None else None
    if tokens_b is not None:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
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


# --- the original BasicTokenizer and WordpieceTokenizer, one character at a time -----------
# A plain-Python restatement of google-research/bert's tokenization.py rules (whitespace,
# control and punctuation classes, CJK spacing, accent stripping when uncased, greedy
# longest-match-first WordPiece with a 200-character [UNK] rule), and random text of the
# characters that test them.

_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # fmt: skip


def _reference_is_punctuation(char: str) -> bool:
    code_point = ord(char)
    if 33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96 or 123 <= code_point <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def reference_words(text: str | bytes, lower_case: bool) -> list[str]:
    """BasicTokenizer of the original: clean, space CJK, split, (lower, NFD, drop Mn), split punctuation."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "ignore")
    cleaned = []
    for char in text:
        category = unicodedata.category(char)
        if char in "\t\n\r" or category == "Zs":
            cleaned.append(" ")
        elif char in "\x00\ufffd" or category in ("Cc", "Cf"):
            continue
        elif any(lo <= ord(char) <= hi for lo, hi in _CJK):
            cleaned.append(f" {char} ")
        else:
            cleaned.append(char)
    words = []
    for token in "".join(cleaned).split():  # str.split(): U+2028, U+2029 split here
        if lower_case:
            token = unicodedata.normalize("NFD", token.lower())
            token = "".join(char for char in token if unicodedata.category(char) != "Mn")
        current = ""
        for char in token:
            if _reference_is_punctuation(char):
                words += [current, char] if current else [char]
                current = ""
            else:
                current += char
        if current:
            words.append(current)
    return words


def reference_wordpiece(word: str, vocab, max_chars: int = 200) -> list[str]:
    """Greedy longest-match-first; any uncovered part or an over-long word makes the word [UNK]."""
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces


class ReferenceTokenizer:
    """The original FullTokenizer's ids, from the two functions above."""

    def __init__(self, vocab: list[str], lower_case: bool):
        self.ids = {token: index for index, token in enumerate(vocab)}
        self.lower_case = lower_case

    def __call__(self, text: str | bytes) -> list[int]:
        words = reference_words(text, self.lower_case)
        return [self.ids[piece] for word in words for piece in reference_wordpiece(word, self.ids)]


_INTERESTING = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "".join(chr(c) for c in range(33, 127)),
    " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2007\u200a\u2028\u2029\u202f\u205f\u3000",
    "\x00\x01\x1b\x7f\x9f\xad\u200b\u200c\u200d\u200e\u2060\ufeff\ufffd\U000e0001",  # Cc, Cf, NUL, FFFD
    "éÉèàçñÑöÖüÜßẞÅåøØœŒĳĲǅǈﬁﬂİıŉǰΐ",  # accents, ligatures, special casing
    "ΑΒΓΣσςΆΈάέΰΣΣ",  # Greek, final sigma
    "АБВГДабвгдЁё",
    "\u0300\u0301\u0308\u0327\u0345\u20dd\u0903\u093e\U0001d165\u302e\u0488",  # Mn, Mc, Me
    "中文字符國語丽\u3400\u4dbf\U00020000\U0002a6df\U0002b740\U0002ce00\uf900\ufa6a\U0002f800",
    "한국어가힣ㄱㅏ\u1100\u1161",  # Hangul (not CJK), NFD splits syllables
    "ひらがなカタカナｶﾀｶﾅー",  # kana (not CJK)
    "،؛؟٪۔।॥।「」『』【】〈〉《》〔〕…‰′″‹›«»¡¿§¶†‡•‣⁂",  # P* punctuation
    "€$£¥₹♡♥→←∑∞±×÷°©®™¬¦^`~|+<=>",  # symbols (S*): not split unless ASCII
    "\ue000\uf8ff\U000f0000\U0010fffd",  # private use (Co)
    "\u0378\u0379\U0001fffe\U000effff",  # unassigned (Cn)
    "\u1fef\u1fee\u037e\u0387\u2126\u212a\u212b",  # singleton decompositions into punctuation / letters
    "\u2c2f\ua7c0\ua7d0\U00010570\U00010585\U0001e900",  # case pairs newer than some ICU versions
    "[MASK][CLS][SEP][UNK]##",
]


def random_text(rng: random.Random, max_length: int = 30) -> str:
    chars = []
    for _ in range(rng.randint(0, max_length)):
        roll = rng.random()
        if roll < 0.05:
            code_point = rng.randint(0, 0x10FFFF)
            chars.append(chr(code_point) if not 0xD800 <= code_point <= 0xDFFF else " ")
        elif roll < 0.15:
            chars.append(" ")
        else:
            chars.append(rng.choice(rng.choice(_INTERESTING)))
    return "".join(chars)


def random_bytes(rng: random.Random) -> bytes:
    """Random text with invalid UTF-8 (stray continuation bytes, truncated sequences, surrogates) mixed in."""
    pieces = []
    for _ in range(rng.randint(0, 8)):
        pieces.append(random_text(rng, 6).encode("utf-8"))
        pieces.append(
            rng.choice(
                [
                    b"\x80",
                    b"\xbf",
                    b"\xc0\xaf",
                    b"\xe4\xb8",
                    b"\xed\xa0\x80",
                    b"\xf0\x9f\x98",
                    b"\xff",
                    b"\xf4\x90\x80\x80",
                    b"\xc3",
                    b"\xe2\x82",
                    bytes([rng.randint(128, 255)]),
                ]  # fmt: skip
            )
        )
    return b"".join(pieces)
