r"""Fine-tune BERT on a task: `python -m bert_tf.finetune --task=NAME [flags]`.

Tasks: the GLUE tasks (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli), squad
(v1.1), squad_v2, ner (CoNLL-2003 files), swag (multiple choice), and classification /
regression on your own CSV, TSV or JSONL files. Hyperparameter flags are named as in the
original run_classifier.py / run_squad.py. For example, MRPC from the GLUE download:

    python -m bert_tf.finetune --task=mrpc --init_checkpoint=uncased_L-12_H-768_A-12 \
      --data_dir=glue_data/MRPC --output_dir=/tmp/mrpc --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3

writes /tmp/mrpc/eval_results.json ({"accuracy": ..., "f1": ..., "eval_loss": ...}),
/tmp/mrpc/MRPC.tsv (the GLUE submission) and /tmp/mrpc/model/ (the fine-tuned model).
Everything here is `bert_tf.tasks.runner.run(FinetuneSettings(...))` from Python.
"""

from __future__ import annotations

import os

# TensorFlow's C++ INFO and WARNING lines (CUDA probing, oneDNN notes) mean nothing to a
# user of this command; set TF_CPP_MIN_LOG_LEVEL=0 to see them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import dataclasses
import logging

from absl import app, flags

from bert_tf.tasks.adapters import TASKS
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.training import distribute

_DEFAULTS = FinetuneSettings(task="classification", output_dir="")


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines this command's flags on `flag_values`.

    Called only when the module runs as a program, so the CLIs (several define
    --init_checkpoint, --vocab_file, ...) can be imported side by side.
    """
    flags.DEFINE_enum("task", None, list(TASKS), "The task to fine-tune on.", flag_values=flag_values)
    flags.DEFINE_string(
        "output_dir",
        None,
        "Where eval_results.json, predictions and model/ are written.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "init_checkpoint",
        None,
        "Pretrained model: Google checkpoint dir, Hugging Face dir or ours; or the model/ "
        "folder of an earlier fine-tuning run, to evaluate, predict or train it further.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "bert_config_file",
        None,
        "Model config (bert_config.json path or a name such as bert_tiny): random "
        "initialisation without --init_checkpoint.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "vocab_file", None, "WordPiece vocab (default: the checkpoint's).", flag_values=flag_values
    )
    flags.DEFINE_bool(
        "do_lower_case",
        None,
        "Lower-case input (default: what the checkpoint says).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "train_file",
        None,
        "Training data (TSV/CSV/JSONL, SQuAD JSON, CoNLL or SWAG CSV).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "eval_file",
        None,
        "Evaluation data with labels; scored into eval_results.json.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "predict_file",
        None,
        "Data to predict (labels not needed); written in the official format.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "data_dir",
        None,
        "GLUE task directory as distributed (train.tsv, dev*.tsv, test*.tsv).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "tfds_name", None, "TFDS dataset, e.g. glue/mrpc, squad/v1.1, conll2003.", flag_values=flag_values
    )
    flags.DEFINE_string(
        "tfds_data_dir", None, "TFDS data directory (a prepared one works offline).", flag_values=flag_values
    )
    flags.DEFINE_string(
        "text_column",
        _DEFAULTS.text_column,
        "classification/regression: column of the text.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "text_b_column",
        None,
        "classification/regression: column of the second text of a pair.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "label_column",
        _DEFAULTS.label_column,
        "classification/regression: column of the label.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_seq_length",
        None,
        "Word pieces per sequence (default 384 for SQuAD, else 128).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "doc_stride", _DEFAULTS.doc_stride, "SQuAD: stride between context windows.", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "max_query_length",
        _DEFAULTS.max_query_length,
        "SQuAD: question pieces kept.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "n_best_size", _DEFAULTS.n_best_size, "SQuAD: candidates kept per question.", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "max_answer_length",
        _DEFAULTS.max_answer_length,
        "SQuAD: longest answer in pieces.",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "null_score_diff_threshold",
        _DEFAULTS.null_score_diff_threshold,
        "SQuAD 2.0: answer '' above this.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "train_batch_size", _DEFAULTS.train_batch_size, "Global training batch size.", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "eval_batch_size",
        _DEFAULTS.eval_batch_size,
        "Batch size of evaluation and prediction.",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "learning_rate", _DEFAULTS.learning_rate, "Peak learning rate of AdamW.", flag_values=flag_values
    )
    flags.DEFINE_float(
        "num_train_epochs",
        _DEFAULTS.num_train_epochs,
        "Epochs of training (may be fractional).",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "warmup_proportion",
        _DEFAULTS.warmup_proportion,
        "Fraction of steps of linear warmup.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "seed", _DEFAULTS.seed, "Random seed (initialisation, dropout, shuffling).", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "pad_to_multiple_of",
        _DEFAULTS.pad_to_multiple_of,
        "Dynamic padding: each batch is padded to its longest row rounded up to this multiple.",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "static_shapes",
        _DEFAULTS.static_shapes,
        "Pad every row to max_seq_length in fixed-size batches (always on TPUs).",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "length_buckets",
        _DEFAULTS.length_buckets,
        "Batch training rows of similar length together (less padding, less shuffling).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "shuffle_buffer_size",
        _DEFAULTS.shuffle_buffer_size,
        "Training examples held for shuffling (the data is streamed, never held whole).",
        flag_values=flag_values,
    )
    distribute.define_strategy_flags(flag_values)
    flags.adopt_module_key_flags(distribute, flag_values=flag_values)  # listed by --helpshort
    flags.DEFINE_bool(
        "save_model", True, "Save the fine-tuned model to OUTPUT_DIR/model.", flag_values=flag_values
    )
    flags.DEFINE_bool(
        "eval_train",
        False,
        "Also score the training data (train_* metrics in eval_results.json).",
        flag_values=flag_values,
    )
    flags.mark_flags_as_required(["task", "output_dir"], flag_values=flag_values)


def settings_from_flags(values=flags.FLAGS) -> FinetuneSettings:
    names = {field.name for field in dataclasses.fields(FinetuneSettings)}
    kwargs = {name: values[name].value for name in names if name in values}
    kwargs["bert_config"] = values.bert_config_file
    kwargs["lower_case"] = values.do_lower_case
    return FinetuneSettings(**kwargs)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    logging.getLogger("bert_tf").setLevel(logging.INFO)
    from bert_tf.tasks.runner import run

    results = run(settings_from_flags())
    for name, value in sorted(results.items()):
        print(f"{name} = {value:.4f}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
