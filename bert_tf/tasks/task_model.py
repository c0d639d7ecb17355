"""The Keras task models' base: a functional model over a serialized encoder, carrying its preprocessor.

Every task family's model (`bert_tf.BertClassifier`, `BertTokenClassifier`,
`BertSpanLabeler`, `BertMultipleChoice`, or a family's of your own) is a `TaskModel`:
the encoder and the family's head as one functional Keras model, and, as keras-hub's task
models do, a `preprocessor` (`bert_tf.tasks.preprocessor.TaskPreprocessor`: the task
description, the tokenizer and its vocab) serialized with it. Through it the model takes
raw text: `from_pretrained` builds both, `fit`/`predict`/`evaluate` on raw text go through
the family's own preprocessing and batching (the command line's), `save` writes the
fine-tuned folder and `export` the raw-text SavedModel (`bert_tf.tasks.keras_api`). A
model without a preprocessor is plain Keras on feature dicts.
"""

from __future__ import annotations

import contextlib

import keras
from keras import ops

from bert_tf.layers.activations import truncated_normal
from bert_tf.models.encoder import ENCODER_INPUTS, BertEncoder, keep_inputs
from bert_tf.tasks import keras_api, lora


def encoder_inputs(encoder: BertEncoder, extra_dims: int = 0) -> dict:
    """Keras inputs named like the encoder's; extra_dims adds leading dims (choices)."""
    shape = (None,) * (1 + extra_dims)
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in ENCODER_INPUTS}


def task_dense(encoder: BertEncoder, units: int, name: str) -> keras.layers.Dense:
    return keras.layers.Dense(
        units,
        kernel_initializer=truncated_normal(encoder.config.initializer_range),
        dtype=encoder.dtype_policy,
        name=name,
    )


