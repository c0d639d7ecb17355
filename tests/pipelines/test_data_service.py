"""tf.data service for the online pipeline: the graph-only reader, dynamic sharding across
consumers, a stopped worker, a worker in another process, and unreachable addresses."""

import collections
import tempfile
import threading
import time
from pathlib import Path

import pytest
import tensorflow as tf

from bert_tf.errors import UsageError
from pipelines import data_service, pretraining_dataset, text_dataset
from tests.harness.data import write_numbered_corpus
from tests.harness.processes import free_port, local_service, worker_process

REPO = Path(__file__).resolve().parents[2]
VOCAB = str(REPO / "tests" / "fixtures" / "bert_uncased_vocab.txt")


def rows(batch) -> list[tuple]:
    return [tuple(row) for row in batch["input_ids"].numpy().tolist()]


class GraphReaderTest(tf.test.TestCase):
    def test_graph_reader_reads_the_blocks_of_the_python_reader(self):
        path = Path(tempfile.mkdtemp()) / "corpus.txt"
        write_numbered_corpus(path, documents=8)
        # Invalid UTF-8, surrounding whitespace and a whitespace-only separator line.
        text = (
            path.read_bytes().replace(b"document 3 ", b"document \xff3 ", 1).replace(b"\n\n", b"\n  \t\n", 1)
        )
        path.write_bytes(b"  " + text)
        reading = text_dataset._Reading([str(path)], 1, None, 4, 1, 0, None)
        python = [
            (int(b), p[2].numpy().tolist(), p[3].numpy().tolist())
            for b, p in enumerate(text_dataset._block_stream(reading))
        ]
        graph = [
            (int(block), lines.numpy().tolist(), lengths.numpy().tolist())
            for _, block, lines, lengths in text_dataset._graph_block_stream(reading)
        ]
        self.assertLen(python, 2)
        self.assertEqual(graph, python)
        self.assertIn("document \ufffd3".encode(), b"".join(graph[0][1]))

    def test_the_service_pipeline_runs_no_python(self):
        path = write_numbered_corpus(Path(tempfile.mkdtemp()) / "corpus.txt", documents=20)
        dataset = pretraining_dataset(
            path,
            vocab_file=VOCAB,
            batch_size=4,
            max_seq_length=32,
            max_predictions_per_seq=5,
            seed=1,
            for_data_service=True,
        )
        graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
        ops = {node.op for node in graph.node}
        for function in graph.library.function:
            ops.update(node.op for node in function.node_def)
        self.assertIn("TextLineDataset", ops)
        self.assertFalse(ops & {"PyFunc", "PyFuncStateless", "EagerPyFunc", "GeneratorDataset"})


# The small, unshuffled pipeline that consumers of the service are compared on (as built for it).
SERVED_OPTIONS = dict(
    vocab_file=VOCAB,
    batch_size=4,
    max_seq_length=32,
    max_predictions_per_seq=5,
    seed=1,
    shuffle=False,
    repeat=False,
    drop_remainder=False,
    for_data_service=True,
)


