"""Fine-tune, evaluate, predict and save: what `python -m bert_tf.finetune` runs.

`run(FinetuneSettings(...))` reads the task's data, builds the task model on a pretrained
(or randomly initialised) encoder, trains it with `model.fit` under the requested
`tf.distribute` strategy, scores the eval data with the task's official metrics into
`OUTPUT_DIR/eval_results.json`, writes predictions in the official formats, and saves
the fine-tuned model to `OUTPUT_DIR/model/` (see `save_finetuned`).

Example (a tiny random-init model on a two-row CSV):

>>> import os, tempfile
>>> from bert_tf.tasks.runner import FinetuneSettings, run
>>> d = tempfile.mkdtemp()
>>> _ = open(os.path.join(d, "vocab.txt"), "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]))
>>> _ = open(os.path.join(d, "train.csv"), "w").write("text,label\\ngood,pos\\nbad,neg\\n")
>>> results = run(FinetuneSettings(task="classification", output_dir=os.path.join(d, "out"),
...     vocab_file=os.path.join(d, "vocab.txt"), bert_config="bert_tiny", max_seq_length=8,
...     train_file=os.path.join(d, "train.csv"), eval_file=os.path.join(d, "train.csv"),
...     train_batch_size=2, num_train_epochs=1.0, verbose=0))
>>> sorted(results)
['accuracy', 'eval_loss']
"""

from __future__ import annotations

import logging
import math
import os
import tempfile

import keras

from bert_tf import fileio
from bert_tf.tasks.adapters import TaskData, make_adapter
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.settings import FinetuneSettings

logger = logging.getLogger(__name__)

MODEL_DIR = "model"
MODEL_FILE = "model.keras"
TASK_FILE = "task.json"


def load_tokenizer(settings: FinetuneSettings, checkpoint_settings=None):
    from bert_tf.tokenization import BertTokenizer

    vocab_file = settings.vocab_file or (checkpoint_settings.vocab_file if checkpoint_settings else None)
    if not vocab_file:
        raise ValueError("no vocab file: pass vocab_file (--vocab_file) or an init_checkpoint that has one")
    lower_case = settings.lower_case
    if lower_case is None:
        lower_case = checkpoint_settings.lower_case if checkpoint_settings else True
    return BertTokenizer(vocab_file, lower_case=lower_case)


def _encoder(settings: FinetuneSettings):
    from bert_tf.config import load_config
    from bert_tf.models import BertEncoder, from_pretrained

    if settings.init_checkpoint:
        encoder, checkpoint_settings = from_pretrained(settings.init_checkpoint, heads="encoder")
        return encoder, checkpoint_settings
    if not settings.bert_config:
        raise ValueError("pass init_checkpoint (pretrained) or bert_config (random initialisation)")
    return BertEncoder(load_config(settings.bert_config)), None


def _finetuned_info(settings: FinetuneSettings) -> dict | None:
    """task.json when init_checkpoint is the model/ folder of a fine-tuning run, else None.

    Such a run starts from the whole fine-tuned model (to predict, evaluate or train on),
    with its own vocab, casing and labels; it must be for the same task.
    """
    directory = settings.init_checkpoint
    if not directory or not all(
        fileio.isfile(fileio.join(directory, name)) for name in (MODEL_FILE, TASK_FILE)
    ):
        return None  # a pretrained checkpoint (or nothing from_pretrained can read: it says so)
    info = fileio.read_json(fileio.join(directory, TASK_FILE))
    if info["task"].lower() != settings.task.lower():
        raise TaskDataError(
            f"{directory} holds a model fine-tuned for task {info['task']!r}, not {settings.task!r}; "
            f"pass --task={info['task']} or a pretrained checkpoint"
        )
    if settings.vocab_file or settings.bert_config or settings.lower_case is not None:
        logger.warning(
            "%s is a fine-tuned model: its own vocab, config and casing are used; "
            "--vocab_file, --bert_config and --do_lower_case are ignored",
            directory,
        )
    return info