class TaskModel(keras.Model):
    """Base of the task models: a functional Keras model over a shared `BertEncoder`.

    Subclasses build their graph in `__init__`, set `self.encoder`, and name their other
    constructor arguments in `config_fields`; `get_config` serializes the encoder and the
    preprocessor with them. Features the graph does not take (labels riding along in the
    input dict) are dropped before the call.
    """

    config_fields: tuple[str, ...] = ()
    # Heads on the sequence output only (spans, tags) leave the pooler without a gradient:
    # it is left out of what `fit` trains, so Keras does not warn about it on every run
    # nor keep optimizer moments for it. The encoder itself is not changed (it may be
    # shared with another head), and its pooler weights are still saved and exported.
    uses_pooler: bool = True

    def __init__(self, *args, preprocessor=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.preprocessor = preprocessor

    @property
    def trainable_weights(self) -> list:
        return self._without_unused_pooler(super().trainable_weights)

    @property
    def trainable_variables(self) -> list:  # what optimizers are built with, also on loading
        return self._without_unused_pooler(super().trainable_variables)

    def _without_unused_pooler(self, weights: list) -> list:
        if self.uses_pooler:
            return weights
        pooler = {id(weight) for weight in self.encoder.pooler_dense.weights}
        return [weight for weight in weights if id(weight) not in pooler]

    def call(self, inputs, training=None, mask=None):
        return super().call(keep_inputs(inputs, ENCODER_INPUTS), training=training, mask=mask)

    def get_config(self) -> dict:
        config = {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "name": self.name,
            "trainable": self.trainable,
            **{field: getattr(self, field) for field in self.config_fields},
        }
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    @classmethod
    def from_config(cls, config: dict):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)

    # --- raw text in, labels out (bert_tf.tasks.keras_api) ----------------------------------

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """This task model on a checkpoint, carrying its preprocessor.

        `path`: a Google checkpoint folder, a Hugging Face BERT folder, a pretraining export or
        model_dir, or a fine-tuned folder (`save`, or the CLI's OUTPUT_DIR/model, or a
        Hugging Face `BertFor...` / original fine-tuned checkpoint: its head, labels, vocab and
        casing come along; `max_seq_length=` may change its sequence length). A new head takes
        `num_classes=` or `label_list=[...]` (classification, tagging); also `task=` (e.g.
        "mrpc", "squad_v2", "multi_label"), `max_seq_length=`, `vocab_file=`, `lower_case=`,
        and the family's own options as keyword arguments (`TaskFamily.Options`: `threshold=`
        of a multi-label model, `doc_stride=` and `window_pooling=` for long texts, SQuAD's
        `max_query_length=`, ...).
        """
        return keras_api.from_pretrained(cls, path, **kwargs)

    @property
    def label_list(self) -> list[str] | None:
        """The class names (label i is `label_list[i]`), or None (regression, spans, choices)."""
        return None if self.preprocessor is None else self.preprocessor.info.label_list

    @property
    def tokenizer(self):
        return None if self.preprocessor is None else self.preprocessor.tokenizer

    @property
    def task_info(self):
        """The task description that `save` writes as task.json (None without a preprocessor)."""
        return None if self.preprocessor is None else self.preprocessor.info

    def compile(
        self,
        optimizer=None,
        loss=None,
        metrics=None,
        *,
        learning_rate: float = 5e-5,
        warmup_proportion: float = 0.1,
        weight_decay: float = 0.01,
        gradient_accumulation_steps: int = 1,
        **kwargs,
    ):
        """Keras' compile; without `optimizer`, the original fine-tuning recipe.

        That recipe is AdamW at `learning_rate` (weight decay 0.01 outside LayerNorm and
        biases, epsilon 1e-6, clipping at global norm 1.0), `warmup_proportion` of linear
        warmup, then linear decay to 0 over the updates `fit` runs: the schedule is built when
        `fit` starts, anew for each call. Without `loss`/`metrics`, the task family's.
        """
        compiled = keras_api.compile_arguments(
            self,
            optimizer,
            loss,
            metrics,
            kwargs,
            learning_rate=learning_rate,
            warmup_proportion=warmup_proportion,
            weight_decay=weight_decay,
            gradient_accumulation_steps=gradient_accumulation_steps,
        )
        # A plain object: Keras would track the metrics of a dict attribute as the model's own.
        self._compiled_with = compiled
        super().compile(optimizer=compiled.optimizer, **compiled.kwargs)

    def compile_from_config(self, config):
        """Restores a saved model's optimizer, loss and metrics: Keras' loader skips a
        model's own `compile` (ours is one), so they are passed to Keras' compile as saved."""
        config = keras.saving.deserialize_keras_object(config)
        self._compiled_with = None  # as a plain-Keras compile: no pending recipe
        super().compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def compile_recipe(self, optimizer) -> None:  # see bert_tf.tasks.keras_api.build_schedule
        """Compiles again with `optimizer` and the loss and metrics of the last `compile`, and
        builds the optimizer's slots (`build_optimizer`)."""
        super().compile(optimizer=optimizer, **self._compiled_with.kwargs)
        self.build_optimizer()

    def build_optimizer(self) -> None:
        """Builds the optimizer's slots before `fit`'s first step (where the model is built):
        left to that step, their creation makes TensorFlow trace it twice (seconds on a CPU)."""
        if not self.built or self.optimizer is None or self.optimizer.built:
            return
        strategy = getattr(self, "distribute_strategy", None)  # TensorFlow's trainer has one
        with strategy.scope() if strategy is not None else contextlib.nullcontext():
            self.optimizer.build(self.trainable_variables)

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        epochs=1,
        validation_data=None,
        *,
        seed=None,
        shuffle_buffer_size=10_000,
        output_dir=None,
        **kwargs,
    ):
        """Keras' fit; `x` may be raw text (see `bert_tf.tasks.keras_api`), with `y` label
        names or ids (multi-label: lists of names, or multi-hot rows), and `class_weight=`
        "balanced", a list or a dict of per-label weights. Raw text is batched as the CLI does
        (dynamic padding; packing for classification), shuffled in a buffer of
        `shuffle_buffer_size` with `seed`. `output_dir`: a run folder where the fit logs its
        curves as the command line does (`python -m bert_tf.plot DIR`, TensorBoard); `save`
        may then write the model into the same folder."""
        return keras_api.fit(
            self,
            super().fit,
            x,
            y,
            batch_size=batch_size,
            epochs=epochs,
            validation_data=validation_data,
            seed=seed,
            shuffle_buffer_size=shuffle_buffer_size,
            output_dir=output_dir,
            **kwargs,
        )

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """Keras' predict; on raw text, the outputs in input order: logits [examples, classes]
        (classification, multiple choice), probabilities [examples, labels] (multi-label: a
        sigmoid each), scores [examples, 1] (regression), one [words, tags] logits array per
        sentence (tagging), the answer strings (spans, whose logits are per window), as the
        task family says. `label_names(outputs)` turns them into label names."""
        if keras_api.is_raw(x):
            return keras_api.predict(self, x, batch_size)
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """Keras' evaluate; on raw text and labels, the task's official metrics as a dict
        (accuracy, F1, exact_match, ... and eval_loss), as the CLI's eval_results.json."""
        if keras_api.is_raw(x):
            return keras_api.evaluate(self, x, y, batch_size)
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def label_names(self, outputs):
        """Label names of `predict`'s outputs (regression: the scores; choices: the indices;
        multi-label: each example's list of the labels above the model's threshold)."""
        return keras_api.family_of(self).python_labels(outputs)

    def save(self, filepath, overwrite=None, **kwargs):
        """A path ending in .keras or .h5: Keras' own file (replaced unless `overwrite=False`),
        the preprocessor (vocab included) inside. Any other path: the fine-tuned folder the CLI
        writes (model.keras, bert_config.json, vocab.txt, task.json), which `from_pretrained`,
        `bert_tf.finetune --init_checkpoint` and `bert_tf.export` read. It is written whole or
        not at all; a folder that holds a fine-tuned model already is replaced only with
        `overwrite=True`. LoRA adapters (`enable_lora`) are merged into the kernels: the
        folder is a plain fine-tuned model (`save_lora_weights` keeps the adapters alone)."""
        if lora.is_enabled(self):  # its adapters merged: a plain model (see save_lora_weights)
            return lora.merged(self).save(filepath, overwrite=overwrite, **kwargs)
        if str(filepath).endswith((".keras", ".h5")):
            return super().save(filepath, overwrite=overwrite is not False, **kwargs)
        return keras_api.save(self, filepath, overwrite=bool(overwrite))

    def export(self, filepath, format="bert_tf", overwrite=False, **kwargs):
        """The raw-text task SavedModel of `bert_tf.export --kind=task` (strings in, labels
        out; served with tensorflow and tensorflow_text only). `format="huggingface"` or
        `"google"`: the model with its head as a transformers `BertFor...` folder or an
        original checkpoint (`bert_tf.export --kind=huggingface|google`), which
        `from_pretrained` reads back. `format="tf_saved_model"` (or another Keras format)
        is Keras' own export of the feature-taking model. LoRA adapters are merged first."""
        if lora.is_enabled(self):
            return lora.merged(self).export(filepath, format=format, overwrite=overwrite, **kwargs)
        if format not in ("bert_tf", "huggingface", "google"):
            return super().export(filepath, format=format, **kwargs)
        return keras_api.export(self, filepath, overwrite=overwrite, format=format)

    # --- LoRA (bert_tf.tasks.lora) -------------------------------------------------------------

    def enable_lora(self, rank: int, lora_alpha: float | None = None) -> None:
        """Freezes the encoder and adds Keras' LoRA adapters of `rank` to the query and value
        projections of its attention layers (`Dense.enable_lora`): `fit` then trains the
        adapters and the head only. `lora_alpha` scales them by alpha / rank (default: rank).
        Call it before `compile` and `fit`. `save` merges the adapters into a plain model."""
        lora.enable(self, rank, lora_alpha)

    @property
    def lora_rank(self) -> int | None:
        """The rank of the LoRA adapters, None without them."""
        return lora.rank_of(self)

    def save_lora_weights(self, filepath) -> str:
        """Writes only what LoRA trained (the adapters and the head) and the task description
        to `filepath` (.npz), whole or not at all; `load_lora_weights` puts them onto a model
        built from the same base checkpoint."""
        return lora.save_weights(self, filepath)

    def load_lora_weights(self, filepath) -> None:
        """Loads `save_lora_weights`' file onto this model (built from the base the adapters
        were trained on, with as many classes), enabling LoRA at their rank if needed."""
        lora.load_weights(self, filepath)


class DenseHeadModel(TaskModel):
    """dropout -> dense(num_classes) on one of the encoder's outputs: float32 logits.

    Subclasses name the output (`encoder_output`) and their default model name.
    """

    config_fields = ("num_classes", "dropout_rate")
    encoder_output = "pooled_output"
    default_name = "bert_dense_head"

    def __init__(
        self,
        encoder: BertEncoder,
        num_classes: int,
        dropout_rate: float = 0.1,
        name: str | None = None,
        **kwargs,
    ):
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        dropout = keras.layers.Dropout(dropout_rate, name="dropout")
        classifier = task_dense(encoder, num_classes, "classifier")
        inputs = encoder_inputs(encoder)
        features = encoder(inputs)[self.encoder_output]
        logits = ops.cast(classifier(dropout(features)), "float32")
        super().__init__(inputs=inputs, outputs=logits, name=name or self.default_name, **kwargs)
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
