import json
import os
import re
import tempfile

import tensorflow as tf

from bert_tf.config import BertConfig, ConfigError, config_names, load_config
from bert_tf.errors import DamagedFileError

# The bert_config.json shipped with the original uncased_L-12_H-768_A-12 release.
ORIGINAL_BASE_CONFIG = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "type_vocab_size": 2,
    "vocab_size": 30522,
}


class BertConfigTest(tf.test.TestCase):
    def test_original_json_round_trips_unchanged(self):
        path = os.path.join(self.get_temp_dir(), "bert_config.json")
        with open(path, "w") as handle:
            json.dump(ORIGINAL_BASE_CONFIG, handle)
        config = BertConfig.from_json_file(path)
        self.assertEqual(config.head_size, 64)
        out = os.path.join(self.get_temp_dir(), "out.json")
        config.to_json_file(out)
        with open(out) as handle:
            self.assertEqual(json.load(handle), ORIGINAL_BASE_CONFIG)

    def test_shipped_sizes(self):
        # (layers, hidden, heads) from the original release's model table.
        expected = {
            "bert_tiny": (2, 128, 2),
            "bert_mini": (4, 256, 4),
            "bert_small": (4, 512, 8),
            "bert_medium": (8, 512, 8),
            "bert_base": (12, 768, 12),
            "bert_large": (24, 1024, 16),
        }
        self.assertContainsSubset(list(expected) + ["demo"], config_names())
        for name, (layers, hidden, heads) in expected.items():
            config = load_config(name)
            self.assertEqual(
                (config.num_hidden_layers, config.hidden_size, config.num_attention_heads),
                (layers, hidden, heads),
            )
            self.assertEqual(config.intermediate_size, 4 * hidden)
        self.assertEqual(load_config("bert_base").to_dict(), ORIGINAL_BASE_CONFIG)

    def test_load_by_path(self):
        path = os.path.join(self.get_temp_dir(), "my.json")
        load_config("bert_mini").to_json_file(path)
        self.assertEqual(load_config(path), load_config("bert_mini"))

    def test_unknown_name_lists_choices(self):
        with self.assertRaisesRegex(ConfigError, r"no config named 'bert_huge'.*bert_base"):
            load_config("bert_huge")

    def test_validation_messages(self):
        base = dict(ORIGINAL_BASE_CONFIG)
        cases = [
            (
                {"num_attention_heads": 7},
                r"hidden_size \(768\) is not divisible by num_attention_heads \(7\)",
            ),
            ({"hidden_act": "swishy"}, r"unknown hidden_act 'swishy'"),
            ({"num_hidden_layers": 0}, r"num_hidden_layers must be a positive integer, got 0"),
            ({"vocab_size": -5}, r"vocab_size must be a positive integer"),
            ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob must be in \[0, 1\)"),
            ({"hidden_layers": 12}, r"unknown keys \['hidden_layers'\]"),
        ]
        for change, message in cases:
            with self.subTest(change=change), self.assertRaisesRegex(ConfigError, message):
                BertConfig.from_dict({**base, **change})

    def test_bad_files(self):
        with self.assertRaisesRegex(ConfigError, "config file not found"):
            BertConfig.from_json_file(os.path.join(tempfile.gettempdir(), "nope", "x.json"))
        path = os.path.join(self.get_temp_dir(), "broken.json")
        whole = load_config("bert_tiny").to_json_string()
        for cut in (1, len(whole) // 2, len(whole) - 3):
            with self.subTest(cut=cut):
                with open(path, "w") as handle:
                    handle.write(whole[:cut])
                with self.assertRaisesRegex(
                    DamagedFileError,
                    f"^{re.escape(path)} is truncated or corrupt \\(not valid JSON: .*\\); copy it",
                ):
                    BertConfig.from_json_file(path)
        # A bad value names the file it came from.
        with open(path, "w") as handle:
            json.dump({**ORIGINAL_BASE_CONFIG, "hidden_size": "big"}, handle)
        with self.assertRaisesRegex(
            ConfigError, f"^{re.escape(path)}: hidden_size must be a positive integer, got 'big'$"
        ):
            BertConfig.from_json_file(path)
        with self.assertRaisesRegex(
            ConfigError, "^config.json: hidden_dropout_prob must be a number, got 'x'$"
        ):
            BertConfig.from_hf_dict({**ORIGINAL_BASE_CONFIG, "hidden_dropout_prob": "x"})

    def test_hugging_face_config(self):
        hf = {
            **ORIGINAL_BASE_CONFIG,
            "architectures": ["BertForMaskedLM"],
            "model_type": "bert",
            "layer_norm_eps": 1e-12,
            "pad_token_id": 0,
            "position_embedding_type": "absolute",
            "transformers_version": "4.6.0.dev0",
        }
        # transformers' "gelu" is the erf form (our "gelu_exact"); its "gelu_new" is the
        # original BERT's tanh form (our "gelu").
        self.assertEqual(
            BertConfig.from_hf_dict(hf), load_config("bert_base").replace(hidden_act="gelu_exact")
        )
        self.assertEqual(BertConfig.from_hf_dict({**hf, "hidden_act": "gelu_new"}), load_config("bert_base"))
        for ours, theirs in (("gelu", "gelu_new"), ("gelu_exact", "gelu"), ("relu", "relu")):
            config = load_config("bert_base").replace(hidden_act=ours)
            self.assertEqual(config.to_hf_dict()["hidden_act"], theirs)
            self.assertEqual(BertConfig.from_hf_dict({**hf, **config.to_hf_dict()}), config)
        with self.assertRaisesRegex(ConfigError, "model_type is 'roberta'"):
            BertConfig.from_hf_dict({**hf, "model_type": "roberta"})


if __name__ == "__main__":
    tf.test.main()
