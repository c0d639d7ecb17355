"""BERT pretraining: joins the pipelines, the model and the training loop.

`run_pretraining(PretrainingConfig(...))` is what `python -m bert_tf.pretrain` calls.
With the defaults it runs the demo: a vocab learnt from the embedded corpus (cached), the
`demo` config pretrained on the CPU for a few minutes, and a [MASK] filled at the end.

Example:

>>> from bert_tf.training.pretraining import run_pretraining
>>> from bert_tf.training.settings import PretrainingConfig
>>> settings = PretrainingConfig(model_dir="/tmp/bert_demo", num_train_steps=20, num_warmup_steps=2)
>>> result = run_pretraining(settings)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json

import keras
import tensorflow as tf

from bert_tf import fileio
from bert_tf.backend import dtype_policy
from bert_tf.checkpoints import inspect_checkpoint, load_weights
from bert_tf.checkpoints.google import is_object_based
from bert_tf.checkpoints.pretrained import PRETRAINING_HEADS, pretraining_heads
from bert_tf.config import BertConfig, load_config
from bert_tf.errors import UsageError
from bert_tf.layers.transformer_block import rematerialize
from bert_tf.models import BertPretrainer
from bert_tf.models.losses import next_sentence_weights, pretraining_losses
from bert_tf.models.pretrainer import example_features
from bert_tf.outputs import check_output
from bert_tf.tokenization import BertTokenizer, load_vocab
from bert_tf.training import distribute, domain_vocab, inputs, keras_pretraining
from bert_tf.training.evaluation import PeriodicEvaluator
from bert_tf.training.loop import Phase, PretrainingResult, Trainer
from bert_tf.training.run_files import export_and_fill_mask, print_eval, write_run_files
from bert_tf.training.settings import (
    DEFAULT_CONFIG,
    DEMO_MODEL_DIR,
    MODEL_INPUTS,
    PhaseData,
    PretrainingConfig,
    cache_dir,
    phase_data,
)
from pipelines import corpus, data_service
from pipelines.build_vocab import build_vocab
from pipelines.text_input import check_mostly_text, line_encoding

# --- the pieces ------------------------------------------------------------------


def embedded_corpus(settings: PretrainingConfig) -> str:
    """The embedded corpus as a file (cached)."""
    corpus_file = cache_dir(settings) / "pydoc_corpus.txt"
    if not corpus_file.exists():
        corpus.write_corpus(str(corpus_file))
    return str(corpus_file)


def learnt_vocab(settings: PretrainingConfig, files: list[str], vocab_size: int, what: str) -> str:
    """A vocab of up to `vocab_size` tokens learnt from `files` (`pipelines.build_vocab`).

    A run that has one in its model_dir (an earlier run of the same command) uses it;
    otherwise it is learnt into the cache, keyed by the files (names, sizes, times), the
    size, the casing and the encoding, so reruns learn it once; the run then keeps it in
    model_dir/vocab.txt beside its checkpoints and export.
    """
    stored = fileio.join(settings.model_dir or DEMO_MODEL_DIR, inputs.VOCAB_FILE)
    if fileio.isfile(stored):
        return stored
    stats = [(fileio.abspath(f), tf.io.gfile.stat(f).length, tf.io.gfile.stat(f).mtime_nsec) for f in files]
    key = json.dumps([stats, vocab_size, settings.do_lower_case, settings.input_encoding])
    casing = "uncased" if settings.do_lower_case else "cased"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    vocab_file = cache_dir(settings) / f"vocab_{vocab_size}_{casing}_{digest}.txt"
    if not vocab_file.exists():
        print(
            f"no --vocab_file: learning a vocab ({casing}) of up to {vocab_size} tokens from {what} (cached in "
            f"{vocab_file}; the run keeps it as {fileio.abspath(stored)})",
            flush=True,
        )
        # build_vocab writes to a temporary name and renames: a killed run leaves no half file.
        build_vocab(
            files,
            vocab_size,
            str(vocab_file),
            settings.do_lower_case,
            input_encoding=settings.input_encoding,
            accept_non_text=settings.accept_non_text,
        )
    return str(vocab_file)


def masked_lm_totals(features) -> dict:
    """Normalizers of the pretraining loss, summed over the global batch by the loop.

    `examples` counts NSP instances (several per row when packed); `positions` the row
    positions, for the fill rate.
    """
    return {
        "masked_lm_weight": tf.reduce_sum(tf.cast(features["masked_lm_weights"], tf.float32)),
        "examples": tf.reduce_sum(next_sentence_weights(features)),
        "positions": tf.cast(tf.size(features["input_mask"]), tf.float32),
    }


def pretraining_loss_share(features, outputs, totals, next_sentence: bool = True) -> dict:
    """This batch's share of the global batch's loss and metrics (see loop.py).

    `pretraining_losses` averages over the local batch: the masked-LM terms over the
    masked-LM weights, the next-sentence terms over the examples. Re-weighting each by the
    local fraction of the global normalizer makes the shares sum (over replicas and
    micro-batches) to the values of the whole global batch. `real_tokens` (non-padding
    tokens of the global batch) and `fill_rate` (their fraction of its positions) are
    shares in the same way. `next_sentence=False` (masked-LM-only batches, whose
    `next_sentence_weights` are 0: no term of the loss) leaves the next-sentence values out.
    """
    local = pretraining_losses(features, outputs)
    local_weight = tf.reduce_sum(tf.cast(features["masked_lm_weights"], tf.float32))
    masked_lm_share = (local_weight + 1e-5) / (totals["masked_lm_weight"] + 1e-5)
    # 0 for a batch of padding only (evaluation fills its last steps so): 0/0 is 0 here.
    examples_share = tf.math.divide_no_nan(tf.reduce_sum(next_sentence_weights(features)), totals["examples"])
    real_tokens = tf.reduce_sum(tf.cast(tf.cast(features["input_mask"], tf.int32) > 0, tf.float32))
    masked_lm_loss = tf.cast(local["masked_lm_loss"], tf.float32) * masked_lm_share
    next_sentence_loss = tf.math.multiply_no_nan(
        tf.cast(local["next_sentence_loss"], tf.float32), examples_share
    )
    shares = {
        "loss": masked_lm_loss + next_sentence_loss,
        "masked_lm_loss": masked_lm_loss,
        "next_sentence_loss": next_sentence_loss,
        "masked_lm_accuracy": tf.cast(local["masked_lm_accuracy"], tf.float32) * masked_lm_share,
        "next_sentence_accuracy": tf.math.multiply_no_nan(
            tf.cast(local["next_sentence_accuracy"], tf.float32), examples_share
        ),
        "real_tokens": real_tokens,
        "fill_rate": real_tokens / totals["positions"],
    }
    if not next_sentence:
        del shares["next_sentence_loss"], shares["next_sentence_accuracy"]
    return shares


# Evaluation weighs each batch's metrics by what they average over (padding batches weigh 0).
EVALUATION_WEIGHTS = {
    "masked_lm_loss": "masked_lm_weight",
    "masked_lm_accuracy": "masked_lm_weight",
    "next_sentence_loss": "examples",
    "next_sentence_accuracy": "examples",
}


def model_inputs(features) -> dict:
    # Packed batches also carry the [CLS] position of each instance.
    names = (
        (*MODEL_INPUTS, "next_sentence_positions") if "next_sentence_positions" in features else MODEL_INPUTS
    )
    return {name: features[name] for name in names}


# --- the run ---------------------------------------------------------------------


def run_pretraining(settings: PretrainingConfig) -> PretrainingResult:
    """Validates the inputs, then pretrains, evaluates, exports and (demo) fills a [MASK].

    The run's folder is named in the first line printed (`python -m bert_tf.pretrain` names
    it in the last line too); without `model_dir` it is `runs/demo` in the current
    directory, and a rerun resumes there."""
    default = "" if settings.model_dir else " (the default; --model_dir chooses another)"
    print(f"model_dir: {fileio.abspath(settings.model_dir or DEMO_MODEL_DIR)}{default}", flush=True)
    return _run_pretraining(settings)


def _run_pretraining(settings: PretrainingConfig) -> PretrainingResult:
    strategy = None
    if (
        settings.strategy in ("multi_worker", "tpu") or settings.tpu
    ) and keras.backend.backend() == "tensorflow":
        # Collectives and the TPU system are configured when TensorFlow starts: the strategy
        # comes before the checks below, which run TensorFlow ops.
        strategy = distribute.get_strategy(settings.strategy, settings.tpu, settings.num_gpus)
    config, vocab_file, settings = model_config_and_vocab(settings)
    model_dir = settings.model_dir or DEMO_MODEL_DIR

    # Nothing is written to model_dir before every check has passed.
    train_files, vocab_file = _training_text(settings, config, vocab_file)
    grown = None
    if settings.extend_vocab:
        # A run to resume: the TensorFlow loop's checkpoints, or model.fit's backups (JAX).
        resuming = bool(tf.train.latest_checkpoint(model_dir) or keras_pretraining.latest_backup(model_dir))
        grown = domain_vocab.extend_for_run(settings, config, vocab_file, train_files, model_dir, resuming)
        vocab_file, config = grown.vocab_file, grown.config
    if vocab_file:
        config = _config_for_vocab(settings, config, vocab_file)
    if settings.init_checkpoint:
        check_init_checkpoint(settings.init_checkpoint, grown.checkpoint_config if grown else config)
    phase2_files, eval_files = _checked_records(settings, config, train_files)
    if settings.data_service_address:
        _announce_data_service(settings)

    # An earlier run in model_dir resumes (check_model_dir: of the same config and vocab).
    check_output(model_dir, "--model_dir", overwrite=False)
    inputs.check_model_dir(model_dir, config, vocab_file)
    if settings.backend and settings.backend != keras.backend.backend():
        raise UsageError(
            f"--backend={settings.backend}, but Keras runs on {keras.backend.backend()}: the backend is fixed "
            f"when Keras is first imported; start Python with KERAS_BACKEND={settings.backend}"
        )
    if keras.backend.backend() != "tensorflow":  # model.fit under keras.distribution
        return keras_pretraining.train(
            settings, config, model_dir, vocab_file, train_files, phase2_files, eval_files, grown
        )
    strategy = strategy or distribute.get_strategy(settings.strategy, settings.tpu, settings.num_gpus)
    replicas = strategy.num_replicas_in_sync
    if settings.train_batch_size % replicas:
        raise inputs.InputError(
            f"--train_batch_size={settings.train_batch_size} is not divisible by the {replicas} replicas of "
            f"{type(strategy).__name__}; use a multiple of {replicas}"
        )
    data = _RunData(vocab_file, phase_data(settings, train_files, phase2_files), eval_files, grown)
    return _train(settings, config, strategy, model_dir, data)


def _training_text(
    settings: PretrainingConfig, config: BertConfig, vocab_file: str | None
) -> tuple[list[str], str | None]:
    """(the files phase 1 trains on, the vocab file): TFRecords, or raw text checked to be
    text, with a vocab learnt from it where none is given."""
    if settings.train_files:
        return fileio.expand_files(settings.train_files, "train_files"), vocab_file
    if settings.corpus:
        train_files = fileio.expand_files(settings.corpus, "corpus")
    else:
        train_files = [embedded_corpus(settings)]
    if settings.corpus or settings.input_encoding:
        encoding = line_encoding(settings.input_encoding)
        # The vocab's tokenizer, made only if some lines may give no word piece.
        tokenizer = (
            (lambda: BertTokenizer(vocab_file, lower_case=settings.do_lower_case)) if vocab_file else None
        )
        check_mostly_text(
            train_files, tokenizer, "--corpus", accept=settings.accept_non_text, encoding=encoding
        )
    if not vocab_file:
        what = "--corpus" if settings.corpus else "the embedded corpus"
        vocab_file = learnt_vocab(settings, train_files, config.vocab_size, what)
    return train_files, vocab_file


def _config_for_vocab(settings: PretrainingConfig, config: BertConfig, vocab_file: str) -> BertConfig:
    """`config`, sized to the vocab when pretraining from scratch; the vocab checked against it."""
    vocab = load_vocab(vocab_file)
    if len(vocab) != config.vocab_size and not settings.init_checkpoint:
        # From scratch the vocab decides the embedding size (the demo's vocab is learnt to
        # the config's size, but the learner may stop short of it on a small corpus).
        if settings.vocab_file or settings.corpus:
            named = settings.config or DEFAULT_CONFIG
            print(
                f"vocab_size {len(vocab)} from {vocab_file} (the config {named} says {config.vocab_size}): "
                "pretraining from scratch, the vocab decides",
                flush=True,
            )
        config = config.replace(vocab_size=len(vocab))
    inputs.check_vocab(vocab, vocab_file, config)
    return config


def _checked_records(
    settings: PretrainingConfig, config: BertConfig, train_files: list[str]
) -> tuple[list[str], list[str] | None]:
    """(phase 2's files, the evaluation files or None), every file's shapes checked against
    the lengths the run reads them at, and those lengths against the config's."""
    for length, name in (
        (settings.max_seq_length, "max_seq_length"),
        (settings.phase2_seq_length, "phase2_seq_length"),
    ):
        if (name == "max_seq_length" or settings.phase2_fraction) and length > config.max_position_embeddings:
            raise UsageError(
                f"--{name}={length} is above the config's max_position_embeddings="
                f"{config.max_position_embeddings}; pass --{name}={config.max_position_embeddings} or less"
            )

    def check_shapes(files: list[str], seq_length: int, predictions: int, what: str) -> None:
        inputs.check_record_shapes(
            files, seq_length, predictions, what, settings.packing, settings.next_sentence_prediction
        )

    check_shapes(train_files, settings.max_seq_length, settings.max_predictions_per_seq, "train_files")
    phase2_files = train_files
    if settings.phase2_fraction:
        if settings.phase2_train_files:
            phase2_files = fileio.expand_files(settings.phase2_train_files, "phase2_train_files")
        elif settings.train_files and inputs.is_tfrecord(train_files[0]):
            raise inputs.InputError(
                f"--phase2_fraction={settings.phase2_fraction} with TFRecords needs --phase2_train_files made "
                f"at --max_seq_length={settings.phase2_seq_length} (TFRecords have a fixed length)"
            )
        check_shapes(
            phase2_files, settings.phase2_seq_length, settings.phase2_predictions, "phase2_train_files"
        )
    eval_files = fileio.expand_files(settings.eval_files, "eval_files") if settings.eval_files else None
    if settings.eval_every_steps and not eval_files:
        inputs.check_holdout(train_files, "train_files" if settings.train_files else "corpus")
    if eval_files:
        check_shapes(eval_files, settings.max_seq_length, settings.max_predictions_per_seq, "eval_files")
    return phase2_files, eval_files


def _announce_data_service(settings: PretrainingConfig) -> None:
    if keras.backend.backend() != "tensorflow":
        raise UsageError(
            f"--data_service_address feeds the TensorFlow loop, not --backend={keras.backend.backend()}; "
            "leave one of them out"
        )
    address = data_service.check_reachable(settings.data_service_address)
    print(
        f"training batches from the tf.data service at {address}: the input position lives in the "
        "service, so a resume reads on in its job (batches since the last checkpoint are not "
        "replayed, those buffered by a stopped run are skipped; a job the service no longer holds "
        "starts again at the first pass)",
        flush=True,
    )


@dataclasses.dataclass(frozen=True)
class _RunData:
    """What the TensorFlow loop's run reads: its vocab, its phases, its evaluation files, and
    the grown vocab (`domain_vocab`) where --extend_vocab grew one."""

    vocab_file: str | None
    phases: list[PhaseData]
    eval_files: list[str] | None
    grown: domain_vocab.GrownVocab | None = None


def _train(settings, config, strategy, model_dir: str, data: _RunData) -> PretrainingResult:
    with dtype_policy(settings.mixed_precision):
        if settings.seed is not None:
            keras.utils.set_random_seed(settings.seed)
        is_chief = distribute.is_chief(strategy)
        if is_chief:
            write_run_files(model_dir, config, data.vocab_file)
        with strategy.scope():
            model = BertPretrainer(config, packed=settings.packing)
            rematerialize(model, settings.remat)
            instances = settings.max_instances_per_row if settings.packing else None
            model(example_features(1, settings.max_seq_length, settings.max_predictions_per_seq, instances))
            optimizer = settings.create_optimizer(presummed_gradients=True)
        trainer = _trainer(settings, strategy, model, optimizer, model_dir)

        def evaluate(dataset_fn, steps: int) -> dict:
            metrics = trainer.evaluate(dataset_fn, steps)
            return {"loss": metrics["masked_lm_loss"] + metrics.get("next_sentence_loss", 0.0), **metrics}

        if settings.init_checkpoint and not tf.train.latest_checkpoint(model_dir):
            domain_vocab.load_grown(
                model, data.grown, lambda source: _load_init_checkpoint(source, settings.init_checkpoint)
            )
        phases, eval_fn = _loop_phases(settings, model_dir, data)
        evaluator = None
        if settings.eval_every_steps:
            evaluator = PeriodicEvaluator(
                trainer, eval_fn, settings.eval_steps, settings.eval_every_steps, evaluate=evaluate
            )
        try:
            result = trainer.train(phases, on_loop_end=evaluator)
        finally:
            if evaluator is not None:
                evaluator.close()

        eval_metrics = None
        if evaluator is not None and evaluator.history and evaluator.history[-1]["step"] == result.step:
            eval_metrics = {k: v for k, v in evaluator.history[-1].items() if k != "step"}
        elif eval_fn is not None:
            eval_metrics = evaluate(eval_fn, settings.eval_steps)
            if is_chief:
                print_eval(eval_metrics)
        export_dir = fill_mask = None
        if is_chief:
            last = result.history[-1] if result.history else {}
            export_dir, fill_mask = export_and_fill_mask(
                model,
                settings,
                model_dir,
                data.vocab_file,
                data.phases[0].files[0],
                last.get("masked_lm_accuracy"),
            )
        return PretrainingResult(
            model_dir,
            export_dir,
            result,
            eval_metrics,
            fill_mask,
            evaluator.history if evaluator else [],
            is_chief=is_chief,
        )


def _trainer(settings: PretrainingConfig, strategy, model, optimizer, model_dir: str) -> Trainer:
    next_sentence = settings.next_sentence_prediction
    return Trainer(
        strategy,
        model,
        optimizer,
        functools.partial(pretraining_loss_share, next_sentence=next_sentence),
        model_dir,
        global_batch_size=settings.train_batch_size,
        totals_fn=masked_lm_totals,
        model_inputs=model_inputs,
        steps_per_loop=settings.steps_per_loop,
        save_checkpoints_steps=settings.save_checkpoints_steps,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        jit_compile=settings.jit_compile,
        loop_end_every_steps=settings.eval_every_steps,
        metric_weights={
            name: total
            for name, total in EVALUATION_WEIGHTS.items()
            if next_sentence or not name.startswith("next_sentence")
        },
    )


def _loop_phases(settings: PretrainingConfig, model_dir: str, data: _RunData) -> tuple[list[Phase], object]:
    """The loop's phases with their input pipelines, and the evaluation's (None: no evaluation).

    Without --eval_files, periodic evaluation reads a slice held out of phase 1's data,
    which no phase on the same files trains on."""
    served = settings.data_service_address is not None
    holdout = bool(settings.eval_every_steps and not data.eval_files)
    first = data.phases[0]
    phases = []
    for index, phase in enumerate(data.phases):
        dataset_fn = inputs.pretraining_dataset_fn(
            settings,
            phase.files,
            data.vocab_file,
            phase.seq_length,
            phase.predictions,
            phase.seed,
            row_predictions=phase.row_predictions,
            held_out="exclude" if holdout and phase.files == first.files else None,
            service_job=data_service.job_name(fileio.abspath(model_dir), index) if served else None,
        )
        if phase.end_step > phase.start_step:
            phases.append(Phase(phase.name, phase.start_step, phase.end_step, dataset_fn, served=served))
    eval_fn = None
    if data.eval_files or holdout:
        eval_fn = inputs.pretraining_dataset_fn(
            settings,
            data.eval_files or first.files,
            data.vocab_file,
            first.seq_length,
            first.predictions,
            first.seed,
            training=False,
            row_predictions=first.row_predictions,
            held_out="only" if holdout else None,
        )
    return phases, eval_fn


def model_config_and_vocab(settings: PretrainingConfig) -> tuple[BertConfig, str | None, PretrainingConfig]:
    """(BertConfig, vocab file or None, the settings resolved): --config and --vocab_file, or,
    for those not given, the --init_checkpoint's own (said in one line), else the demo
    config; the settings' defaults that follow the model (`PretrainingConfig.resolved`):
    the checkpoint's casing, and next-sentence prediction only if it has that head."""
    if settings.config or not settings.init_checkpoint:
        return load_config(settings.config or DEFAULT_CONFIG), settings.vocab_file, settings.resolved()

    path = settings.init_checkpoint
    ours = tf.train.latest_checkpoint(path) if fileio.isdir(path) else None
    lower_case, heads = True, set(PRETRAINING_HEADS)
    if ours and is_object_based(ours):  # another run's model_dir: its config and vocab beside
        config = load_config(fileio.join(path, inputs.CONFIG_FILE))
        vocab = fileio.join(path, inputs.VOCAB_FILE)
        vocab_file = vocab if fileio.isfile(vocab) else None
    else:
        config, tokenizer_settings = inspect_checkpoint(path)
        vocab_file, lower_case = tokenizer_settings.vocab_file, tokenizer_settings.lower_case
        heads = pretraining_heads(path)
        if settings.do_lower_case is None:
            print(
                f"--init_checkpoint is {'un' if lower_case else ''}cased: {tokenizer_settings.lower_case_reason}"
            )
        if "masked_lm" not in heads:
            print(
                f"--init_checkpoint={path} has no masked-LM head: a new one is trained (on its tied word embeddings)"
            )
        if "next_sentence" not in heads and settings.next_sentence_prediction is None:
            print(
                f"--init_checkpoint={path} has no next-sentence head: the masked LM is trained alone "
                "(--next_sentence_prediction=true trains a new head)"
            )
    if not (vocab_file or settings.vocab_file) and settings.corpus:
        raise inputs.InputError(
            f"--init_checkpoint={path} has no vocab.txt (nor tokenizer.json) beside it, and the checkpoint's "
            "embeddings mean nothing without the vocab they were trained with; copy its vocab.txt there, or pass "
            "it as --vocab_file"
        )
    vocab_file = settings.vocab_file or vocab_file
    own = "config and vocab" if vocab_file and not settings.vocab_file else "config"
    print(f"using the {own} of --init_checkpoint={path} (no --config given)", flush=True)
    return config, vocab_file, settings.resolved(lower_case, "next_sentence" in heads)


def check_init_checkpoint(path: str, config) -> None:
    """--init_checkpoint must be a checkpoint of this config's shapes (checked before writing)."""
    ours = tf.train.latest_checkpoint(path) if fileio.isdir(path) else None
    if ours and is_object_based(ours):
        return  # another run's model_dir: restored object by object, checked by the restore
    found, _ = inspect_checkpoint(path)
    shapes = (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "intermediate_size",
        "max_position_embeddings",
    )
    differences = [
        f"{name} {getattr(found, name)} there, {getattr(config, name)} here"
        for name in shapes
        if getattr(found, name) != getattr(config, name)
    ]
    if differences:
        own = fileio.join(path if fileio.isdir(path) else fileio.dirname(path), inputs.CONFIG_FILE)
        fix = (
            f"pass --config={own} (and its vocab)"
            if fileio.isfile(own)
            else "pass the --config (and vocab) it was trained with"
        )
        raise inputs.InputError(
            f"--init_checkpoint={path} was trained with another config ({', '.join(differences)}); "
            f"{fix}, or leave --config out to use the checkpoint's own"
        )


def _load_init_checkpoint(model, path: str) -> None:
    """Starts from a Google or Hugging Face checkpoint, an export, or another run's model_dir;
    a pretraining head the checkpoint lacks keeps its initial weights."""
    # A run's model_dir holds object-based checkpoints; a Google directory a name-based one.
    ours = tf.train.latest_checkpoint(path) if fileio.isdir(path) else None
    if ours and not is_object_based(ours):
        ours = None
    if ours:
        tf.train.Checkpoint(model=model).restore(ours).expect_partial().assert_existing_objects_matched()
    else:
        load_weights(model, path, skip_heads=set(PRETRAINING_HEADS) - pretraining_heads(path))
    print(f"initialized from {ours or path}", flush=True)
