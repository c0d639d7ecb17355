"""tf.data service benchmark: sequences/s delivered to one trainer by 1 and 2 local workers.

The peer is the in-process pipeline (`pipelines.pretraining_dataset` iterated by the
trainer itself). The contenders read the same pipeline, built for the service
(`for_data_service=True`: the graph-only reader), through an in-process dispatcher and 1
or 2 worker processes started with `python -m pipelines.data_service --worker` on this
machine, as a deployment beside a training host would run them. All read the same
corpus file (the embedded corpus repeated); each contender takes turns with the peer,
`rounds` times, and reports its median turn against the peer's.

On one machine the workers share its cores with the trainer, so the figure says what the
service costs (serialization, gRPC) more than what it gains; the gain comes from workers
on other machines' cores.

  python bench/data_service.py --seconds=20 --rounds=5
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from absl import app, flags  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FLAGS = flags.FLAGS
flags.DEFINE_float("seconds", 20.0, "How long each pipeline is measured in all (after warm-up).")
flags.DEFINE_integer("rounds", 5, "Turns each pipeline takes; each reports its median turn.")
flags.DEFINE_integer("batch_size", 256, "Sequences per batch.")
flags.DEFINE_integer("repeat", 40, "Copies of the embedded corpus in the benchmark file.")
flags.DEFINE_integer("files", 4, "The corpus is cut into this many files (the units the workers share).")
flags.DEFINE_string("vocab_file", str(ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt"), "Vocab file.")


def _measure(iterator, seconds: float) -> float:
    """Iterates for `seconds`; returns sequences/s."""
    sequences = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        sequences += int(next(iterator)["input_ids"].shape[0])
    return sequences / (time.perf_counter() - start)


def _split_corpus(path: Path, parts: int) -> list[str]:
    """The corpus cut at document boundaries into `parts` files."""
    documents = path.read_text().split("\n\n")
    size = -(-len(documents) // parts)
    files = []
    for index in range(parts):
        part = path.with_name(f"part{index}.txt")
        part.write_text("\n\n".join(documents[index * size : (index + 1) * size]) + "\n")
        files.append(str(part))
    return files


def main(argv: list[str]) -> None:
    del argv
    import tensorflow as tf

    from pipelines import corpus, data_service, pretraining_dataset

    path = Path(corpus.write_corpus(Path(tempfile.mkdtemp()) / "corpus.txt", repeat=FLAGS.repeat))
    files = _split_corpus(path, FLAGS.files)
    print(
        f"corpus {path.stat().st_size / 1e6:.1f} MB in {FLAGS.files} files, batch {FLAGS.batch_size}, "
        f"sequence length 128, {os.cpu_count()} cores"
    )
    options = dict(vocab_file=FLAGS.vocab_file, batch_size=FLAGS.batch_size, seed=1)
    dispatcher = tf.data.experimental.service.DispatchServer()
    address = dispatcher.target.split("://")[1]

    def start_worker():
        command = [sys.executable, "-m", "pipelines.data_service", "--worker", f"--dispatcher={address}"]
        command += ["--worker_port=0", "--worker_host=localhost"]
        return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    workers = []
    try:
        peer = iter(pretraining_dataset(files, **options))
        for _ in range(5):  # warm-up: tracing, first blocks, shuffle buffers
            next(peer)
        for count in (1, 2):
            while len(workers) < count:
                workers.append(start_worker())
            served = pretraining_dataset(files, **options, for_data_service=True)
            # A job of its own per contender, read only while it is measured (every worker
            # serves every job: the 1-worker figure is taken before the second starts).
            contender = iter(data_service.from_service(served, dispatcher.target, f"bench-{count}"))
            for _ in range(5):
                next(contender)
            turns: dict[str, list[float]] = {"peer": [], "served": []}
            for _ in range(FLAGS.rounds):
                turns["peer"].append(_measure(peer, FLAGS.seconds / FLAGS.rounds))
                turns["served"].append(_measure(contender, FLAGS.seconds / FLAGS.rounds))
            del contender
            medians = {name: sorted(values)[len(values) // 2] for name, values in turns.items()}
            print(
                f"tf.data service, {count} worker(s): {medians['served']:8.0f} sequences/s; in-process "
                f"pipeline (peer): {medians['peer']:8.0f} sequences/s; ratio "
                f"{medians['served'] / medians['peer']:.2f}x (medians of {FLAGS.rounds} turns each)",
                flush=True,
            )
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


if __name__ == "__main__":
    app.run(main)
