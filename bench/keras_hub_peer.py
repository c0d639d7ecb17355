"""keras-hub's `BertMaskedLM` at the size of a bert_tf `BertConfig`: the peer that the step
benchmarks (`train_step.py`, `gpu/pretrain_jax.py`) time bert_tf against."""

from __future__ import annotations


def keras_hub_masked_lm(config):
    """An untrained `keras_hub.models.BertMaskedLM` (masked LM only: keras-hub has no NSP head)
    with the layers, widths, heads, dropout and positions of `config`."""
    # Imported when called: keras-hub is needed only for this peer, not to import the benchmarks.
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
    )
    return keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
