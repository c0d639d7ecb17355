"""Task SavedModels: a fine-tuned model that takes raw strings and returns what a client wants.

Built from a model directory written by `bert_tf.finetune` (`model.keras`,
`bert_config.json`, `vocab.txt`, `task.json`). Every export has `serving_default`;
inputs are tf.string [batch] (multiple choice: also [batch, num_choices]), outputs have
the batch as first dimension:

classification (GLUE tasks, own CSV/TSV/JSONL data):
  inputs `text` (single-sentence tasks) or `text_a`, `text_b` (pair tasks such as MRPC);
  the other form is also exported, as `serving_single` / `serving_pair`.
  -> probabilities float32 [batch, num_classes], label string [batch], label_id int32
     [batch], label_names string [batch, num_classes] (the class order).
regression (STS-B, own data): same inputs -> score float32 [batch].
  A model trained with doc_stride (task.json) reads a long text (of a pair, the second) in
  windows as fine-tuning does, and its logits (score) are the mean or max (window_pooling)
  of its windows', as evaluation combines them.
multi_label (own data): same inputs -> probabilities float32 [batch, num_labels] (a
  sigmoid per label), labels string [batch, max labels] (every label whose probability
  is above task.json's threshold, in label order, padded with ""), num_labels int32
  [batch], label_names string [batch, num_labels] (the label order).
span (SQuAD): question, context -> answer string [batch] (the original run_squad's
  get_final_text; "" when there is no answer), score float32 [batch] (start + end logit of
  the best span), answer_start, answer_end int32 [batch] (character offsets in the
  context, end exclusive; -1 when no answer: `answer` is the context between them with
  each whitespace run written as one space). The context is read in windows, every
  doc_stride pieces, and the answer is chosen and written by the ops fine-tuning's
  evaluation runs (`bert_tf.tasks.squad_answers`), so it is the answer evaluation scores
  on the same logits. doc_stride, max_query_length, max_answer_length, n_best_size and the
  SQuAD 2.0 null_score_diff_threshold are task.json's (128, 64, 30, 20, 0.0 where an
  older task.json lacks them). An empty context has no answer (score 0).
token (NER): text -> entities: entity_text, entity_label string [batch, max_entities],
  entity_start, entity_end int32 [batch, max_entities] (character offsets, end
  exclusive), entity_score float32 (mean tag probability of its words), num_entities
  int32 [batch]; padding is "" / -1 / 0. Words are split like the original basic
  tokenizer (whitespace, punctuation, CJK), tagged and grouped into entities as
  evaluation reads them (`bert_tf.tasks.ner_entities`: the first piece's highest logit,
  seqeval's chunk rules). A model trained with doc_stride (task.json) reads a long text in
  windows as fine-tuning does, each word from the window where it has the most context.
multiple_choice (SWAG): context [batch], endings [batch, num_choices] -> probabilities
  float32 [batch, num_choices] (softmax over the choices), choice int32 [batch] (the
  most probable). As fine-tuning (`bert_tf.tasks.swag`): each choice is packed
  `[CLS] context [SEP] ending [SEP]` and trimmed like the original (the longer side from
  its end); an ending is the whole candidate continuation, for a SWAG row
  sent2 + " " + ending<i>, as `read_swag` builds it. Any number of choices works.

Text becomes features with the same preprocessors (`bert_tf.preprocessing`) that
fine-tuning maps over its data, traced into the SavedModel. Character offsets come from
the words of `BasicTokenizer.split_with_offsets`, the original's rules: a span may hold
characters the original deletes (control and format characters) inside, never at its ends.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf import fileio, preprocessing
from bert_tf.preprocessing.packing import pack_sequences
from bert_tf.preprocessing.windows import pool_windows
from bert_tf.serving.saving import ExportError, check_seq_length, export_module
from bert_tf.serving.spans import SpanSettings
from bert_tf.tasks import ner_entities, squad_answers
from bert_tf.tasks.families import family_for_kind
from bert_tf.tasks.finetuned import FinetunedModelInfo, is_finetuned_dir, load_finetuned
from bert_tf.tasks.kinds import TaskKind
from bert_tf.tokenization import BertTokenizer


def _char_offset(text: tf.Tensor, byte_offset: tf.Tensor) -> tf.Tensor:
    """Character (code point) offset of `byte_offset` in `text` (elementwise)."""
    prefix = tf.strings.substr(text, tf.zeros_like(byte_offset), byte_offset)
    return tf.strings.length(prefix, unit="UTF8_CHAR")


class _NotSaved:
    """Holds an object a tf.Module calls but does not save: neither tracked nor walked."""

    def __init__(self, value) -> None:
        self.value = value


class TaskServing(tf.Module):
    """Raw strings -> predictions for a fine-tuned task model.

    Args:
      model: the Keras task model (BertClassifier, BertSpanLabeler, BertTokenClassifier,
        BertMultipleChoice).
      tokenizer: its `BertTokenizer`.
      info: the fine-tuned folder's task.json (`FinetunedModelInfo`).
      seq_length: packed length.
    """

    def __init__(self, model, tokenizer, info: FinetunedModelInfo, seq_length: int) -> None:
        super().__init__(name="bert_task")
        kind = info.kind
        # The SavedModel keeps the model's variables, which the signatures read, not the Keras
        # object graph: saving that would trace the model's own functions again and walk all
        # its layers (it halved the time to write the MiniLM's task export).
        self._keras_model = _NotSaved(model)
        self.model_variables = list(model.variables)
        self.tokenizer = tokenizer
        self.vocab_file = tf.saved_model.Asset(tokenizer.vocab_file)
        self._kind = kind
        self._info = info
        self._seq_length = seq_length
        labels = info.label_list or []
        self._labels = tf.constant(labels if labels else [""], tf.string)
        self._num_labels = len(labels)
        # The task family decides the preprocessor and the signatures (`trace`).
        self._family = family_for_kind(kind)
        # task.json's SQuAD settings, which the span program (`_answer`) reads; the span
        # family checks them against seq_length before tracing.
        self._span = SpanSettings.from_task_info(info)
        # The fine-tuning preprocessor of the task family: the same rules, traced here.
        self.preprocessor = self._family.serving_preprocessor(tokenizer, info, seq_length)

    @property
    def model(self):
        """The Keras task model."""
        return self._keras_model.value

    # --- classification and regression -----------------------------------------

    def _classify(self, texts: list[tf.Tensor]) -> dict[str, tf.Tensor]:
        features = self.preprocessor.features(texts[0] if len(texts) == 1 else tuple(texts))
        inputs = {name: features[name] for name in preprocessing.base.MODEL_INPUTS}
        # The batch's texts (or windows) share rows of its padded length, as fine-tuning packs
        # them (bert_tf.preprocessing.packing): the encoder runs on their tokens, not on the
        # padding of short texts beside a long one, and each text's logits are as if alone.
        packed = pack_sequences(inputs, row_length=tf.shape(inputs["input_ids"])[1])
        outputs = tf.cast(self.model(packed, training=False), tf.float32)
        if "example_index" in features:  # long texts in windows: one output per text, as evaluation's
            outputs = pool_windows(
                outputs, features["example_index"], tf.shape(texts[0])[0], self._info.window_pooling or "mean"
            )
        if self._kind == TaskKind.REGRESSION:
            return {"score": outputs[:, 0]}
        batch = tf.shape(outputs)[0]
        label_names = tf.tile(self._labels[None, :], [batch, 1])
        if self._kind == TaskKind.MULTI_LABEL:
            probabilities = tf.sigmoid(outputs)
            chosen = probabilities > self._info.threshold  # [batch, num_labels]
            return {
                "probabilities": probabilities,
                "labels": tf.ragged.boolean_mask(label_names, chosen).to_tensor(default_value=""),
                "num_labels": tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1),
                "label_names": label_names,
            }
        probabilities = tf.nn.softmax(outputs, axis=-1)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {
            "probabilities": probabilities,
            "label_id": label_id,
            "label": tf.gather(self._labels, label_id),
            "label_names": label_names,
        }

    # --- word pieces with the words they came from -------------------------------

    def _word_pieces(self, text: tf.Tensor):
        """-> (pieces [batch, (words), (pieces)] int64, word begin / end byte offsets [batch, (words)])."""
        # The original BasicTokenizer's words, split only: the tokenizer normalizes each word itself.
        words, begin, end = self.tokenizer.split_words_with_offsets(text)  # each [batch, (words)]
        pieces = tf.cast(self.tokenizer.tokenize(words.flat_values), tf.int64)  # [all words, (pieces)]
        if pieces.ragged_rank > 1:
            pieces = pieces.merge_dims(1, -1)
        return words.with_flat_values(pieces), begin, end

    # --- NER ------------------------------------------------------------------

    def _entities(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        words, begin, end = self.tokenizer.split_words_with_offsets(text)  # [b, (w)]
        features = self.preprocessor.features(words)
        inputs = {name: features[name] for name in preprocessing.base.MODEL_INPUTS}
        logits = tf.cast(self.model(inputs, training=False), tf.float32)  # [rows, length, labels]
        # Each word's first piece (not read: cut by seq_length), as fine-tuning reads
        # predictions (with windows: from the window where it has the most context); tags
        # and entities by evaluation's rules (bert_tf.tasks.ner_entities).
        word_logits, kept = preprocessing.tagger.word_logits(logits, features, words)  # [all words, ...]
        tag = tf.where(kept, ner_entities.word_tag_ids(word_logits), -1)
        tag_prob = tf.reduce_max(tf.nn.softmax(word_logits, axis=-1), axis=-1)
        found = ner_entities.entity_words(words.with_flat_values(tag), self._info.label_list)
        row = found.row
        num = tf.shape(row, out_type=tf.int64)[0]
        member = found.word_entity.flat_values
        inside = member >= 0
        score = tf.math.unsorted_segment_mean(
            tf.boolean_mask(tag_prob, inside), tf.boolean_mask(member, inside), num
        )
        first_byte = tf.gather(begin.flat_values, tf.gather(begin.row_starts(), row) + found.first_word)
        last_byte = tf.gather(end.flat_values, tf.gather(end.row_starts(), row) + found.last_word)
        batch = tf.shape(text, out_type=tf.int64)[0]
        source = tf.gather(text, row)
        start_char = _char_offset(source, tf.cast(first_byte, tf.int32))
        end_char = _char_offset(source, tf.cast(last_byte, tf.int32))
        entity_text = tf.strings.substr(
            source, tf.cast(first_byte, tf.int32), tf.cast(last_byte - first_byte, tf.int32)
        )

        def per_text(values, default):
            return tf.RaggedTensor.from_value_rowids(values, row, nrows=batch).to_tensor(
                default_value=default
            )

        return {
            "entity_text": per_text(entity_text, ""),
            "entity_label": per_text(found.type_name, ""),
            "entity_start": per_text(start_char, -1),
            "entity_end": per_text(end_char, -1),
            "entity_score": per_text(score, 0.0),
            "num_entities": tf.cast(
                tf.math.bincount(tf.cast(row, tf.int32), minlength=tf.cast(batch, tf.int32)), tf.int32
            ),
        }

    # --- SQuAD -----------------------------------------------------------------

    def _answer(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        features = self.preprocessor.features((question, context))
        inputs = {name: features[name] for name in preprocessing.base.MODEL_INPUTS}
        outputs = self.model(inputs, training=False)  # all windows of all examples in one batch
        # Fine-tuning's evaluation post-processing (bert_tf.tasks.squad_answers), on these logits.
        settings = self._span
        num_examples = tf.shape(context, out_type=tf.int64)[0]
        input_ids = features["input_ids"]
        ranked = squad_answers.ranked_spans(
            outputs["start_logits"],
            outputs["end_logits"],
            features["token_to_orig"],
            features["token_is_max_context"],
            tf.reduce_sum(tf.cast(tf.not_equal(input_ids, self.tokenizer.pad_id), tf.int64), axis=1),
            features["example_index"],
            num_examples,
            n_best_size=settings.n_best_size,
            max_answer_length=settings.max_answer_length,
        )
        null = None
        if settings.version_2_with_negative:
            null = squad_answers.null_answers(
                outputs["start_logits"], outputs["end_logits"], features["example_index"], num_examples
            )
        best = squad_answers.best_answers(
            ranked,
            null,
            n_best_size=settings.n_best_size,
            null_score_diff_threshold=settings.null_score_diff_threshold,
        )
        # The text of the questions that have a span (get_final_text), and where it lies.
        doc_words, word_begin, _ = self.preprocessor.context_words(context)  # [b, (doc tokens)]
        answered = tf.where(best.has_span)[:, 0]  # [a]
        texts = squad_answers.answer_texts(
            tf.gather(tf.constant(self.tokenizer.vocab), input_ids),
            features["token_to_orig"],
            tf.gather(best.window, answered),
            tf.gather(best.start, answered),
            tf.gather(best.end, answered),
            doc_words,
            features["example_index"],
            self.tokenizer.split_words,
        )
        answered_context = tf.gather(context, answered)
        begins = tf.gather(word_begin, answered)  # [a, (doc tokens)] byte offsets

        def char_offset(word, chars):  # the context's character offset of a doc token's character
            byte = tf.gather(begins.flat_values, begins.row_starts() + word)
            return _char_offset(answered_context, tf.cast(byte, tf.int32)) + tf.cast(chars, tf.int32)

        shape = tf.reshape(num_examples, [1])
        index = answered[:, None]
        answer = tf.scatter_nd(index, texts.text, shape)
        answer_start = tf.scatter_nd(index, char_offset(texts.first_word, texts.first_char) + 1, shape) - 1
        answer_end = tf.scatter_nd(index, char_offset(texts.last_word, texts.last_char) + 2, shape) - 1
        has_answer = best.has_answer
        return {
            "answer": tf.where(has_answer, answer, ""),
            "score": tf.cast(tf.where(best.has_span, best.score, 0.0), tf.float32),
            "answer_start": tf.where(has_answer, answer_start, -1),
            "answer_end": tf.where(has_answer, answer_end, -1),
        }

    # --- multiple choice (SWAG) ------------------------------------------------------

    def _choose(self, context: tf.Tensor, endings: tf.Tensor) -> dict[str, tf.Tensor]:
        inputs = self.preprocessor((context, endings))  # [batch, choices, length]
        logits = tf.cast(self.model(inputs, training=False), tf.float32)  # [batch, choices]
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {
            "probabilities": probabilities,
            "choice": tf.argmax(probabilities, axis=-1, output_type=tf.int32),
        }

    # --- signatures ----------------------------------------------------------------

    def trace(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        """Returns the signatures dict for tf.saved_model.save: the task family's, built
        from the programs above."""
        return self._family.serving_signatures(self, self._info, self._seq_length)


def check_finetuned_dir(init_checkpoint: str, kind: str) -> None:
    """A clear error for an --init_checkpoint that holds no fine-tuned model."""
    if not is_finetuned_dir(init_checkpoint):
        raise ExportError(
            f"--kind={kind} needs a fine-tuned model: the model/ folder that bert_tf.finetune writes, or a "
            f"Hugging Face or original checkpoint with a task head (BertForSequenceClassification, ...); "
            f"{init_checkpoint} is neither"
        )


def export_task(
    init_checkpoint: str, export_dir: str, seq_length: int | None = None, overwrite: bool = False
) -> str:
    """Exports the fine-tuned model directory `init_checkpoint` (see module docstring):
    a folder bert_tf.finetune wrote, or a Hugging Face or original checkpoint with a task head."""
    check_finetuned_dir(init_checkpoint, "task")
    model, tokenizer, info = load_finetuned(init_checkpoint, compile=False)
    return export_task_model(
        model, tokenizer, info, export_dir, seq_length, overwrite, source=fileio.abspath(init_checkpoint)
    )


def export_task_model(
    model,
    tokenizer,
    info: FinetunedModelInfo,
    export_dir: str,
    seq_length: int | None = None,
    overwrite: bool = False,
    source: str | None = None,
    extra_info: dict | None = None,
) -> str:
    """Exports a fine-tuned task model held in memory (`model.export` of the task models).

    `info` is its task.json; `source` the folder it was read from, if any, and `extra_info`
    (e.g. {"quantize": "int8"}) are recorded in assets.extra/export_info.json.
    """
    seq_length = seq_length or info.max_seq_length
    config = model.encoder.config
    check_seq_length(seq_length, config)

    def build(vocab_file: str) -> TaskServing:
        return TaskServing(
            model, BertTokenizer(vocab_file, lower_case=tokenizer.lower_case), info, seq_length
        )

    extra = {
        "task": info.task,
        "task_kind": info.kind.value,
        "label_list": info.label_list,
        "pair_input": None,  # classification and regression: whether the default input is a pair
        **family_for_kind(info.kind).export_info(info),  # e.g. pair_input, the span settings
        **({"init_checkpoint": source} if source else {}),
        **(extra_info or {}),
    }
    return export_module(
        build,
        "task",
        config,
        tokenizer.vocab_file,
        tokenizer.lower_case,
        export_dir,
        seq_length,
        overwrite,
        extra,
    )
