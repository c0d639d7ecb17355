"""The settings of a fine-tuning run (light: importable without TensorFlow).

Example:

>>> from bert_tf.tasks.settings import FinetuneSettings
>>> FinetuneSettings(task="squad", output_dir="/tmp/squad").max_seq_length
384
"""

from __future__ import annotations

import dataclasses

from bert_tf import text_encoding
from bert_tf.cli import setting
from bert_tf.errors import UsageError
from bert_tf.training import precision

SQUAD_DOC_STRIDE = 128  # the original run_squad's
# How the windows of a long text combine (`bert_tf.preprocessing.windows.POOLINGS`; not
# imported here: this module loads without TensorFlow).
WINDOW_POOLINGS = ("mean", "max")


@dataclasses.dataclass
class FinetuneSettings:
    """Everything a fine-tuning run needs; the CLI flags map onto these one to one."""

    task: str = dataclasses.field(metadata={"help": "The task to fine-tune on."})
    output_dir: str = dataclasses.field(
        metadata={"help": "Where eval_results.json, predictions and model/ are written."}
    )
    init_checkpoint: str | None = setting(
        None,
        "Pretrained model: Google checkpoint dir, Hugging Face dir or ours (a pretraining model_dir: "
        "its export/); or the model/ folder of an earlier fine-tuning run, to evaluate, predict or "
        "train it further.",
    )
    # Without init_checkpoint (random init) both are needed; with it they override.
    bert_config: str | None = setting(
        None,
        "Model config (bert_config.json path or a name such as bert_tiny): random initialisation "
        "without --init_checkpoint.",
        flag="bert_config_file",
    )
    vocab_file: str | None = setting(None, "WordPiece vocab (default: the checkpoint's).")
    lower_case: bool | None = setting(  # None: what the checkpoint says (True if unknown)
        None, "Lower-case input (default: what the checkpoint says).", flag="do_lower_case"
    )
    train_file: str | None = setting(None, "Training data (TSV/CSV/JSONL, SQuAD JSON, CoNLL or SWAG CSV).")
    eval_file: str | None = setting(None, "Evaluation data with labels; scored into eval_results.json.")
    predict_file: str | None = setting(
        None, "Data to predict (labels not needed); written in the official format."
    )
    input_encoding: str | None = setting(
        None, "Text encoding of the data files (latin-1, cp1252, ...; default UTF-8, checked line by line)."
    )
    data_dir: str | None = setting(
        None, "GLUE task directory as distributed (train.tsv, dev*.tsv, test*.tsv)."
    )
    tfds_name: str | None = setting(None, "TFDS dataset, e.g. glue/mrpc, squad/v1.1, conll2003.")
    tfds_data_dir: str | None = setting(None, "TFDS data directory (a prepared one works offline).")
    text_column: str = setting("text", "classification/regression: column of the text.")
    text_b_column: str | None = setting(
        None, "classification/regression: column of the second text of a pair."
    )
    label_column: str = setting("label", "classification/regression: column of the label.")
    label_separator: str = setting(
        "|", "multi_label: what joins an example's labels in one CSV/TSV cell (JSONL takes a JSON list)."
    )
    threshold: float | None = setting(
        None,
        "multi_label: a label is predicted when its probability is above this (default 0.5, or the "
        "fine-tuned model's own); saved in task.json.",
    )
    class_weights: str | None = setting(
        None,
        "classification/multi_label: weigh the training loss per label: 'balanced' (scikit-learn's "
        "n_samples / (n_classes * count) from the training file; multi-label: negatives / positives "
        "of each label) or one weight per label, comma-separated, in label order.",
    )
    max_seq_length: int | None = setting(None, "Word pieces per sequence (default 384 for SQuAD, else 128).")
    doc_stride: int | None = setting(
        None,
        "Read texts longer than --max_seq_length as overlapping windows starting every N pieces: "
        "SQuAD's contexts (default 128); classification, regression and ner (default: off, long "
        "texts are cut), each window trained on with its text's labels and combined into one answer "
        "per text. Of a pair, the second text is windowed and the first kept whole.",
    )
    window_pooling: str | None = setting(  # None: mean, or what a fine-tuned --init_checkpoint used
        None,
        "classification/regression with --doc_stride: a text's logits are the mean or the max of its windows' "
        "(default: mean, or the fine-tuned model's own).",
        choices=WINDOW_POOLINGS,
    )
    max_query_length: int = setting(64, "SQuAD: question pieces kept.")
    n_best_size: int = setting(20, "SQuAD: candidates kept per question.")
    max_answer_length: int = setting(30, "SQuAD: longest answer in pieces.")
    null_score_diff_threshold: float = setting(0.0, "SQuAD 2.0: answer '' above this.")
    train_batch_size: int = setting(32, "Global training batch size.")
    eval_batch_size: int = setting(
        32,
        "Batch size of evaluation and prediction (the results do not depend on it; "
        "classification batches rows of similar length together, so larger batches cost no padding).",
    )
    learning_rate: float = setting(5e-5, "Peak learning rate of AdamW.")
    num_train_epochs: float = setting(3.0, "Epochs of training (may be fractional).")
    warmup_proportion: float = setting(0.1, "Fraction of steps of linear warmup.")
    seed: int = setting(12345, "Random seed (initialisation, dropout, shuffling).")
    strategy: str = "default"  # these three: the shared strategy flags
    tpu: str | None = None
    num_gpus: int = 0
    save_model: bool = setting(True, "Save the fine-tuned model to OUTPUT_DIR/model.")
    eval_train: bool = setting(  # did it fit?
        False, "Also score the training data (train_* metrics in eval_results.json)."
    )
    overwrite: bool = setting(False, "Replace the finished results of an earlier run in --output_dir.")
    # -- how training runs (the defaults are the original recipe's) ---------------------------
    mixed_precision: str = setting(
        precision.AUTO,
        "Keras dtype policy of training: float32, mixed_bfloat16 or mixed_float16 (with loss "
        "scaling); heads' logits stay float32. auto: mixed_bfloat16 on TPUs, recent GPUs and CPUs "
        "with bfloat16 matrix units (AMX), mixed_float16 on older GPUs, else float32.",
        choices=(precision.AUTO, *precision.POLICIES),
    )
    jit_compile: bool | None = setting(
        None, "Compile the training step with XLA (default: Keras' choice: on a GPU, not on a CPU)."
    )
    gradient_accumulation_steps: int = setting(
        1,
        "Average the gradients of this many micro-batches of train_batch_size / N before each "
        "update: the recipe of --train_batch_size in less memory.",
    )
    eval_every_steps: int | None = setting(
        None,
        "Score the eval data with the task's metrics every N updates during training "
        "(default: after every epoch; 0: only after training). Needs eval data.",
    )
    early_stopping_patience: int | None = setting(
        None, "Stop after this many evaluations in a row without a better main metric."
    )
    keep_best_model: bool = setting(
        False,
        "Finish with the weights of the evaluation with the best main metric (accuracy, F1, "
        "Matthews or Pearson correlation, as the task reports) instead of the last ones.",
    )
    save_checkpoints_steps: int = setting(
        1000,
        "Back up the training state every N updates (and after each evaluation, and on "
        "SIGTERM) in OUTPUT_DIR/backup; rerunning the same command continues from it.",
    )
    log_every_steps: int = setting(
        100, "Progress line (when not on a terminal) and TensorBoard scalars every N updates."
    )
    verbose: int | str = setting(  # 0: silent, 1: a progress line, in place on a terminal
        1, "", flag=None
    )
    # -- the input pipeline -----------------------------------------------------------------
    pad_to_multiple_of: int = setting(
        8, "Dynamic padding: each batch is padded to its longest row rounded up to this multiple."
    )
    static_shapes: bool = setting(
        False, "Pad every row to max_seq_length in fixed-size batches (always under TPUStrategy)."
    )
    packing: bool = setting(
        True,
        "classification/regression: put the examples of each batch several to a row (as long "
        "as the batch's longest), each computed as if it were alone (the same batches with less "
        "padding), in training and prediction. Not with --static_shapes or several replicas; "
        "training with --length_buckets does not pack.",
    )
    length_buckets: bool = setting(
        False,
        "Batch training rows of similar length together (less padding, less shuffling; turns --packing off).",
    )
    shuffle_buffer_size: int = setting(
        10_000, "Training examples held for shuffling (the data is streamed, never held whole)."
    )

    def __post_init__(self):
        squad = self.task.lower().startswith("squad")
        if self.max_seq_length is None:
            self.max_seq_length = 384 if squad else 128
        if self.doc_stride is None and squad:
            self.doc_stride = SQUAD_DOC_STRIDE
        if self.window_pooling is not None and self.window_pooling not in WINDOW_POOLINGS:
            raise UsageError(
                f"--window_pooling={self.window_pooling} is not a way to combine windows; use one of "
                f"{', '.join(WINDOW_POOLINGS)}"
            )
        for name in (
            "max_seq_length",
            "train_batch_size",
            "eval_batch_size",
            "pad_to_multiple_of",
            "shuffle_buffer_size",
            "n_best_size",
            "max_query_length",
            "max_answer_length",
        ):
            if getattr(self, name) <= 0:
                raise UsageError(f"--{name} must be a positive integer, got {getattr(self, name)}")
        if self.doc_stride is not None and self.doc_stride <= 0:
            raise UsageError(
                f"--doc_stride must be a positive number of word pieces, got {self.doc_stride}; leave it "
                "unset to cut long texts at --max_seq_length instead"
            )
        if not self.learning_rate > 0:
            raise UsageError(
                f"--learning_rate must be > 0, got {self.learning_rate} (BERT uses 2e-5 to 5e-5)"
            )
        if not self.num_train_epochs > 0:
            raise UsageError(f"--num_train_epochs must be > 0, got {self.num_train_epochs}")
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise UsageError(f"--warmup_proportion must be in [0, 1), got {self.warmup_proportion}")
        if self.num_gpus < 0:
            raise UsageError(f"--num_gpus must be >= 0, got {self.num_gpus}")
        for name in ("gradient_accumulation_steps", "save_checkpoints_steps", "log_every_steps"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name} must be a positive integer, got {getattr(self, name)}")
        if self.train_batch_size % self.gradient_accumulation_steps:
            raise UsageError(
                f"--train_batch_size={self.train_batch_size} is not a multiple of "
                f"--gradient_accumulation_steps={self.gradient_accumulation_steps}; each update "
                "averages that many equal micro-batches: choose a divisor of the batch size"
            )
        if self.eval_every_steps is not None and self.eval_every_steps < 0:
            raise UsageError(
                f"--eval_every_steps must be >= 0 (0: only after training), got {self.eval_every_steps}"
            )
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            raise UsageError(
                f"--early_stopping_patience must be >= 1 evaluation, got {self.early_stopping_patience}"
            )
        if self.mixed_precision not in (precision.AUTO, *precision.POLICIES):
            raise UsageError(
                f"--mixed_precision={self.mixed_precision} is not a dtype policy; use one of "
                f"{', '.join((precision.AUTO, *precision.POLICIES))}"
            )
        if self.threshold is not None and not 0.0 < self.threshold < 1.0:
            raise UsageError(
                f"--threshold must be a probability strictly between 0 and 1, got {self.threshold}"
            )
        if not self.label_separator:
            raise UsageError(
                "--label_separator is empty; give the text that joins labels in a cell, e.g. '|'"
            )
        if self.static_shapes and self.length_buckets:
            raise UsageError(
                "--static_shapes pads every row to --max_seq_length, --length_buckets to its bucket's "
                "length: pass one of them"
            )
        if not self.output_dir:
            raise UsageError("--output_dir is empty; name the folder the results go to")
        text_encoding.check_encoding(self.input_encoding)
