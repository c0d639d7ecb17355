"""Every program, run as a user would, on the ordinary mistakes: one clear line, nothing written.

Each case runs a program in a fresh process and checks the exit status (2: a bad command
line, 1: a file or data that cannot be used), that stderr is exactly one line naming the
problem (no traceback, no TensorFlow start-up noise), and that the output folder is byte
for byte what it was. A process costs a TensorFlow import (seconds), so the default run
takes one case per program and the rest of the table is marked slow.

The inputs are real: a checkpoint written by our export, and (made once, when a case first
needs them) a finished fine-tuning run and a finished pretraining run; damaged files are
copies of those cut at several points.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORDS = "the cat sat on mat a dog ran to park good bad movie was great terrible".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *WORDS]
CONFIG = {
    "vocab_size": len(VOCAB),
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 64,
}


def snapshot(path: str) -> dict | None:
    """Relative path -> bytes (None for a folder) of everything under `path`; None if absent."""
    if not os.path.lexists(path):
        return None
    if not os.path.isdir(path):
        with open(path, "rb") as file:
            return {"": file.read()}
    content = {}
    for root, dirs, files in os.walk(path):
        for name in dirs:
            content[os.path.relpath(os.path.join(root, name), path)] = None
        for name in files:
            with open(os.path.join(root, name), "rb") as file:
                content[os.path.relpath(os.path.join(root, name), path)] = file.read()
    return content


def make_fixtures(root: str) -> dict[str, str]:
    """A vocab, a config, a pretrained checkpoint written by our export, data files."""
    from bert_tf.checkpoints import export_pretrained
    from bert_tf.config import BertConfig
    from bert_tf.models import BertPretrainer

    paths = {name: os.path.join(root, name) for name in ("vocab.txt", "config.json", "ckpt", "train.csv")}
    with open(paths["vocab.txt"], "w", encoding="utf-8") as file:
        file.write("\n".join(VOCAB) + "\n")
    with open(paths["config.json"], "w", encoding="utf-8") as file:
        json.dump(CONFIG, file)
    model = BertPretrainer(BertConfig.from_dict(CONFIG))
    export_pretrained(model, paths["ckpt"], vocab_file=paths["vocab.txt"], lower_case=True)
    with open(paths["train.csv"], "w", encoding="utf-8") as file:
        file.write("text,label\nthe movie was great,pos\nthe movie was terrible,neg\n")
    paths["no_label.csv"] = os.path.join(root, "no_label.csv")
    with open(paths["no_label.csv"], "w", encoding="utf-8") as file:
        file.write("text,stars\nthe movie was great,5\n")
    paths["empty_text.csv"] = os.path.join(root, "empty_text.csv")
    with open(paths["empty_text.csv"], "w", encoding="utf-8") as file:
        file.write('text,label\nthe movie was great,pos\n"",neg\n')
    paths["random.bin"] = os.path.join(root, "random.bin")
    with open(paths["random.bin"], "wb") as file:
        file.write(os.urandom(200_000))
    paths["corpus.txt"] = os.path.join(root, "corpus.txt")
    with open(paths["corpus.txt"], "w", encoding="utf-8") as file:
        file.write("the cat sat on the mat.\na dog ran to the park.\n\nthe movie was good.\nit was great.\n")
    paths["empty.txt"] = os.path.join(root, "empty.txt")
    open(paths["empty.txt"], "w").close()
    paths["unrelated"] = os.path.join(root, "unrelated")
    os.makedirs(paths["unrelated"])
    for name in ("notes.txt", "data.index"):
        with open(os.path.join(paths["unrelated"], name), "w") as file:
            file.write("not a checkpoint\n")
    paths["a_file"] = paths["corpus.txt"]
    return paths


def finetuning_run(root: str, paths: dict[str, str]) -> str:
    """The output_dir of a finished fine-tuning run (model/ inside) on the fixtures' checkpoint."""
    from bert_tf.tasks.runner import run
    from bert_tf.tasks.settings import FinetuneSettings

    output_dir = os.path.join(root, "finetuned")
    run(
        FinetuneSettings.of(
            task="classification",
            output_dir=output_dir,
            init_checkpoint=paths["ckpt"],
            train_file=paths["train.csv"],
            max_seq_length=16,
            train_batch_size=2,
            num_train_epochs=1.0,
            verbose=0,
        )
    )
    return output_dir


