"""Keras 3 layers of BERT, written with `keras.ops` only (TensorFlow and JAX backends)."""

from bert_tf.layers.activations import gelu, gelu_exact, get_activation
from bert_tf.layers.attention import MASK_ADDER, BertSelfAttention, attention_bias
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.masked_lm_head import MaskedLMHead, gather_positions
from bert_tf.layers.next_sentence_head import NextSentenceHead
from bert_tf.layers.transformer_block import TransformerBlock

__all__ = [
    "MASK_ADDER",
    "BertEmbeddings",
    "BertSelfAttention",
    "MaskedLMHead",
    "NextSentenceHead",
    "TransformerBlock",
    "attention_bias",
    "gather_positions",
    "gelu",
    "gelu_exact",
    "get_activation",
]
