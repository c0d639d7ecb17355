"""SavedModel exports that load with TensorFlow and tensorflow-text alone, plus feature extraction.

One module per export kind: `preprocessor` (strings -> packed inputs), `encoder` (packed
inputs -> encoder outputs), `mlm` (fill-mask), `task` (fine-tuned models on raw strings);
`packing` holds the shared tf-text graph ops, `spans` the SQuAD windows and answer search
of the task export, `saving` the atomic export directory, `loading` the checked
checkpoint read, `exporter` the entry points
(`export_saved_model`, `export_from_model`) behind `python -m bert_tf.export`, and
`features` what `python -m bert_tf.extract_features` runs.
Kept import-free so that `import bert_tf.serving.saving` does not pull in TensorFlow models.
"""