def pretraining_run(root: str, paths: dict[str, str]) -> str:
    """The model_dir of a finished pretraining run (checkpoints and export/) on the fixtures' corpus."""
    from bert_tf.training.pretraining import run_pretraining
    from bert_tf.training.settings import PretrainingConfig

    model_dir = os.path.join(root, "pretrained")
    run_pretraining(
        PretrainingConfig(
            model_dir=model_dir,
            config=paths["config.json"],
            vocab_file=paths["vocab.txt"],
            corpus=paths["corpus.txt"],
            max_seq_length=32,
            max_predictions_per_seq=5,
            train_batch_size=2,
            num_train_steps=2,
            num_warmup_steps=1,
            steps_per_loop=1,
            save_checkpoints_steps=2,
        )
    )
    return model_dir


def truncated_copy(source_dir: str, target_dir: str, name: str, keep: float) -> str:
    """A copy of a checkpoint folder with file `name` cut to `keep` of its length."""
    shutil.rmtree(target_dir, ignore_errors=True)
    shutil.copytree(source_dir, target_dir)
    path = os.path.join(target_dir, name)
    size = os.path.getsize(path)
    with open(path, "r+b") as file:
        file.truncate(int(size * keep))
    return target_dir


def run_program(module: str, args: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")}
    env["PYTHONPATH"] = REPO
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


class BadInputTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp(prefix="bert_tf_bad_input_")
        cls.paths = make_fixtures(cls.root)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def assert_refused(self, module, args, status, message, output):
        """`module args` exits `status`, says `message` on one line, leaves `output` unchanged."""
        before = snapshot(output)
        result = run_program(module, args)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        if len(lines) > 1 and re.match(r"(model_dir|output_dir|export_dir|output_file): ", lines[0]):
            lines = lines[1:]  # a run names its output first, before its checks
        self.assertEqual(result.returncode, status, result.stderr[-3000:])
        self.assertNotIn("Traceback", result.stderr)
        self.assertLen(lines, 1, result.stderr[-3000:])
        self.assertTrue(lines[0].startswith(f"{module}: error: "), lines[0])
        self.assertIn(message, lines[0])
        self.assertEqual(snapshot(output), before, f"{output} changed")

    def assert_runs(self, module, args) -> subprocess.CompletedProcess:
        """`module args` succeeds, and its stderr holds nothing a user would take for an error."""
        result = run_program(module, args)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        for noise in ("Traceback", "error", "Error", "warning", "WARNING", "INFO:", "E0000"):
            self.assertNotIn(noise, result.stderr)
        return result

    @classmethod
    def fixture(cls, name: str) -> str:
        """A fixture that costs a run to make ("finetuned", "pretrained"): made once, when first used."""
        if name not in cls.paths:
            make = {"finetuned": finetuning_run, "pretrained": pretraining_run}[name]
            cls.paths[name] = make(cls.root, cls.paths)
        return cls.paths[name]

    def output(self, name: str, existing: bool = False) -> str:
        path = os.path.join(self.root, "out", name)
        if existing:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "keep.txt"), "w") as file:
                file.write("the user's file\n")
        return path

    # --- one case per program: the default run -------------------------------------------

    def test_finetune_missing_vocab(self):
        out = self.output("finetune_missing_vocab")
        self.assert_refused(
            "bert_tf.finetune",
            [
                "--task=classification",
                f"--output_dir={out}",
                f"--bert_config_file={self.paths['config.json']}",
                "--vocab_file=/no/such/vocab.txt",
                f"--train_file={self.paths['train.csv']}",
            ],
            1,
            "vocab file not found: /no/such/vocab.txt",
            out,
        )

    def test_pretrain_negative_learning_rate(self):
        out = self.output("pretrain_lr", existing=True)
        self.assert_refused(
            "bert_tf.pretrain",
            [f"--model_dir={out}", "--learning_rate=-1", f"--corpus={self.paths['corpus.txt']}"],
            2,
            "--learning_rate must be > 0, got -1.0",
            out,
        )

    def test_create_pretraining_data_random_bytes(self):
        out = self.output("records_random")
        self.assert_refused(
            "pipelines.create_pretraining_data",
            [
                f"--input_file={self.paths['random.bin']}",
                f"--output_file={out}/train.tfrecord",
                f"--vocab_file={self.paths['vocab.txt']}",
            ],
            1,
            "are not text",
            out,
        )

    def test_pretrain_a_latin1_corpus(self):
        # A new user's first corpus in Latin-1: refused before anything is written, naming the
        # file, the first bad line, the share of bad lines and the fix.
        corpus = os.path.join(self.root, "latin1_corpus.txt")
        lines = [
            f"zeile {i} über die größe." if i % 5 == 0 else f"line {i} of plain text." for i in range(50)
        ]
        with open(corpus, "wb") as file:
            file.write("\n".join(lines).encode("latin-1") + b"\n")
        out = self.output("pretrain_latin1")
        self.assert_refused(
            "bert_tf.pretrain",
            [f"--model_dir={out}", f"--corpus={corpus}", f"--vocab_file={self.paths['vocab.txt']}"],
            1,
            f"{corpus} is not UTF-8 text: 10 of the 50 lines read (20.0%) hold bytes that are not UTF-8, the "
            f"first at line 1 (b'zeile 0 \\xfcber die gr\\xf6\\xdfe.'); the tokenizer would drop those bytes",
            out,
        )

    def test_export_quantize_a_kind_that_cannot_be(self):
        out = self.output("export_quantize_preprocessor")
        self.assert_refused(
            "bert_tf.export",
            ["--kind=preprocessor", f"--init_checkpoint={self.paths['ckpt']}", f"--export_dir={out}",
             "--quantize=int8"],
            2,
            "--kind=preprocessor cannot be quantized: --quantize=int8 applies to --kind=task and --kind=encoder "
            "and --kind=tflite",
            out,
        )  # fmt: skip

    def test_extract_features_output_under_a_file(self):
        out = os.path.join(self.paths["a_file"], "features.jsonl")
        self.assert_refused(
            "bert_tf.extract_features",
            [
                f"--input_file={self.paths['corpus.txt']}",
                f"--output_file={out}",
                f"--init_checkpoint={self.paths['ckpt']}",
            ],
            2,
            "which is a file, not a folder",
            self.paths["a_file"],
        )

    def test_fill_mask_without_text_and_build_vocab_bad_size(self):
        self.assert_refused(
            "bert_tf.fill_mask",
            [f"--init_checkpoint={self.paths['ckpt']}"],
            2,
            "give one or more texts",
            self.root,
        )
        out = self.output("vocab_bad_size")
        self.assert_refused(
            "pipelines.build_vocab",
            [f"--input_file={self.paths['corpus.txt']}", "--vocab_size=3", f"--output_file={out}/vocab.txt"],
            2,
            "--vocab_size must be > 5",
            out,
        )

    @pytest.mark.slow  # test_cli_flags' HelpShortTest: quiet, and exactly the program's own flags
    def test_help_is_quiet(self):
        result = run_program("bert_tf.finetune", ["--helpshort"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr.strip(), "")
        self.assertIn("--learning_rate", result.stdout)
        self.assertIn("--[no]overwrite", result.stdout)
        self.assertNotIn("--verbosity", result.stdout)  # absl's own flags: --helpfull

    # --- the rest of the table --------------------------------------------------------------

    @pytest.mark.slow  # the check: test_integrity's keras archive; finetune's refusal: test_finetune_missing_vocab
    def test_finetune_from_a_truncated_model_keras(self):
        damaged = os.path.join(self.root, "model_keras_default")
        truncated_copy(os.path.join(self.fixture("finetuned"), "model"), damaged, "model.keras", 0.5)
        out = self.output("finetune_model_keras")
        self.assert_refused(
            "bert_tf.finetune",
            ["--task=classification", f"--init_checkpoint={damaged}", f"--output_dir={out}",
             f"--train_file={self.paths['train.csv']}"],
            1,
            f"{damaged}/model.keras is truncated or corrupt (not a complete zip archive",
            out,
        )  # fmt: skip

    @pytest.mark.slow  # the check: test_integrity's safetensors; export's refusal: test_export_quantize_...
    def test_export_truncated_safetensors(self):
        damaged = os.path.join(self.root, "hf_truncated")
        truncated_copy(self.paths["ckpt"], damaged, "model.safetensors", 0.6)
        for name in ("bert_config.json", "bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
            os.remove(os.path.join(damaged, name))
        os.remove(os.path.join(damaged, "checkpoint"))
        out = self.output("export_truncated")
        self.assert_refused(
            "bert_tf.export",
            ["--kind=encoder", f"--init_checkpoint={damaged}", f"--export_dir={out}"],
            1,
            "model.safetensors is truncated or corrupt (expected",
            out,
        )

    @pytest.mark.slow
    def test_finetune_bad_data_and_values(self):
        base = [
            "--task=classification",
            f"--bert_config_file={self.paths['config.json']}",
            f"--vocab_file={self.paths['vocab.txt']}",
            "--max_seq_length=32",  # the test model has 64 positions
        ]
        train = f"--train_file={self.paths['train.csv']}"
        cases = [
            ([f"--train_file={self.paths['no_label.csv']}"], 1, "no column 'label'"),
            ([f"--train_file={self.paths['empty_text.csv']}"], 1, "the text is empty"),
            ([train, "--train_batch_size=0"], 2, "--train_batch_size must be a positive integer, got 0"),
            ([train, "--learning_rate=-1"], 2, "--learning_rate must be > 0, got -1.0"),
            ([train, "--max_seq_length=100"], 2, "--max_seq_length=100 is above the model's max_position"),
            ([train, "--init_checkpoint=/no/such/checkpoint"], 1, "/no/such/checkpoint"),
        ]
        for number, (args, status, message) in enumerate(cases):
            with self.subTest(args=args):
                out = self.output(f"finetune_{number}")
                self.assert_refused(
                    "bert_tf.finetune", [*base, f"--output_dir={out}", *args], status, message, out
                )

    def test_finetune_lora_rank_zero_or_negative(self):
        base = [
            "--task=classification",
            f"--bert_config_file={self.paths['config.json']}",
            f"--vocab_file={self.paths['vocab.txt']}",
            f"--train_file={self.paths['train.csv']}",
        ]
        fix = "(4 to 16 are usual), got {}; leave it unset to fine-tune every weight"
        for rank in (0, -4):
            with self.subTest(rank=rank):
                out = self.output(f"finetune_lora_rank_{rank}")
                message = f"--lora_rank must be a positive integer {fix.format(rank)}"
                self.assert_refused(
                    "bert_tf.finetune", [*base, f"--output_dir={out}", f"--lora_rank={rank}"], 2, message, out
                )

    @pytest.mark.slow
    def test_finetune_lora_alpha_without_rank_or_not_positive(self):
        base = [
            "--task=classification",
            f"--bert_config_file={self.paths['config.json']}",
            f"--vocab_file={self.paths['vocab.txt']}",
            f"--train_file={self.paths['train.csv']}",
        ]
        cases = [
            (["--lora_alpha=16"], "--lora_alpha scales LoRA adapters: pass --lora_rank too"),
            (["--lora_rank=8", "--lora_alpha=0"], "--lora_alpha must be > 0, got 0.0"),
        ]
        for number, (args, message) in enumerate(cases):
            with self.subTest(args=args):
                out = self.output(f"finetune_lora_alpha_{number}")
                self.assert_refused(
                    "bert_tf.finetune", [*base, f"--output_dir={out}", *args], 2, message, out
                )

    @pytest.mark.slow
    def test_create_pretraining_data_vocab(self):
        for vocab, message in (
            ("/no/such/vocab.txt", "vocab file not found"),
            (self.paths["empty.txt"], "is empty"),
        ):
            with self.subTest(vocab=vocab):
                out = self.output("records_vocab")
                self.assert_refused(
                    "pipelines.create_pretraining_data",
                    [
                        f"--input_file={self.paths['corpus.txt']}",
                        f"--output_file={out}/a.tfrecord",
                        f"--vocab_file={vocab}",
                    ],
                    1,
                    message,
                    out,
                )

    @pytest.mark.slow
    def test_pretrain_random_corpus_unrelated_checkpoint_and_bad_state(self):
        common = [
            f"--vocab_file={self.paths['vocab.txt']}",
            f"--config={self.paths['config.json']}",
            "--max_seq_length=32",
        ]
        out = self.output("pretrain_random")
        self.assert_refused(
            "bert_tf.pretrain",
            [*common, f"--model_dir={out}", f"--corpus={self.paths['random.bin']}"],
            1,
            "are not text",
            out,
        )
        out = self.output("pretrain_unrelated")
        self.assert_refused(
            "bert_tf.pretrain",
            [
                *common,
                f"--model_dir={out}",
                f"--corpus={self.paths['corpus.txt']}",
                f"--init_checkpoint={self.paths['unrelated']}",
            ],
            1,
            "has no bert_config.json or config.json",
            out,
        )
        out = self.output("pretrain_too_long")
        self.assert_refused(
            "bert_tf.pretrain",
            [*common, f"--model_dir={out}", f"--corpus={self.paths['corpus.txt']}", "--max_seq_length=100"],
            2,
            "--max_seq_length=100 is above the config's max_position_embeddings=64; pass --max_seq_length=64 or less",
            out,
        )
        out = self.output("pretrain_state", existing=True)
        shutil.copy(self.paths["config.json"], os.path.join(out, "bert_config.json"))
        with open(os.path.join(out, "checkpoint"), "w") as file:
            file.write('model_checkpoint_path: "ckpt-1\n\x00garbage')
        self.assert_refused(
            "bert_tf.pretrain",
            [*common, f"--model_dir={out}", f"--corpus={self.paths['corpus.txt']}"],
            1,
            "checkpoint is truncated or corrupt",
            out,
        )

    @pytest.mark.slow
    def test_export_damaged_checkpoint_files_cut_at_several_points(self):
        google = ("bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index")
        cases = [
            *[(name, keep, ("model.safetensors",)) for name in google for keep in (0.1, 0.5, 0.9)],
            *[
                ("model.safetensors", keep, ("bert_config.json", *google, "checkpoint"))
                for keep in (0.01, 0.999)  # 0.6: the default run
            ],
        ]
        for name, keep, drop in cases:
            with self.subTest(name=name, keep=keep):
                damaged = os.path.join(self.root, f"cut_{name}_{keep}")
                truncated_copy(self.paths["ckpt"], damaged, name, keep)
                for other in drop:
                    os.remove(os.path.join(damaged, other))
                out = self.output(f"export_{name}_{keep}", existing=True)
                self.assert_refused(
                    "bert_tf.export",
                    ["--kind=encoder", f"--init_checkpoint={damaged}", f"--export_dir={out}", "--overwrite"],
                    1,
                    f"{damaged}/{name} is truncated or corrupt",
                    out,
                )

    @pytest.mark.slow
    def test_export_quantize_and_tflite_misuse(self):
        checkpoint = f"--init_checkpoint={self.paths['ckpt']}"
        cases = [
            (["--kind=mlm", checkpoint, "--quantize=int8"], 2, "--kind=mlm cannot be quantized"),
            (["--kind=huggingface", checkpoint, "--quantize=int8"], 2, "--kind=huggingface cannot be quantized"),
            (["--kind=google", checkpoint, "--quantize=int8"], 2, "--kind=google cannot be quantized"),
            (["--kind=encoder", checkpoint, "--quantize=float16"], 2,
             "--quantize=float16 applies to --kind=tflite, not --kind=encoder; --kind=encoder takes --quantize=int8"),
            (["--kind=task", checkpoint, f"--dev_file={self.paths['train.csv']}"], 2,
             "--dev_file scores a quantized model against the float one: pass it with --kind=task --quantize=int8 "
             "or --kind=tflite --quantize=int8|float16"),
            (["--kind=tflite", checkpoint, f"--dev_file={self.paths['train.csv']}"], 2,
             "--dev_file scores a quantized model against the float one"),
            (["--kind=tflite", checkpoint], 2, "--kind=tflite needs a fine-tuned model"),
        ]  # fmt: skip
        for number, (args, status, message) in enumerate(cases):
            with self.subTest(args=args):
                out = self.output(f"export_quantize_{number}")
                self.assert_refused("bert_tf.export", [*args, f"--export_dir={out}"], status, message, out)

    @pytest.mark.slow
    def test_damaged_model_keras_and_config_cut_at_several_points(self):
        model = os.path.join(self.fixture("finetuned"), "model")
        train = f"--train_file={self.paths['train.csv']}"
        for program, keep in (
            ("bert_tf.finetune", 0.05),
            ("bert_tf.finetune", 0.999),  # 0.5: the default run
            ("bert_tf.export", 0.05),
            ("bert_tf.export", 0.5),
            ("bert_tf.export", 0.999),
        ):
            with self.subTest(program=program, keep=keep):
                damaged = os.path.join(self.root, f"model_keras_{keep}")
                truncated_copy(model, damaged, "model.keras", keep)
                out = self.output(f"model_keras_{program}_{keep}")
                if program == "bert_tf.finetune":
                    args = [
                        "--task=classification",
                        f"--init_checkpoint={damaged}",
                        f"--output_dir={out}",
                        train,
                    ]
                else:
                    args = ["--kind=task", f"--init_checkpoint={damaged}", f"--export_dir={out}"]
                # The user's file is named, not the local copy it is checked on.
                self.assert_refused(program, args, 1, f"{damaged}/model.keras is truncated or corrupt", out)
        # A config JSON cut short, as each program reads one.
        whole = json.dumps(CONFIG, indent=2)
        for program, keep in (("bert_tf.finetune", 0.5), ("bert_tf.pretrain", 0.1), ("bert_tf.export", 0.9)):
            with self.subTest(program=program, keep=keep):
                damaged = os.path.join(self.root, f"config_{keep}")
                shutil.rmtree(damaged, ignore_errors=True)
                shutil.copytree(self.paths["ckpt"], damaged)
                for name in ("model.safetensors", "config.json"):  # the Google files: bert_config.json
                    os.remove(os.path.join(damaged, name))
                config = os.path.join(damaged, "bert_config.json")
                with open(config, "w", encoding="utf-8") as file:
                    file.write(whole[: int(len(whole) * keep)])
                out = self.output(f"config_{program}_{keep}", existing=True)
                args = {
                    "bert_tf.finetune": [
                        "--task=classification", f"--bert_config_file={config}", f"--output_dir={out}",
                        f"--vocab_file={self.paths['vocab.txt']}", train,
                    ],
                    "bert_tf.pretrain": [
                        f"--config={config}", f"--model_dir={out}", f"--vocab_file={self.paths['vocab.txt']}",
                        f"--corpus={self.paths['corpus.txt']}",
                    ],
                    "bert_tf.export": ["--kind=encoder", f"--init_checkpoint={damaged}", f"--export_dir={out}",
                                       "--overwrite"],
                }[program]  # fmt: skip
                self.assert_refused(
                    program, args, 1, f"{config} is truncated or corrupt (not valid JSON: ", out
                )

    @pytest.mark.slow
    def test_finetune_into_a_finished_output_dir_and_unrelated_init_checkpoints(self):
        finished = self.fixture("finetuned")
        train = f"--train_file={self.paths['train.csv']}"
        self.assert_refused(
            "bert_tf.finetune",
            ["--task=classification", f"--init_checkpoint={self.paths['ckpt']}", f"--output_dir={finished}",
             train, "--max_seq_length=16"],
            2,
            f"--output_dir={finished} holds a finished result (",
            finished,
        )  # fmt: skip
        unrelated = f"--init_checkpoint={self.paths['unrelated']}"
        out = self.output("unrelated")
        for module, args in (
            ("bert_tf.finetune", ["--task=classification", f"--output_dir={out}", train]),
            ("bert_tf.export", ["--kind=encoder", f"--export_dir={out}"]),
            ("bert_tf.extract_features", [f"--input_file={self.paths['corpus.txt']}", f"--output_file={out}/f.jsonl"]),
            ("bert_tf.fill_mask", ["the [MASK] sat"]),
        ):  # fmt: skip
            with self.subTest(module=module):
                self.assert_refused(
                    module,
                    [unrelated, *args],
                    1,
                    f"{self.paths['unrelated']} has no bert_config.json or config.json",
                    out,
                )

    @pytest.mark.slow
    def test_a_pretraining_model_dir_is_taken_for_its_export(self):
        model_dir = self.fixture("pretrained")
        note = f"{model_dir} is a pretraining model_dir: using the model in {model_dir}/export"
        export = self.output("from_model_dir_export")
        result = self.assert_runs(
            "bert_tf.export",
            [
                "--kind=encoder",
                f"--init_checkpoint={model_dir}",
                f"--export_dir={export}",
                "--max_seq_length=32",
            ],
        )
        lines = result.stderr.strip().splitlines()
        self.assertEqual(lines[:2], [f"export_dir: {export}", note])
        for line in lines[2:]:  # then only the export's progress: "tracing ... ", "...: done in 0.4s"
            self.assertRegex(
                line, r"^(tracing the serving signatures|writing the SavedModel)( \.\.\.|: done in )"
            )
        finetuned = self.output("from_model_dir_finetune")
        result = self.assert_runs(
            "bert_tf.finetune",
            ["--task=classification", f"--init_checkpoint={model_dir}", f"--output_dir={finetuned}",
             f"--train_file={self.paths['train.csv']}", "--max_seq_length=16", "--train_batch_size=2"],
        )  # fmt: skip
        self.assertIn(note, result.stderr)
        self.assertRegex(result.stderr, r"training on 2 examples for \d+ updates of 2 examples")
        # Continuing from our own export needs no --config: the checkpoint's is used, and said.
        again = self.output("pretrain_from_export")
        result = self.assert_runs(
            "bert_tf.pretrain",
            [f"--init_checkpoint={model_dir}/export", f"--model_dir={again}", f"--corpus={self.paths['corpus.txt']}",
             "--max_seq_length=32", "--max_predictions_per_seq=5", "--train_batch_size=2", "--num_train_steps=2",
             "--num_warmup_steps=1", "--steps_per_loop=1"],
        )  # fmt: skip
        self.assertIn(
            f"using the config and vocab of --init_checkpoint={model_dir}/export (no --config given)",
            result.stderr,
        )

    @pytest.mark.slow
    def test_build_vocab_and_create_pretraining_data_outputs(self):
        out = self.output("vocab_random")
        self.assert_refused(
            "pipelines.build_vocab",
            [f"--input_file={self.paths['random.bin']}", f"--output_file={out}/vocab.txt"],
            1,
            "are not text",
            out,
        )
        # An existing output is kept without --overwrite, by either program.
        out = self.output("existing_outputs", existing=True)
        for module, args in (
            ("pipelines.build_vocab", [f"--input_file={self.paths['corpus.txt']}", f"--output_file={out}/keep.txt"]),
            ("pipelines.create_pretraining_data",
             [f"--input_file={self.paths['corpus.txt']}", f"--output_file={out}/keep.txt",
              f"--vocab_file={self.paths['vocab.txt']}"]),
        ):  # fmt: skip
            with self.subTest(module=module):
                self.assert_refused(
                    module, args, 2, f"--output_file={out}/keep.txt already exists; pass --overwrite", out
                )
        # A vocab smaller than asked says so, and why.
        vocab = os.path.join(self.output("vocab_small"), "vocab.txt")
        result = self.assert_runs(
            "pipelines.build_vocab",
            [f"--input_file={self.paths['corpus.txt']}", "--vocab_size=2000", f"--output_file={vocab}"],
        )
        self.assertRegex(
            result.stderr,
            r"learnt \d+ tokens in [\d.]+ s, fewer than vocab_size=2000: the corpus has no more word",
        )

    @pytest.mark.slow
    def test_extract_features_output_in_a_missing_folder_is_created(self):
        out = os.path.join(self.root, "out", "new_folder", "features.jsonl")
        result = run_program(
            "bert_tf.extract_features",
            [
                f"--input_file={self.paths['corpus.txt']}",
                f"--output_file={out}",
                f"--init_checkpoint={self.paths['ckpt']}",
                "--layers=-1",
                "--max_seq_length=16",
            ],
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        with open(out, encoding="utf-8") as file:
            self.assertLen(file.readlines(), 5)
