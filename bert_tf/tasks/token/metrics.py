"""NER's scores: entity-level precision, recall and F1 from seqeval's default mode, which
reads IOB entities as CoNLL-2003's conlleval script does."""

from __future__ import annotations

from collections.abc import Sequence


def ner_metrics(labels: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level precision, recall and F1, and tag accuracy, as conlleval scores them.

    seqeval's default mode reads entities by conlleval's chunk rules: the text after the
    first "-" of a tag is the entity type; an entity starts at a B- tag, at an I- tag
    after O (IOB1), and wherever the type changes; a sentence end closes it. A predicted
    entity is correct when its type, first and last word all match a gold one, and
    precision and recall are micro-averaged over all entities. For IOB1/IOB2 (and
    IOE1/IOE2) tags every figure is conlleval's. conlleval has no S- tag and reads
    "E-PER B-PER" as one entity; seqeval extends its rules to IOBES instead (an E- or S-
    tag ends an entity, a B- or S- tag always starts one), so IOBES tags are read as the
    scheme means them.
    """
    from seqeval import metrics as sq

    labels = [list(sentence) for sentence in labels]
    predictions = [list(sentence) for sentence in predictions]
    if len(labels) != len(predictions):
        raise ValueError(
            f"{len(labels)} labelled sentences but {len(predictions)} predicted; give one tag sequence per sentence"
        )
    for index, (gold, predicted) in enumerate(zip(labels, predictions, strict=True)):
        if len(gold) != len(predicted):
            raise ValueError(
                f"sentence {index} has {len(gold)} gold tags but {len(predicted)} predicted; predict one tag per word"
            )
    return {
        "precision": float(sq.precision_score(labels, predictions)),
        "recall": float(sq.recall_score(labels, predictions)),
        "f1": float(sq.f1_score(labels, predictions)),
        "accuracy": float(sq.accuracy_score(labels, predictions)),
    }
