"""The span family's raw-text SavedModel: question, context -> answer.

-> answer string [batch] (the original run_squad's get_final_text; "" when there is no
answer), score float32 [batch] (start + end logit of the best span), answer_start,
answer_end int32 [batch] (character offsets in the context, end exclusive; -1 when no
answer: `answer` is the context between them with each whitespace run written as one
space). The context is read in windows, every doc_stride pieces, and the answer is chosen
and written by the ops fine-tuning's evaluation runs (`bert_tf.tasks.span.answers`), so it
is the answer evaluation scores on the same logits. doc_stride, max_query_length,
max_answer_length, n_best_size and the SQuAD 2.0 null_score_diff_threshold are task.json's
(128, 64, 30, 20, 0.0 where an older task.json lacks them). An empty context has no answer
(score 0).
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.serving.saving import ExportError
from bert_tf.tasks.family import char_offset, serving_input
from bert_tf.tasks.span import answers


def check(saved: dict, seq_length: int) -> None:
    """ExportError for saved settings that leave no window or span at `seq_length`."""
    if seq_length - 3 - saved["max_query_length"] < 1:
        raise ExportError(
            f"seq_length {seq_length} leaves no room for the context after a question of up to "
            f"max_query_length={saved['max_query_length']} pieces ([CLS] question [SEP] context "
            f"[SEP]); pass --max_seq_length={saved['max_query_length'] + 4} or more"
        )
    for name in ("doc_stride", "max_answer_length", "n_best_size"):
        if saved[name] < 1:
            raise ExportError(f"task.json has {name}={saved[name]}; it must be a positive number of pieces")


def answer(serving, saved: dict, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
    """`serving` (a `bert_tf.serving.task.TaskServing`) on a batch of questions and contexts,
    with the model's saved SQuAD settings `saved`."""
    features = serving.preprocessor.features((question, context))
    inputs = {name: features[name] for name in preprocessing.base.MODEL_INPUTS}
    outputs = serving.model(inputs, training=False)  # all windows of all examples in one batch
    # Fine-tuning's evaluation post-processing (bert_tf.tasks.span.answers), on these logits.
    num_examples = tf.shape(context, out_type=tf.int64)[0]
    input_ids = features["input_ids"]
    ranked = answers.ranked_spans(
        outputs["start_logits"],
        outputs["end_logits"],
        features["token_to_orig"],
        features["token_is_max_context"],
        tf.reduce_sum(tf.cast(tf.not_equal(input_ids, serving.tokenizer.pad_id), tf.int64), axis=1),
        features["example_index"],
        num_examples,
        n_best_size=saved["n_best_size"],
        max_answer_length=saved["max_answer_length"],
    )
    null = None
    if saved["version_2_with_negative"]:
        null = answers.null_answers(
            outputs["start_logits"], outputs["end_logits"], features["example_index"], num_examples
        )
    best = answers.best_answers(
        ranked,
        null,
        n_best_size=saved["n_best_size"],
        null_score_diff_threshold=saved["null_score_diff_threshold"],
    )
    # The text of the questions that have a span (get_final_text), and where it lies.
    doc_words, word_begin, _ = serving.preprocessor.context_words(context)  # [b, (doc tokens)]
    answered = tf.where(best.has_span)[:, 0]  # [a]
    texts = answers.answer_texts(
        tf.gather(tf.constant(serving.tokenizer.vocab), input_ids),
        features["token_to_orig"],
        tf.gather(best.window, answered),
        tf.gather(best.start, answered),
        tf.gather(best.end, answered),
        doc_words,
        features["example_index"],
        serving.tokenizer.split_words,
    )
    answered_context = tf.gather(context, answered)
    begins = tf.gather(word_begin, answered)  # [a, (doc tokens)] byte offsets

    def offset(word, chars):  # the context's character offset of a doc token's character
        byte = tf.gather(begins.flat_values, begins.row_starts() + word)
        return char_offset(answered_context, tf.cast(byte, tf.int32)) + tf.cast(chars, tf.int32)

    shape = tf.reshape(num_examples, [1])
    index = answered[:, None]
    text = tf.scatter_nd(index, texts.text, shape)
    answer_start = tf.scatter_nd(index, offset(texts.first_word, texts.first_char) + 1, shape) - 1
    answer_end = tf.scatter_nd(index, offset(texts.last_word, texts.last_char) + 2, shape) - 1
    has_answer = best.has_answer
    return {
        "answer": tf.where(has_answer, text, ""),
        "score": tf.cast(tf.where(best.has_span, best.score, 0.0), tf.float32),
        "answer_start": tf.where(has_answer, answer_start, -1),
        "answer_end": tf.where(has_answer, answer_end, -1),
    }


def signatures(serving, saved: dict, seq_length: int) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """`serving_default`: question, context -> answer, score, answer_start, answer_end."""
    check(saved, seq_length)  # before tracing: the error names the flag to change
    program = tf.function(lambda question, context: answer(serving, saved, question, context))
    return {
        "serving_default": program.get_concrete_function(serving_input("question"), serving_input("context"))
    }