def _dataset(data: TaskData, batch_size: int, *, shuffle: bool, seed: int, drop_remainder: bool = False):
    import tensorflow as tf

    elements = (data.x, data.y) if data.y is not None else data.x
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    if shuffle:
        dataset = dataset.shuffle(len(data.x["input_ids"]), seed=seed, reshuffle_each_iteration=True).repeat()
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)


def _log_stats(data: TaskData) -> dict:
    stats = data.stats.as_dict()
    logger.info("%s data: %s", data.name, stats)
    if data.stats.num_truncated:
        logger.warning(
            "%s: %d examples were longer than max_seq_length and were truncated",
            data.name,
            data.stats.num_truncated,
        )
    return stats


def run(settings: FinetuneSettings) -> dict[str, float]:
    """Trains (when there is training data), evaluates, predicts and saves; returns the
    eval metrics (also written to OUTPUT_DIR/eval_results.json)."""
    from bert_tf.tasks import models
    from bert_tf.training.distribute import get_strategy

    keras.utils.set_random_seed(settings.seed)
    fileio.makedirs(settings.output_dir)
    strategy = get_strategy(settings.strategy, settings.tpu, settings.num_gpus)
    finetuned = _finetuned_info(settings)
    with strategy.scope():
        if finetuned:  # a model/ folder of an earlier run: its head, labels and tokenizer
            model, tokenizer, _ = load_finetuned(settings.init_checkpoint, compile=False)
        else:
            encoder, checkpoint_settings = _encoder(settings)
            tokenizer = load_tokenizer(settings, checkpoint_settings)
    adapter = make_adapter(settings, tokenizer)
    if finetuned and finetuned.get("label_list") is not None:
        adapter.label_list = list(finetuned["label_list"])

    train = adapter.load("train")
    evals = adapter.load("eval")
    predicts = adapter.load("predict")
    if not (train or evals or predicts):
        raise TaskDataError(
            f"no data for task {settings.task!r}: pass --train_file/--eval_file/--predict_file, "
            "--data_dir (GLUE) or --tfds_name"
        )
    if adapter.label_list is None and adapter.kind in ("classification", "token"):
        raise TaskDataError(
            f"task {settings.task!r} takes its labels from the training data; pass --train_file"
        )
    data_stats = {data.name: _log_stats(data) for data in (*train, *evals, *predicts)}

    with strategy.scope():
        if not finetuned:
            model = adapter.build_model(encoder)
        num_examples = len(train[0].x["input_ids"]) if train else 0
        steps_per_epoch = max(1, math.ceil(num_examples / settings.train_batch_size))
        num_train_steps = max(1, int(steps_per_epoch * settings.num_train_epochs))
        model.compile(
            optimizer=models.create_optimizer(
                settings.learning_rate, num_train_steps, settings.warmup_proportion
            ),
            **models.compile_args(adapter.kind),
        )

    if train:
        logger.info("training on %d examples for %d steps", num_examples, num_train_steps)
        dataset = _dataset(
            train[0],
            settings.train_batch_size,
            shuffle=True,
            seed=settings.seed,
            drop_remainder=bool(settings.tpu),
        )
        epochs = math.ceil(num_train_steps / steps_per_epoch)
        model.fit(
            dataset,
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            callbacks=[_StopAtStep(num_train_steps)],
            shuffle=False,  # the dataset is shuffled already
            verbose=settings.verbose,
        )

    results: dict[str, float] = {}
    scored = [*train, *evals] if settings.eval_train else evals
    for data in scored:
        outputs = model.predict(data.x, batch_size=settings.eval_batch_size, verbose=0)
        scores = adapter.score(data, outputs)
        if data.y is not None:
            scores["eval_loss"] = models.task_loss(adapter.kind, data.y, outputs)
        # "accuracy" for the eval data, "accuracy_mismatched" for MNLI's second dev set,
        # "train_accuracy" for the training data.
        if data.name == "train":
            results.update({f"train_{name.removeprefix('eval_')}": float(v) for name, v in scores.items()})
            continue
        suffix = "" if data.name == "eval" else "_" + data.name.split("_", 1)[1]
        results.update({f"{name}{suffix}": float(value) for name, value in scores.items()})
        adapter.write(data, outputs, settings.output_dir)
    if scored:
        _write_json(fileio.join(settings.output_dir, "eval_results.json"), results)
        logger.info("eval results: %s", results)
    for data in predicts:
        outputs = model.predict(data.x, batch_size=settings.eval_batch_size, verbose=0)
        for path in adapter.write(data, outputs, settings.output_dir):
            logger.info("wrote %s", path)
    _write_json(fileio.join(settings.output_dir, "data_stats.json"), data_stats)
    if settings.save_model and train:
        save_finetuned(fileio.join(settings.output_dir, MODEL_DIR), model, tokenizer, settings, adapter)
    return results


