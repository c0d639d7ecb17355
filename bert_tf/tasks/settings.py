"""The settings of a fine-tuning run (light: importable without TensorFlow).

Example:

>>> from bert_tf.tasks.settings import FinetuneSettings
>>> FinetuneSettings(task="squad", output_dir="/tmp/squad").max_seq_length
384
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class FinetuneSettings:
    """Everything a fine-tuning run needs; the CLI flags map onto these one to one."""

    task: str
    output_dir: str
    init_checkpoint: str | None = None
    # Without init_checkpoint (random init) both are needed; with it they override.
    bert_config: str | None = None  # a bert_config.json path or a shipped config name
    vocab_file: str | None = None
    lower_case: bool | None = None  # None: what the checkpoint says (True if unknown)
    train_file: str | None = None
    eval_file: str | None = None
    predict_file: str | None = None
    data_dir: str | None = None  # a GLUE task directory (train.tsv, dev*.tsv, test*.tsv)
    tfds_name: str | None = None
    tfds_data_dir: str | None = None
    text_column: str = "text"
    text_b_column: str | None = None
    label_column: str = "label"
    max_seq_length: int | None = None  # None: 384 for SQuAD, 128 otherwise
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    train_batch_size: int = 32
    eval_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    seed: int = 12345
    strategy: str = "default"
    tpu: str | None = None
    num_gpus: int = 0
    save_model: bool = True
    eval_train: bool = False  # also score the training data ("train_" metrics): did it fit?
    verbose: int | str = 2  # Keras fit verbosity: 2 = one line per epoch
    # Input pipeline: each batch is padded to its longest row rounded up to this multiple
    # (dynamic padding); static_shapes pads every row to max_seq_length in fixed-size
    # batches (always under TPUStrategy); length_buckets groups training rows of similar
    # length; the training data is shuffled in a buffer of shuffle_buffer_size examples.
    pad_to_multiple_of: int = 8
    static_shapes: bool = False
    length_buckets: bool = False
    shuffle_buffer_size: int = 10_000

    def __post_init__(self):
        if self.max_seq_length is None:
            self.max_seq_length = 384 if self.task.lower().startswith("squad") else 128
        for name in (
            "max_seq_length",
            "train_batch_size",
            "eval_batch_size",
            "pad_to_multiple_of",
            "shuffle_buffer_size",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_train_epochs <= 0 or self.learning_rate <= 0:
            raise ValueError("num_train_epochs and learning_rate must be positive")
