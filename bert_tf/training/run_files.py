"""What a pretraining run writes into its model_dir besides checkpoints, on either backend:
its config and vocab first, its export and (the demo) a filled [MASK] at the end."""

from __future__ import annotations

from bert_tf import fileio
from bert_tf.checkpoints import export_pretrained
from bert_tf.config import BertConfig
from bert_tf.training import inputs
from bert_tf.training.fill_mask import fill_mask_demo
from bert_tf.training.settings import PretrainingConfig


def write_run_files(model_dir: str, config: BertConfig, vocab_file: str | None) -> None:
    """The run's bert_config.json, and its vocab unless an earlier run left one."""
    fileio.makedirs(model_dir)
    config.to_json_file(fileio.join(model_dir, inputs.CONFIG_FILE))
    if vocab_file and not fileio.exists(fileio.join(model_dir, inputs.VOCAB_FILE)):
        fileio.copy(vocab_file, fileio.join(model_dir, inputs.VOCAB_FILE))


def print_eval(metrics: dict) -> None:
    print("eval: " + "  ".join(f"{k} {v:.4f}" for k, v in metrics.items()), flush=True)


def export_and_fill_mask(
    pretrainer,
    settings: PretrainingConfig,
    model_dir: str,
    vocab_file: str | None,
    corpus_file: str,
    masked_lm_accuracy: float | None = None,
) -> tuple[str, list[tuple[str, float]] | None]:
    """(the export's folder, the demo's fill-mask guesses or None): the trained
    `pretrainer` exported for `from_pretrained` to model_dir/export, then, for the demo
    (neither --train_files nor --corpus), a [MASK] of `corpus_file` filled."""
    export_dir = export_pretrained(
        pretrainer, fileio.join(model_dir, "export"), vocab_file=vocab_file, lower_case=settings.do_lower_case
    )
    print(f"saved the pretrained model for from_pretrained: {fileio.abspath(export_dir)}", flush=True)
    if not (settings.fill_mask_demo and vocab_file) or settings.train_files or settings.corpus:
        return export_dir, None
    fill_mask = fill_mask_demo(
        pretrainer, vocab_file, settings.do_lower_case, corpus_file, masked_lm_accuracy=masked_lm_accuracy
    )
    return export_dir, fill_mask