class _StopAtStep(keras.callbacks.Callback):
    """Ends training after `num_steps` batches (num_train_epochs may be fractional)."""

    def __init__(self, num_steps: int):
        super().__init__()
        self.num_steps = num_steps
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= self.num_steps:
            self.model.stop_training = True


def _write_json(path: str, content) -> None:
    fileio.write_json(path, content)


def save_finetuned(directory: str, model, tokenizer, settings: FinetuneSettings, adapter) -> str:
    """Saves a fine-tuned model so that it can be rebuilt without this run's flags.

    The directory holds `model.keras` (the whole Keras task model: architecture and
    weights), `bert_config.json` (the encoder's config), `vocab.txt` and `task.json`
    (task name, kind, label list, lower_case, max_seq_length, the second text's column for
    own-data pair tasks, and for SQuAD doc_stride, max_query_length, max_answer_length and
    the null-answer threshold), everything the raw-text export (`bert_tf.serving.task`)
    needs. `load_finetuned(directory)` reads it back.
    """
    fileio.makedirs(directory)
    # Keras writes model.keras as a zip through a local file; copied whole to any filesystem.
    with tempfile.TemporaryDirectory() as local:
        model.save(os.path.join(local, MODEL_FILE))
        fileio.copy(os.path.join(local, MODEL_FILE), fileio.join(directory, MODEL_FILE))
    model.encoder.config.to_json_file(fileio.join(directory, "bert_config.json"))
    fileio.copy(tokenizer.vocab_file, fileio.join(directory, "vocab.txt"))
    info = {
        "task": settings.task,
        "kind": adapter.kind,
        "label_list": list(adapter.label_list) if adapter.label_list is not None else None,
        "lower_case": bool(tokenizer.lower_case),
        "max_seq_length": settings.max_seq_length,
    }
    if adapter.kind in ("classification", "regression") and settings.text_b_column:
        info["text_b_column"] = settings.text_b_column
    if adapter.kind == "span":
        info.update(
            doc_stride=settings.doc_stride,
            max_query_length=settings.max_query_length,
            max_answer_length=settings.max_answer_length,
            version_2_with_negative=bool(getattr(adapter, "version_2", False)),
            null_score_diff_threshold=settings.null_score_diff_threshold,
        )
    _write_json(fileio.join(directory, TASK_FILE), info)
    return directory


def load_finetuned(directory: str, compile: bool = True):
    """(Keras model, BertTokenizer, task info dict) from a `save_finetuned` directory.

    `compile=False` skips the saved optimizer, loss and metrics (serving needs none).
    """
    # Imported for their side effect: they register the serializable model, optimizer,
    # schedule and metric classes that model.keras names.
    import bert_tf.models  # noqa: F401
    import bert_tf.tasks.models  # noqa: F401
    import bert_tf.training.optimization  # noqa: F401
    from bert_tf.tokenization import BertTokenizer

    path = fileio.join(directory, MODEL_FILE)
    if not fileio.isfile(path):
        raise FileNotFoundError(
            f"no {MODEL_FILE} in {directory}; is it the model/ folder of a fine-tuning run?"
        )
    info = fileio.read_json(fileio.join(directory, TASK_FILE))
    with tempfile.TemporaryDirectory() as local:
        fileio.copy(path, os.path.join(local, MODEL_FILE))
        model = keras.saving.load_model(os.path.join(local, MODEL_FILE), compile=compile)
    tokenizer = BertTokenizer(fileio.join(directory, "vocab.txt"), lower_case=info["lower_case"])
    return model, tokenizer, info
