"""Pretraining quality per second: bert_tf against Hugging Face's run_mlm.py recipe.

Every contender trains the same small model (BERT-Tiny by default: 2 layers, hidden 128,
the bert-base-uncased vocab) on the same corpus with the same batch, steps, peak learning
rate and 10% warmup, each in a process of its own timed whole (start-up, data preparation
and training). One evaluator then scores every contender's exported model: transformers'
`BertForMaskedLM` predicts the masked pieces of the same held-out blocks (128 pieces of
held-out text, `[CLS] ... [SEP]`, 15% masked by `DataCollatorForLanguageModeling` with a
fixed seed), and the masked-LM accuracy is the share of masked pieces it gets right.

- `hf`: run_mlm.py's recipe: `BertForMaskedLM`, every line tokenized with its `[CLS]`/`[SEP]`,
  concatenated and cut into blocks of 128, `DataCollatorForLanguageModeling` (15%, 80/10/10),
  `Trainer` (AdamW, linear schedule, weight decay 0) on PyTorch;
- `ours`: `python -m bert_tf.pretrain --corpus=... ` with its defaults plus the shared recipe;
  further `ours:NAME` contenders add flags (`--ours=packing:--packing,mlm_only:...`), and
  `--ours_steps=NAME=STEPS` gives one of them other steps (to compare at equal time);
- `keras_hub` (`--keras_hub`): keras-hub's `BertMaskedLM` as its guides train it: one example
  per document, cut at 128 pieces, masked by `BertMaskedLMPreprocessor` (15%, 80/10/10, at
  most 20 per row), `model.fit` (AdamW with the shared warmup and linear decay, weight decay
  0.01 except on biases and LayerNorm, global-norm clipping 1.0; Keras' default XLA on
  TensorFlow). It has no next-sentence
  head. Its weights are then written as a transformers checkpoint through bert_tf (the
  encoder read from the saved keras-hub preset, the masked-LM head copied), for the
  evaluator. keras-hub's head applies the exact GELU where BERT's uses the tanh form; the
  difference moves no argmax measurably.

The corpus: `bench/docstring_corpus.py` (short documents of English prose about software).

    python bench/docstring_corpus.py --output_dir=/tmp/corpus
    python bench/pretrain_quality.py --corpus_dir=/tmp/corpus --work_dir=/tmp/quality --steps=200
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VOCAB = ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt"
BLOCK = 128


def run(command: list[str], log: Path) -> tuple[float, float]:
    """Runs a whole process; returns its (wall, CPU) seconds. Output goes to `log`. CPU
    seconds (user + system) tell less of what else ran on the machine than wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    start = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"{' '.join(command)} failed ({status}); see {log}")
    return seconds, usage.ru_utime + usage.ru_stime


# --- the Hugging Face side (run in its own process: --hf_train) ----------------------------


def hf_blocks(path: str, tokenizer, limit: int | None = None) -> list[list[int]]:
    """run_mlm.py's group_texts: every line's ids with its specials, concatenated, cut in blocks."""
    ids: list[int] = []
    with open(path, encoding="utf-8") as lines:
        batch = [line.strip() for line in lines if line.strip()]
    for start in range(0, len(batch), 10_000):
        for encoded in tokenizer(batch[start : start + 10_000])["input_ids"]:
            ids.extend(encoded)
        if limit and len(ids) >= limit * BLOCK:
            break
    count = len(ids) // BLOCK
    return [ids[i * BLOCK : (i + 1) * BLOCK] for i in range(count)][:limit]


