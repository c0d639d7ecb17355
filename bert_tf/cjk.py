"""The code points BERT's tokenizer treats as CJK ideographs, apart from it (no TensorFlow):
`pipelines.segmenters` marks words over them in processes that load none."""

# Code point ranges the original treats as CJK ideographs (each gets spaces around it).
# Hangul and kana are not in them: they are written with spaces between words.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
