"""The settings of a fine-tuning run (light: importable without TensorFlow).

Example:

>>> from bert_tf.tasks.settings import FinetuneSettings
>>> FinetuneSettings(task="mrpc", output_dir="/tmp/mrpc", options={"doc_stride": 64}).options
{'doc_stride': 64}
>>> FinetuneSettings.of(task="mrpc", output_dir="/tmp/mrpc", doc_stride=64).options
{'doc_stride': 64}
"""

from __future__ import annotations

import dataclasses

from bert_tf import text_encoding
from bert_tf.cli import setting
from bert_tf.errors import UsageError
from bert_tf.training import precision


def check_lora_rank(rank, lora_alpha=None, flag: str = "rank", alpha_flag: str = "lora_alpha") -> None:
    """UsageError unless a LoRA `rank` is a positive integer and `lora_alpha` (if given) positive."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise UsageError(
            f"{flag} must be a positive integer (4 to 16 are usual), got {rank!r}; "
            "leave it unset to fine-tune every weight"
        )
    if lora_alpha is not None and not lora_alpha > 0:
        raise UsageError(
            f"{alpha_flag} must be > 0, got {lora_alpha!r} (the adapters are scaled by alpha / rank; "
            "leave it unset for alpha = rank)"
        )


@dataclasses.dataclass
class FinetuneSettings:
    """What every fine-tuning run needs, whatever its task family; the CLI flags map onto these
    one to one. The family's own settings are `options` (`TaskFamily.Options`)."""

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
    max_seq_length: int | None = setting(
        None, "Word pieces per sequence (default: the task family's, 128; question answering 384)."
    )
    train_batch_size: int = setting(32, "Global training batch size.")
    eval_batch_size: int = setting(
        32,
        "Batch size of evaluation and prediction (the results do not depend on it; "
        "classification batches rows of similar length together, so larger batches cost no padding).",
    )
    learning_rate: float = setting(5e-5, "Peak learning rate of AdamW.")
    num_train_epochs: float | None = setting(
        None, "Epochs of training (may be fractional; default: --recipe's, 3 or more on small data)."
    )
    recipe: str = setting(
        "auto",
        "How long training runs when --num_train_epochs is not set. auto: the original recipe's 3 "
        "epochs, more on small data so that training makes at least 300 updates (at most 20 "
        "epochs); original: 3 epochs whatever the data's size.",
        choices=("auto", "original"),
    )
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
    baseline: bool = setting(
        True,
        "Fit the task's simple baseline on the training data and score it beside the model "
        "(classification, multi-label, regression: TF-IDF of word 1-2-grams with a linear model, "
        "on at most 100,000 training examples); --nobaseline skips it.",
    )
    # -- several runs: a search for the recipe, seeds (bert_tf.tasks.search) ---------------------
    search: int | None = setting(
        None,
        "Search for the recipe: N recipes drawn from --search_learning_rates, --search_batch_sizes "
        "and the seed, compared by successive halving (Keras Tuner's Hyperband, one bracket): each "
        "trains to the first of --search_epochs, the best third go on to the next, ..., scored on "
        "the eval data after every epoch and stopped early; the best finished run's model is kept. "
        "Rerunning the command continues a stopped search.",
    )
    search_learning_rates: tuple[float, ...] = setting(
        (1e-5, 2e-5, 3e-5, 5e-5, 1e-4), "--search: the learning rates to try."
    )
    search_epochs: tuple[float, ...] = setting(
        (1.0, 3.0, 9.0),
        "--search: the epochs after which the recipes still training are compared, increasing; "
        "the best third of them go on to the next, the last is every recipe's schedule length.",
    )
    search_batch_sizes: tuple[int, ...] = setting((16, 32), "--search: the training batch sizes to try.")
    seeds: int = setting(
        1,
        "Fine-tune the recipe (with --search: the one it chose) from K seeds and report each "
        "score's mean and standard deviation; the best seed's model is kept.",
    )
    # -- how training runs (the defaults are the original recipe's) ---------------------------
    mixed_precision: str = setting(
        precision.AUTO,
        "Keras dtype policy of training: float32, mixed_bfloat16 or mixed_float16 (with loss "
        "scaling); heads' logits stay float32. auto: mixed_bfloat16 on TPUs and recent GPUs, "
        "mixed_float16 on older GPUs, float32 on CPUs (as a Python fit, so both train the same weights).",
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
    lora_rank: int | None = setting(
        None,
        "Fine-tune LoRA adapters of this rank (4 to 16 are usual) on the query and value projections, "
        "the encoder frozen: only the adapters and the head train (they need a far higher "
        "--learning_rate than full fine-tuning: 5e-3 for the 3 epochs of the recipe). The saved "
        "model/ has them merged; OUTPUT_DIR/lora_weights.npz keeps them alone.",
    )
    lora_alpha: float | None = setting(
        None, "LoRA adapters are scaled by alpha / rank (default: alpha = --lora_rank)."
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
        "padding), in training and prediction; sentence_embedding: the texts it encodes alone. "
        "Not with --static_shapes or several replicas; training with --length_buckets does not pack.",
    )
    length_buckets: bool = setting(
        False,
        "Batch training rows of similar length together (less padding, less shuffling; turns --packing off).",
    )
    shuffle_buffer_size: int = setting(
        10_000, "Training examples held for shuffling (the data is streamed, never held whole)."
    )
    # The task family's own settings ({name: value}, e.g. {"doc_stride": 64}), checked by the
    # family (its `Options`); on the command line, its flags (`--doc_stride=64`).
    options: dict = dataclasses.field(default_factory=dict, metadata={"flag": None})

    @classmethod
    def of(cls, **fields) -> FinetuneSettings:
        """Settings from keyword arguments as the command line's flags: the shared fields, and
        the task family's options by their names (`of(task="squad", output_dir=d, doc_stride=64)`)."""
        shared = {field.name for field in dataclasses.fields(cls)}
        options = {name: value for name, value in fields.items() if name not in shared}
        given = {name: value for name, value in fields.items() if name in shared}
        options = {**given.pop("options", {}), **options}
        return cls(**given, options=options)

    def __post_init__(self):
        for name in ("train_batch_size", "eval_batch_size", "pad_to_multiple_of", "shuffle_buffer_size"):
            if getattr(self, name) <= 0:
                raise UsageError(f"--{name} must be a positive integer, got {getattr(self, name)}")
        if self.max_seq_length is not None and self.max_seq_length <= 0:
            raise UsageError(f"--max_seq_length must be a positive integer, got {self.max_seq_length}")
        if not self.learning_rate > 0:
            raise UsageError(
                f"--learning_rate must be > 0, got {self.learning_rate} (BERT uses 2e-5 to 5e-5)"
            )
        if self.num_train_epochs is not None and not self.num_train_epochs > 0:
            raise UsageError(f"--num_train_epochs must be > 0, got {self.num_train_epochs}")
        if self.recipe not in ("auto", "original"):
            raise UsageError(f"--recipe={self.recipe} is not a recipe; use auto or original")
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
        if self.lora_rank is not None or self.lora_alpha is not None:
            if self.lora_rank is None:
                raise UsageError(
                    "--lora_alpha scales LoRA adapters: pass --lora_rank too (e.g. --lora_rank=8)"
                )
            check_lora_rank(self.lora_rank, self.lora_alpha, flag="--lora_rank", alpha_flag="--lora_alpha")
        if self.mixed_precision not in (precision.AUTO, *precision.POLICIES):
            raise UsageError(
                f"--mixed_precision={self.mixed_precision} is not a dtype policy; use one of "
                f"{', '.join((precision.AUTO, *precision.POLICIES))}"
            )
        if self.static_shapes and self.length_buckets:
            raise UsageError(
                "--static_shapes pads every row to --max_seq_length, --length_buckets to its bucket's "
                "length: pass one of them"
            )
        if not self.output_dir:
            raise UsageError("--output_dir is empty; name the folder the results go to")
        self._check_runs()
        text_encoding.check_encoding(self.input_encoding)

    def _check_runs(self) -> None:
        """--search, its space and --seeds (the lists as numbers: a command line's are text)."""
        if self.search is not None and (isinstance(self.search, bool) or self.search < 1):
            raise UsageError(
                f"--search must be a positive number of trials, got {self.search} (8 to 20 are usual); "
                "leave it unset to fine-tune once"
            )
        if isinstance(self.seeds, bool) or self.seeds < 1:
            raise UsageError(
                f"--seeds must be a positive number of runs, got {self.seeds} (3 to 5 are usual)"
            )
        spaces = (
            ("search_learning_rates", float, lambda v: 0 < v < 1, "learning rates in (0, 1), e.g. 2e-5,5e-5"),
            ("search_epochs", float, lambda v: v > 0, "increasing numbers of epochs > 0, e.g. 1,3,9"),
            ("search_batch_sizes", int, lambda v: v > 0, "positive batch sizes, e.g. 16,32"),
        )
        for name, kind, valid, wanted in spaces:
            given = getattr(self, name)
            given = [given] if isinstance(given, (int, float, str)) else list(given or ())
            try:
                values = tuple(
                    kind(float(v)) if kind is int and float(v).is_integer() else kind(v) for v in given
                )
            except (TypeError, ValueError):
                raise UsageError(f"--{name}={','.join(map(str, given))}: give {wanted}") from None
            increasing = name != "search_epochs" or list(values) == sorted(set(values))
            if not values or not all(valid(v) for v in values) or not increasing:
                raise UsageError(f"--{name}={','.join(map(str, given))}: give {wanted}")
            object.__setattr__(self, name, tuple(dict.fromkeys(values)))

    def search_space(self) -> dict[str, tuple]:
        """{run setting: the values a search draws} (its epochs are `search_epochs`' rungs)."""
        return {"learning_rate": self.search_learning_rates, "train_batch_size": self.search_batch_sizes}