class DataServiceTest(tf.test.TestCase):
    def test_consumers_of_one_job_share_the_batches_each_read_once(self):
        work = Path(tempfile.mkdtemp())
        files = [write_numbered_corpus(work / f"part{i}.txt", documents=12, first=100 * i) for i in range(3)]
        options = SERVED_OPTIONS
        expected = collections.Counter(
            row for batch in pretraining_dataset(files, **options) for row in rows(batch)
        )
        dispatcher, _workers = local_service()
        # Each consumer asks for one batch at a time: with tf.data's default, the first one's client
        # can fetch the whole small job before the second has joined (seen on a busy machine).
        trainers = [
            iter(
                data_service.from_service(
                    pretraining_dataset(files, **options),
                    dispatcher.target,
                    "shared",
                    max_outstanding_requests=1,
                )
            )
            for _ in range(2)
        ]
        seen = [collections.Counter(), collections.Counter()]
        active = [0, 1]
        while active:  # the trainers take turns, as two hosts reading at once would
            for index in list(active):
                try:
                    seen[index].update(rows(next(trainers[index])))
                except StopIteration:
                    active.remove(index)
        self.assertEqual(seen[0] + seen[1], expected)
        self.assertGreater(sum(seen[0].values()), 0)
        self.assertGreater(sum(seen[1].values()), 0)

    @pytest.mark.slow  # generates two record sets: over a minute on 2 busy cores
    def test_records_go_through_the_service_unchanged(self):
        from pipelines.generate import create_pretraining_data
        from pipelines.settings import GenerationConfig

        work = Path(tempfile.mkdtemp())
        text = write_numbered_corpus(work / "corpus.txt", documents=40)
        dispatcher, _workers = local_service()
        for dynamic_masking in (False, True):
            files = [str(work / f"{dynamic_masking}-{index}.tfrecord") for index in range(2)]
            create_pretraining_data(
                GenerationConfig(
                    input_file=text,
                    output_file=",".join(files),
                    vocab_file=VOCAB,
                    max_seq_length=32,
                    max_predictions_per_seq=5,
                    dupe_factor=1,
                    dynamic_masking=dynamic_masking,
                ),
                progress=False,
            )
            options = SERVED_OPTIONS
            local = collections.Counter(
                row for batch in pretraining_dataset(files, **options) for row in rows(batch)
            )
            served = data_service.from_service(
                pretraining_dataset(files, **options), dispatcher.target, f"records-{dynamic_masking}"
            )
            self.assertEqual(collections.Counter(row for batch in served for row in rows(batch)), local)

    def test_a_killed_worker_is_survived(self):
        work = Path(tempfile.mkdtemp())
        files = [write_numbered_corpus(work / f"part{i}.txt", documents=12, first=100 * i) for i in range(4)]
        dispatcher, _ = local_service(workers=0, worker_timeout_ms=1000)
        workers = [worker_process(dispatcher) for _ in range(2)]
        try:
            dataset = pretraining_dataset(
                files,
                vocab_file=VOCAB,
                batch_size=4,
                max_seq_length=32,
                max_predictions_per_seq=5,
                seed=1,
                shuffle_buffer_size=16,
                for_data_service=True,
            )
            iterator = iter(data_service.from_service(dataset, dispatcher.target, "job"))
            for _ in range(5):
                next(iterator)
            workers[1].kill()  # a preempted worker machine
            after = []

            def read_on():
                for _ in range(20):
                    after.append(next(iterator))

            reader = threading.Thread(target=read_on, daemon=True)
            reader.start()
            reader.join(timeout=120)
            self.assertLen(after, 20, "reading hung after a worker was killed")
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()

    @pytest.mark.slow  # a worker process's start-up; the graph check above is the fast guard
    def test_a_worker_in_another_process_runs_the_pipeline(self):
        path = write_numbered_corpus(Path(tempfile.mkdtemp()) / "corpus.txt", documents=20)
        dispatcher = tf.data.experimental.service.DispatchServer()
        worker = worker_process(dispatcher)
        try:
            # The compared pipeline, repeated as training reads it (pretraining_dataset's defaults).
            dataset = pretraining_dataset(path, **{**SERVED_OPTIONS, "repeat": True, "drop_remainder": True})
            local = [rows(batch) for batch in dataset.take(3)]
            served = [
                rows(batch) for batch in data_service.from_service(dataset, dispatcher.target, "j").take(3)
            ]
            self.assertEqual(served, local)  # one worker, one file: the same batches in order
        finally:
            worker.kill()
            worker.wait()


class AddressTest(tf.test.TestCase):
    def test_an_unreachable_dispatcher_is_an_error_within_seconds(self):
        port = free_port()
        start = time.monotonic()
        with self.assertRaisesRegex(
            data_service.DataServiceError,
            f"no tf.data service dispatcher answers at localhost:{port}.*--dispatcher_port={port}",
        ):
            data_service.check_reachable(f"grpc://localhost:{port}", timeout_s=2)
        self.assertLess(time.monotonic() - start, 10)

    def test_a_malformed_address_is_a_usage_error(self):
        for address in ("localhost", "http://host:1", "grpc://host:port"):
            with self.assertRaisesRegex(UsageError, "write grpc://HOST:PORT"):
                data_service.split_address(address)

    def test_the_job_is_the_run_and_phase(self):
        self.assertEqual(data_service.job_name("/runs/a", 0), data_service.job_name("/runs/a", 0))
        self.assertNotEqual(data_service.job_name("/runs/a", 0), data_service.job_name("/runs/a", 1))
        self.assertNotEqual(data_service.job_name("/runs/a", 0), data_service.job_name("/runs/b", 0))
