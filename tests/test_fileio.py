"""bert_tf.fileio on the local disk and on TensorFlow's in-memory ram:// filesystem."""

import os
import tempfile
import uuid

import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import InputFileError


def _ram_dir() -> str:
    return f"ram://fileio_test_{uuid.uuid4().hex[:8]}"


class FileIoTest(tf.test.TestCase):
    def test_round_trips_on_local_and_ram(self):
        for root in (tempfile.mkdtemp(), _ram_dir()):
            path = fileio.join(root, "a", "b.json")
            fileio.write_json(path, {"x": [1, 2]})
            self.assertEqual(fileio.read_json(path), {"x": [1, 2]})
            self.assertTrue(fileio.isfile(path))
            self.assertTrue(fileio.isdir(fileio.join(root, "a")))
            self.assertEqual(fileio.listdir(fileio.join(root, "a")), ["b.json"])  # no temporary left
            fileio.copy(path, fileio.join(root, "c.json"))
            self.assertTrue(fileio.same_contents(path, fileio.join(root, "c.json")))
            with fileio.writing(fileio.join(root, "big.txt")) as handle:
                handle.write("one\ntwo\n")
            with fileio.open_binary(fileio.join(root, "big.txt")) as handle:
                self.assertEqual(handle.readline(2), b"on")  # a limit works on every filesystem
                handle.seek(4)
                self.assertEqual(handle.readline(), b"two\n")
                self.assertEqual(handle.tell(), 8)
            fileio.rmtree(root)
            self.assertFalse(fileio.exists(path))

    def test_a_failed_stream_leaves_nothing(self):
        root = tempfile.mkdtemp()
        target = os.path.join(root, "out.txt")
        with self.assertRaises(RuntimeError), fileio.writing(target) as handle:
            handle.write("half")
            raise RuntimeError("interrupted")
        self.assertEqual(os.listdir(root), [])

    def test_partial_is_all_or_nothing_and_keeps_the_old_content_on_failure(self):
        for root in (tempfile.mkdtemp(), _ram_dir()):
            target = fileio.join(root, "sub", "out.tfrecord")
            with fileio.partial(target) as partial:
                self.assertNotEqual(partial, target)
                with tf.io.TFRecordWriter(partial) as writer:  # any writer, given the name
                    writer.write(b"whole")
            self.assertEqual(list(tf.data.TFRecordDataset(target).as_numpy_iterator()), [b"whole"])
            with self.assertRaises(KeyboardInterrupt), fileio.partial(target) as partial:
                fileio.write_text(partial, "half")
                raise KeyboardInterrupt
            self.assertEqual(fileio.listdir(fileio.join(root, "sub")), ["out.tfrecord"])
            self.assertEqual(list(tf.data.TFRecordDataset(target).as_numpy_iterator()), [b"whole"])
            fileio.rmtree(root)

    def test_expand_files_sorts_each_pattern_and_lists_a_file_once(self):
        root = tempfile.mkdtemp()
        for name in ("b.txt", "a.txt", "c.md"):
            open(os.path.join(root, name), "w").close()
        a, b, c = (os.path.join(root, name) for name in ("a.txt", "b.txt", "c.md"))
        self.assertEqual(fileio.expand_files(f"{root}/*.md, {root}/*.txt,{b}", "input_file"), [c, a, b])
        self.assertEqual(fileio.expand_files([b, a], "input_file"), [b, a])
        ram = _ram_dir()
        fileio.write_text(fileio.join(ram, "x.txt"), "x")
        self.assertEqual(fileio.expand_files(f"{ram}/*.txt", "corpus"), [fileio.join(ram, "x.txt")])
        fileio.rmtree(ram)

    def test_expand_files_errors_name_the_flag(self):
        root = tempfile.mkdtemp()
        os.makedirs(os.path.join(root, "folder"))
        cases = {
            f"{root}/nothing_*.txt": f"--corpus={root}/nothing_*.txt matches no file",
            f"{root}/fold*": f"--corpus={root}/fold* names the directory {root}/folder; pass the files in it",
            "bogus://bucket/*.txt": "--corpus=bogus://bucket/*.txt: TensorFlow has no filesystem",
            " , ": "--corpus names no file",
        }
        for patterns, message in cases.items():
            with self.assertRaises(InputFileError) as caught:
                fileio.expand_files(patterns, "corpus")
            self.assertStartsWith(str(caught.exception), message)

    def test_unknown_scheme_names_it_and_what_is_supported(self):
        with self.assertRaises(fileio.FileSystemError) as caught:
            fileio.exists("bogus://bucket/model")
        message = str(caught.exception)
        self.assertIn("'bogus://'", message)
        self.assertIn("gs://", message)
        self.assertIn("bogus://bucket/model", message)

    def test_unwritable_place_is_a_clear_error(self):
        blocker = os.path.join(tempfile.mkdtemp(), "a_file")
        open(blocker, "w").close()
        with self.assertRaisesRegex(fileio.FileSystemError, "cannot create the directory .*a_file/model"):
            fileio.makedirs(os.path.join(blocker, "model"))
        with self.assertRaisesRegex(fileio.FileSystemError, "cannot write"):
            fileio.write_text(os.path.join(blocker, "x.txt"), "x")

    def test_atomic_rename_only_where_the_filesystem_has_it(self):
        self.assertTrue(fileio.atomic_rename_supported("/tmp/x"))
        self.assertTrue(fileio.atomic_rename_supported("ram://x"))
        self.assertFalse(fileio.atomic_rename_supported("gs://bucket/x"))
        self.assertEqual(fileio.scheme("gs://bucket/x"), "gs")
        self.assertEqual(fileio.scheme("relative/path"), "")

    def test_copy_tree_copies_the_named_files_last(self):
        source, target = tempfile.mkdtemp(), _ram_dir()
        for name in ("saved_model.pb", "variables/variables.index", "assets/vocab.txt"):
            os.makedirs(os.path.dirname(os.path.join(source, name)), exist_ok=True)
            with open(os.path.join(source, name), "w") as handle:
                handle.write(name)
        order = []
        original = fileio.copy

        def recording(from_path, to_path):
            order.append(os.path.relpath(from_path, source))
            return original(from_path, to_path)

        fileio.copy = recording
        try:
            fileio.copy_tree(source, target, last=("saved_model.pb",))
        finally:
            fileio.copy = original
        self.assertEqual(order[-1], "saved_model.pb")
        self.assertCountEqual(order, ["saved_model.pb", "variables/variables.index", "assets/vocab.txt"])
        self.assertEqual(fileio.read_text(fileio.join(target, "assets/vocab.txt")), "assets/vocab.txt")
