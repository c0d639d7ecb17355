import importlib

import tensorflow as tf
from absl import flags

# Every command-line module and a flag it must offer. Several share names
# (--init_checkpoint, --vocab_file, --input_file, ...), so none may define flags on import.
COMMANDS = {
    "bert_tf.pretrain": "train_batch_size",
    "bert_tf.finetune": "task",
    "bert_tf.export": "kind",
    "bert_tf.extract_features": "layers",
    "bert_tf.fill_mask": "top_k",
    "pipelines.create_pretraining_data": "dupe_factor",
    "pipelines.build_vocab": "vocab_size",
}


class CommandFlagsTest(tf.test.TestCase):
    def test_commands_import_side_by_side_and_define_their_own_flags(self):
        modules = {name: importlib.import_module(name) for name in COMMANDS}
        for name, flag in COMMANDS.items():
            with self.subTest(command=name):
                self.assertNotIn(flag, flags.FLAGS)  # nothing defined at import
                flag_values = flags.FlagValues()
                modules[name].define_flags(flag_values)
                self.assertIn(flag, flag_values)

    def test_strategy_flags_are_shared(self):
        required = {"bert_tf.pretrain": [], "bert_tf.finetune": ["--task=sst2", "--output_dir=/tmp/o"]}
        for name, argv in required.items():
            flag_values = flags.FlagValues()
            importlib.import_module(name).define_flags(flag_values)
            flag_values(["prog", "--tpu=my-tpu", "--strategy=tpu", *argv])
            self.assertEqual(
                (flag_values.tpu, flag_values.strategy, flag_values.num_gpus), ("my-tpu", "tpu", 0)
            )


if __name__ == "__main__":
    tf.test.main()
