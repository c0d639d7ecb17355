"""The sentence-embedding family: one vector per text, for search, clustering and retrieval.

- `family.py`: `SentenceEmbeddingFamily` (pairs with in-batch negatives, scored pairs);
- `model.py`: `BertSentenceEncoder` (pooling and normalization on the encoder, `encode`);
- `preprocessor.py`: texts -> features [batch, texts, length];
- `losses.py`: MultipleNegativesRankingLoss, CoSENT and cosine-similarity losses;
- `metrics.py`: MRR@10 and recall@k of retrieval, Spearman of scored pairs;
- `folder.py`: sentence-transformers folders, read and written.
"""

_EXPORTS = {"SentenceEmbeddingFamily": "family", "BertSentenceEncoder": "model"}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
