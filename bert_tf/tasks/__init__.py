"""Fine-tuning: one package per task family, and what the families share.

- `classification/`, `span/`, `token/`, `choice/`: the built-in task families (GLUE and
  your own tables, SQuAD, CoNLL NER, SWAG), each everything particular to it: its options,
  readers, head, loss, metrics, post-processing and serving programs;
- `family.py`: what every family shares (pipelines, counting, running a model) and the hooks
  a family defines; `registry.py`: the families by task, name and model class, yours too
  (`--task=MODULE:CLASS`; docs/task-families.md);
- `task_model.py`, `preprocessor.py`, `keras_api.py`: the Keras task models, which carry
  their preprocessor and take raw text; `recipe.py`: the fine-tuning optimizer;
- `runner.py`: the command line's driver (`python -m bert_tf.finetune`), `settings.py` its
  shared settings; `finetuned.py` the fine-tuned folder, `info.py` its task.json;
- `streams.py`, `python_inputs.py`, `features.py`, `metrics.py`, `tfds_sources.py`: the
  pieces the families build on.

Importing this package loads nothing heavy: `from bert_tf.tasks import settings` needs no
TensorFlow.
"""
