"""The one output policy: checked before writing, finished results kept, umask permissions."""

from __future__ import annotations

import os
import stat
import tempfile

import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.outputs import check_output, umask_permissions
from bert_tf.serving.saving import atomic_export_dir


class OutputPolicyTest(tf.test.TestCase):
    def test_fresh_resume_finished_and_overwrite(self):
        root = tempfile.mkdtemp()
        folder = os.path.join(root, "run")
        finished = ("eval_results.json", "model")
        self.assertEqual(check_output(folder, "--output_dir", overwrite=False, finished=finished), "fresh")
        self.assertFalse(os.path.exists(folder))  # nothing created
        os.makedirs(os.path.join(folder, "backup"))
        self.assertEqual(check_output(folder, "--output_dir", overwrite=False, finished=finished), "resume")
        os.makedirs(os.path.join(folder, "model"))
        with self.assertRaisesRegex(UsageError, r"holds a finished result \(model\); pass --overwrite"):
            check_output(folder, "--output_dir", overwrite=False, finished=finished)
        self.assertEqual(check_output(folder, "--output_dir", overwrite=True, finished=finished), "overwrite")

    def test_files_and_folders_in_the_wrong_place(self):
        root = tempfile.mkdtemp()
        a_file = os.path.join(root, "notes.txt")
        open(a_file, "w").close()
        with self.assertRaisesRegex(UsageError, f"is under {a_file}, which is a file"):
            check_output(
                os.path.join(a_file, "deeper", "out.jsonl"), "--output_file", overwrite=False, is_file=True
            )
        with self.assertRaisesRegex(UsageError, "is a file; pass a folder path"):
            check_output(a_file, "--output_dir", overwrite=False)
        with self.assertRaisesRegex(UsageError, "is a folder; pass a file path"):
            check_output(root, "--output_file", overwrite=False, is_file=True)
        with self.assertRaisesRegex(UsageError, "already exists; pass --overwrite"):
            check_output(a_file, "--output_file", overwrite=False, is_file=True)

    def test_export_folders_and_private_files_get_the_umask_mode(self):
        previous = os.umask(0o027)
        try:
            target = os.path.join(tempfile.mkdtemp(), "export")
            with atomic_export_dir(target) as staging:
                open(os.path.join(staging, "saved_model.pb"), "w").close()
            self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o750)
            private = os.path.join(target, "private")
            os.close(os.open(private, os.O_CREAT | os.O_WRONLY, 0o600))
            umask_permissions(private)
            self.assertEqual(stat.S_IMODE(os.stat(private).st_mode), 0o640)
        finally:
            os.umask(previous)


if __name__ == "__main__":
    tf.test.main()