def hf_train(args) -> None:
    import torch
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        BertTokenizerFast,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainingArguments,
    )

    torch.manual_seed(args.seed)
    tokenizer = BertTokenizerFast(str(VOCAB), do_lower_case=True)
    config_values = json.loads((ROOT / "configs" / f"{args.config}.json").read_text())
    config = BertConfig(**config_values)
    model = BertForMaskedLM(config)
    blocks = hf_blocks(os.path.join(args.corpus_dir, "train.txt"), tokenizer)
    dataset = [{"input_ids": block} for block in blocks]
    training = TrainingArguments(
        output_dir=args.output,
        per_device_train_batch_size=args.batch_size,
        max_steps=args.steps,
        learning_rate=args.learning_rate,
        warmup_steps=round(0.1 * args.steps),
        lr_scheduler_type="linear",
        logging_steps=max(1, args.steps // 10),
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        dataloader_num_workers=0,
        use_cpu=True,
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    Trainer(model=model, args=training, train_dataset=dataset, data_collator=collator).train()
    model.save_pretrained(os.path.join(args.output, "export"))
    tokenizer.save_pretrained(os.path.join(args.output, "export"))


# --- the keras-hub side (run in its own process: --keras_hub_train) ---------------------------


def documents(path: str) -> list[str]:
    """The corpus' documents (blank-line separated), each one string."""
    with open(path, encoding="utf-8") as handle:
        return [" ".join(part.split()) for part in handle.read().split("\n\n") if part.strip()]


def keras_hub_train(args) -> None:
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    from bench.keras_hub_peer import keras_hub_masked_lm
    from bert_tf.checkpoints import export_pretrained, load_weights
    from bert_tf.config import load_config
    from bert_tf.models import BertPretrainer
    from bert_tf.models.pretrainer import example_features

    keras.utils.set_random_seed(args.seed)
    config = load_config(args.config)
    model = keras_hub_masked_lm(config)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=str(VOCAB), lowercase=True)
    preprocessor = keras_hub.models.BertMaskedLMPreprocessor(
        tokenizer, sequence_length=BLOCK, mask_selection_rate=0.15, mask_selection_length=20
    )
    texts = documents(os.path.join(args.corpus_dir, "train.txt"))
    dataset = (
        tf.data.Dataset.from_tensor_slices(texts)
        .shuffle(len(texts), seed=args.seed)
        .repeat()
        .batch(args.batch_size)
        .map(preprocessor, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    warmup = round(0.1 * args.steps)

    class WarmupLinear(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = keras.ops.cast(step, "float32")
            up = step / max(warmup, 1)
            down = (args.steps - step) / max(args.steps - warmup, 1)
            return args.learning_rate * keras.ops.maximum(keras.ops.minimum(up, down), 0.0)

    optimizer = keras.optimizers.AdamW(WarmupLinear(), weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])  # as BERT's recipe
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    model.fit(dataset, steps_per_epoch=args.steps, epochs=1, verbose=2)

    # A transformers checkpoint for the evaluator: the encoder through the keras-hub preset
    # bert_tf reads, the masked-LM head copied (the same layout: dense, LayerNorm, tied
    # embeddings, an output bias).
    preset = os.path.join(args.output, "preset")
    model.backbone.save_to_preset(preset)
    pretrainer = BertPretrainer(config)
    pretrainer(example_features(1, 8, 2))
    load_weights(pretrainer, preset, skip_heads=["masked_lm", "next_sentence"])
    theirs, ours = model.masked_lm_head, pretrainer.masked_lm_head
    pairs = [
        (ours.transform_dense.kernel, theirs._intermediate_dense.kernel),
        (ours.transform_dense.bias, theirs._intermediate_dense.bias),
        (ours.layer_norm.gamma, theirs._intermediate_layer_norm.gamma),
        (ours.layer_norm.beta, theirs._intermediate_layer_norm.beta),
        (ours.output_bias, theirs._bias),
    ]
    for target, source in pairs:
        target.assign(np.asarray(source.numpy()).reshape(target.shape))
    export_pretrained(
        pretrainer,
        os.path.join(args.output, "export"),
        vocab_file=str(VOCAB),
        lower_case=True,
        formats=("huggingface",),
    )
    # The export predicts what the keras-hub model predicts (the head's GELU aside).
    import torch
    from transformers import BertForMaskedLM

    x, _, _ = preprocessor(tf.constant(texts[:8]))
    theirs = model.predict_on_batch(x)  # [8, 20, vocab] at the masked positions
    exported = BertForMaskedLM.from_pretrained(os.path.join(args.output, "export")).eval()
    with torch.no_grad():
        logits = exported(
            input_ids=torch.tensor(x["token_ids"].numpy()),
            attention_mask=torch.tensor(x["padding_mask"].numpy().astype("int64")),
            token_type_ids=torch.tensor(x["segment_ids"].numpy()),
        ).logits.numpy()
    positions = x["mask_positions"].numpy()
    ours_at_masks = np.take_along_axis(logits, positions[:, :, None], axis=1)
    difference = float(np.abs(ours_at_masks - theirs).max())
    agreement = float((ours_at_masks.argmax(-1) == theirs.argmax(-1)).mean())
    print(
        f"export check: max logit difference {difference:.2e}, argmax agreement {agreement:.4f}", flush=True
    )
    if agreement < 0.99:
        sys.exit(f"the transformers export does not predict what the keras-hub model does ({agreement:.3f})")


# --- the evaluator ---------------------------------------------------------------------------


def evaluate(args) -> None:
    """Masked-LM accuracy of each exported model on the same masked held-out blocks (JSON to stdout)."""
    import torch
    from transformers import BertForMaskedLM, BertTokenizerFast, DataCollatorForLanguageModeling

    tokenizer = BertTokenizerFast(str(VOCAB), do_lower_case=True)
    ids: list[int] = []
    with open(os.path.join(args.corpus_dir, "heldout.txt"), encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                ids.extend(tokenizer(line.strip(), add_special_tokens=False)["input_ids"])
            if len(ids) >= args.eval_blocks * (BLOCK - 2):
                break
    inner = BLOCK - 2
    blocks = [
        [tokenizer.cls_token_id, *ids[i * inner : (i + 1) * inner], tokenizer.sep_token_id]
        for i in range(min(args.eval_blocks, len(ids) // inner))
    ]
    torch.manual_seed(1234)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    batches = [collator([{"input_ids": b} for b in blocks[i : i + 64]]) for i in range(0, len(blocks), 64)]
    results = {}
    for name, directory in (item.split("=", 1) for item in args.models):
        model = BertForMaskedLM.from_pretrained(directory).eval()
        correct = total = 0
        with torch.no_grad():
            for batch in batches:
                logits = model(input_ids=batch["input_ids"]).logits
                labels = batch["labels"]
                masked = labels != -100
                correct += int((logits.argmax(-1)[masked] == labels[masked]).sum())
                total += int(masked.sum())
        results[name] = {"masked_lm_accuracy": correct / total, "masked_pieces": total, "blocks": len(blocks)}
    print(json.dumps(results))


# --- the driver ------------------------------------------------------------------------------


def ours_command(args, output: Path, extra: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bert_tf.pretrain",
        f"--config={args.config}",
        f"--vocab_file={VOCAB}",
        f"--corpus={os.path.join(args.corpus_dir, 'train.txt')}",
        f"--train_batch_size={args.batch_size}",
        f"--num_train_steps={args.steps}",
        f"--learning_rate={args.learning_rate}",
        f"--num_warmup_steps={round(0.1 * args.steps)}",
        f"--seed={args.seed}",
        f"--model_dir={output}",
        *extra,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus_dir", required=True)
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--config", default="bert_tiny")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--eval_blocks", type=int, default=1000)
    parser.add_argument("--skip_hf", action="store_true")
    parser.add_argument(
        "--ours",
        default="ours:",
        help="Comma-separated NAME:FLAGS contenders of bert_tf (FLAGS space-separated, may be empty).",
    )
    parser.add_argument("--ours_steps", default="", help="NAME=STEPS overrides, comma-separated.")
    parser.add_argument("--keras_hub", action="store_true", help="Train keras-hub's BertMaskedLM too.")
    parser.add_argument("--hf_train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keras_hub_train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--evaluate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hf_train:
        return hf_train(args)
    if args.keras_hub_train:
        return keras_hub_train(args)
    if args.evaluate:
        return evaluate(args)

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    shared = [f"--corpus_dir={args.corpus_dir}", f"--config={args.config}", f"--batch_size={args.batch_size}"]
    steps_of = dict(item.split("=") for item in args.ours_steps.split(",") if item)
    rows = {}
    # The peers, each trained by this script in a process of its own (--hf_train, --keras_hub_train).
    peers = [name for name, wanted in (("hf", not args.skip_hf), ("keras_hub", args.keras_hub)) if wanted]
    for name in peers:
        output = work / name
        command = [sys.executable, __file__, f"--{name}_train", f"--output={output}", f"--steps={args.steps}"]
        command += [
            *shared,
            f"--learning_rate={args.learning_rate}",
            f"--seed={args.seed}",
            f"--work_dir={work}",
        ]
        seconds, cpu = run(command, work / f"{name}.log")
        rows[name] = {"seconds": seconds, "cpu": cpu, "steps": args.steps, "export": output / "export"}
        print(f"{name}: {seconds:.1f} s ({cpu:.1f} CPU-s)", flush=True)
    for item in filter(None, args.ours.split(",")):
        name, _, flags = item.partition(":")
        output = work / name
        steps = int(steps_of.get(name, args.steps))
        options = argparse.Namespace(**{**vars(args), "steps": steps})
        seconds, cpu = run(ours_command(options, output, flags.split()), work / f"{name}.log")
        rows[name] = {"seconds": seconds, "cpu": cpu, "steps": steps, "export": output / "export"}
        print(f"{name}: {seconds:.1f} s ({cpu:.1f} CPU-s)", flush=True)
    command = [
        sys.executable,
        __file__,
        "--evaluate",
        *shared,
        f"--eval_blocks={args.eval_blocks}",
        f"--work_dir={work}",
    ]
    command += ["--models", *(f"{name}={row['export']}" for name, row in rows.items())]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    scores = json.loads(subprocess.check_output(command, env=env).decode().strip().splitlines()[-1])
    reference = rows.get("hf")
    header = f"{'contender':<10} {'steps':>6} {'wall s':>8} {'CPU s':>8} {'MLM acc':>8} {'wall/hf':>8} {'CPU/hf':>7} {'acc-hf':>7}"
    print("\n" + header)
    for name, row in rows.items():
        accuracy = scores[name]["masked_lm_accuracy"]
        ratio = f"{row['seconds'] / reference['seconds']:.2f}x" if reference else ""
        cpu_ratio = f"{row['cpu'] / reference['cpu']:.2f}x" if reference else ""
        gap = f"{100 * (accuracy - scores['hf']['masked_lm_accuracy']):+.1f}" if reference else ""
        print(
            f"{name:<10} {row['steps']:>6} {row['seconds']:>8.1f} {row['cpu']:>8.1f} {accuracy:>8.4f} "
            f"{ratio:>8} {cpu_ratio:>7} {gap:>7}"
        )
    print(f"(evaluated on {scores[next(iter(scores))]['masked_pieces']} masked pieces of held-out text)")
    (work / "results.json").write_text(
        json.dumps(
            {"rows": {k: {**v, "export": str(v["export"])} for k, v in rows.items()}, "scores": scores},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
