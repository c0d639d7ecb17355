"""SavedModel and LiteRT exports that load without bert_tf, plus feature extraction.

One module per export kind: `preprocessor` (strings -> packed inputs), `encoder` (packed
inputs -> encoder outputs), `mlm` (fill-mask), `task` (a fine-tuned model on raw strings:
the program every family shares; each family's signatures live in its package),
`litert_conversion` (`--kind=tflite`: the LiteRT file of a fine-tuned model) and `litert`
(what the TensorFlow-free clients of those files share, and `litert.load`); `quantize` the
int8 encoder, `saving` the atomic export directory, `loading` the checked checkpoint read,
`exporter` the entry points (`export_saved_model`, `export_from_model`) behind
`python -m bert_tf.export`, and `features` what `python -m bert_tf.extract_features` runs.
Kept import-free so that `import bert_tf.serving.saving` does not pull in TensorFlow models.
"""
