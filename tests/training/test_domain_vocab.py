"""Domain-adaptive pretraining: a released checkpoint continued on new text, its vocab
grown with the text's words (`--extend_vocab`), read back by transformers."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.tokenization import BertTokenizer, load_vocab
from bert_tf.training import domain_vocab, pretraining
from bert_tf.training.settings import PretrainingConfig
from pipelines import build_vocab, vocab_extension
from tests.harness import data, processes
from tests.harness.data import UNCASED_VOCAB as VOCAB
from tests.harness.jax_backend import jax_environment

# Words bert-base-uncased's vocab splits into pieces, used often in this "domain".
DOMAIN_WORDS = ["kubectl", "etcd", "kubelet"]
SENTENCES = [
    "the kubelet talks to etcd through the api server.",
    "run kubectl apply to change the cluster.",
    "etcd keeps the state that kubectl reads.",
    "a kubelet runs on every node of the cluster.",
]


def write_corpus(path: Path, documents: int = 20) -> str:
    return data.write_corpus(path, documents, sentences=SENTENCES)


def tiny_masked_lm(directory: Path) -> str:
    """A tiny transformers BertForMaskedLM (no next-sentence head) with the uncased vocab."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertForMaskedLM(config).save_pretrained(str(directory))
    (directory / "vocab.txt").write_text(Path(VOCAB).read_text())
    return str(directory)


class VocabExtensionTest(tf.test.TestCase):
    def test_domain_words_become_single_pieces_in_unused_slots_and_old_ids_keep_their_pieces(self):
        corpus = write_corpus(Path(tempfile.mkdtemp()) / "corpus.txt")
        tokenizer = BertTokenizer(VOCAB)
        counts = build_vocab.count_words(corpus, progress=False)
        chosen = vocab_extension.words_to_add(counts, tokenizer, 3)
        self.assertCountEqual([word for word, _, _ in chosen], DOMAIN_WORDS)
        for word, seen, pieces in chosen:  # independent: the vocab's own split and the corpus' count
            self.assertEqual(pieces, len(tokenizer.tokenize([word])[0]))
            self.assertEqual(seen, sum(sentence.split().count(word) for sentence in open(corpus)))
        vocab = load_vocab(VOCAB)
        extended, placed = vocab_extension.extend(vocab, [word for word, _, _ in chosen], append=False)
        self.assertLen(extended, len(vocab))
        self.assertEqual(sorted(placed), [1, 2, 3])  # [unused0..2] at ids 1-3
        changed = [index for index, (old, new) in enumerate(zip(vocab, extended, strict=True)) if old != new]
        self.assertEqual(changed, [1, 2, 3])
        path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        build_vocab.write_vocab(extended, path)
        new_tokenizer = BertTokenizer(path)
        for word in DOMAIN_WORDS:
            self.assertLen(new_tokenizer.tokenize([word])[0], 1)
        # Text without the new words tokenizes as before.
        plain = ["the cluster keeps its state on every node."]
        self.assertAllEqual(new_tokenizer.tokenize(plain).to_list(), tokenizer.tokenize(plain).to_list())

    def test_too_many_words_without_append_and_a_vocab_without_slots_are_refused(self):
        vocab = load_vocab(VOCAB)
        with self.assertRaisesRegex(
            UsageError, "--extend_vocab=995 is more than the 994 \\[unusedN\\] slots"
        ):
            vocab_extension.check_room(vocab, 995, False, VOCAB)
        vocab_extension.check_room(vocab, 995, True, VOCAB)
        with self.assertRaisesRegex(
            UsageError, "has no \\[unusedN\\] slots to put new words in; pass --extend_vocab_append"
        ):
            vocab_extension.check_room(["[PAD]", "[UNK]", "a"], 1, False, "v.txt")
        with self.assertRaisesRegex(
            UsageError, "--extend_vocab adds --corpus' words to the vocab of --init_checkpoint"
        ):
            PretrainingConfig(extend_vocab=10, corpus="x.txt")
        with self.assertRaisesRegex(UsageError, "--masked_lm_prob must be in \\(0, 0.5\\], got 0.6"):
            PretrainingConfig(masked_lm_prob=0.6)


class DomainAdaptationTest(tf.test.TestCase):
    def test_a_masked_lm_checkpoint_continued_with_extended_vocab_reloads_in_transformers(self):
        import torch
        from transformers import BertForMaskedLM
        from transformers import BertTokenizer as HFTokenizer

        work = Path(tempfile.mkdtemp())
        checkpoint = tiny_masked_lm(work / "released")
        settings = PretrainingConfig(
            model_dir=str(work / "adapted"),
            init_checkpoint=checkpoint,
            corpus=write_corpus(work / "corpus.txt"),
            extend_vocab=3,
            cache_dir=str(work / "cache"),
            train_batch_size=4,
            max_seq_length=32,
            num_train_steps=2,
            steps_per_loop=2,
        )
        result = pretraining.run_pretraining(settings)
        # No next-sentence head in a BertForMaskedLM: the masked LM alone was trained.
        self.assertNotIn("next_sentence_loss", result.train.history[-1])
        tokenizer = HFTokenizer(os.path.join(result.export_dir, "vocab.txt"), do_lower_case=True)
        ids = {word: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) for word in DOMAIN_WORDS}
        self.assertCountEqual([ids[word] for word in DOMAIN_WORDS], [[1], [2], [3]])
        model = BertForMaskedLM.from_pretrained(result.export_dir).eval()
        self.assertEqual(model.config.vocab_size, 30522)  # the release's shape
        encoded = tokenizer(["run kubectl on the node."], return_tensors="pt")
        with torch.no_grad():
            logits = model(**encoded).logits
        self.assertEqual(tuple(logits.shape), (1, encoded["input_ids"].shape[1], 30522))

    @pytest.mark.slow  # ~40 s: a JAX pretraining process
    def test_the_jax_backend_grows_the_vocab_and_starts_new_rows_from_their_pieces(self):
        """The command line on KERAS_BACKEND=jax (model.fit): the new words' rows start as the mean
        of their old pieces' rows in the release (read here by torch), and the export carries them."""
        import torch
        from transformers import BertForMaskedLM
        from transformers import BertTokenizer as HFTokenizer

        work = Path(tempfile.mkdtemp())
        checkpoint = tiny_masked_lm(work / "released")
        released = BertForMaskedLM.from_pretrained(checkpoint).bert.embeddings.word_embeddings.weight
        released = released.detach().numpy()
        old = HFTokenizer(os.path.join(checkpoint, "vocab.txt"), do_lower_case=True)
        model_dir = work / "adapted"
        run = processes.program(
            "bert_tf.pretrain",
            f"--model_dir={model_dir}",
            f"--init_checkpoint={checkpoint}",
            f"--corpus={write_corpus(work / 'corpus.txt')}",
            "--extend_vocab=3",
            "--train_batch_size=4",
            "--max_seq_length=32",
            "--num_train_steps=2",
            "--steps_per_loop=2",
            "--learning_rate=1e-12",  # the rows stay where they started
            env={**jax_environment(), "BERT_TF_CACHE": str(work / "cache")},
            stderr=subprocess.STDOUT,
        )
        output, _ = run.communicate(timeout=600)
        self.assertEqual(run.returncode, 0, output)
        self.assertIn("jax backend", output)
        export = str(model_dir / "export")
        tokenizer = HFTokenizer(os.path.join(export, "vocab.txt"), do_lower_case=True)
        with torch.no_grad():
            rows = BertForMaskedLM.from_pretrained(export).bert.embeddings.word_embeddings.weight.numpy()
        for word in DOMAIN_WORDS:
            (index,) = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))
            self.assertLess(index, 1000, word)  # an [unusedN] slot: the shape is the release's
            pieces = old.convert_tokens_to_ids(old.tokenize(word))
            self.assertGreater(len(pieces), 1, word)
            self.assertAllClose(rows[index], released[pieces].mean(axis=0), atol=1e-5)

    @pytest.mark.slow  # ~10 min on a loaded 2-core machine: two 30,522-row models built and copied row by row
    def test_new_rows_start_as_the_mean_of_their_old_pieces_and_appended_rows_grow_the_matrix(self):
        from bert_tf.checkpoints import load_weights
        from bert_tf.models import BertPretrainer
        from bert_tf.models.pretrainer import example_features

        work = Path(tempfile.mkdtemp())
        checkpoint = tiny_masked_lm(work / "released")
        settings = PretrainingConfig(
            init_checkpoint=checkpoint,
            corpus=write_corpus(work / "corpus.txt"),
            extend_vocab=3,
            extend_vocab_append=True,
            cache_dir=str(work / "cache"),
        ).resolved()
        config, vocab_file, _ = pretraining.model_config_and_vocab(settings)
        # The release less its [unusedN] slots (ids 1-99, 104-998): the words are appended.
        keep = [0, 100, 101, 102, 103, *range(999, 30522)]
        vocab = [load_vocab(vocab_file)[index] for index in keep]
        small = work / "small_vocab.txt"
        small.write_text("\n".join(vocab) + "\n")
        grown = domain_vocab.extend_for_run(
            settings, config.replace(vocab_size=len(vocab)), str(small), [settings.corpus], str(work / "run")
        )
        self.assertEqual(grown.config.vocab_size, len(vocab) + 3)
        self.assertEqual(sorted(grown.new_rows), [len(vocab), len(vocab) + 1, len(vocab) + 2])

        released = BertPretrainer(config)
        released(example_features(1, 8, 2))
        load_weights(released, checkpoint, skip_heads=["next_sentence"])
        table = released.encoder.embeddings.word_embeddings.numpy()
        # The same release with the small vocab: its rows are those of the kept tokens.

        def load_small(model):
            for old, new in zip(released.weights, model.weights, strict=True):
                value = old.numpy()
                new.assign(value[keep] if value.shape and value.shape[0] == 30522 else value)

        grown = domain_vocab.GrownVocab(
            grown.vocab_file, grown.config, config.replace(vocab_size=len(vocab)), grown.new_rows
        )
        model = BertPretrainer(grown.config)
        model(example_features(1, 8, 2))
        domain_vocab.load_grown(model, grown, load_small)
        rows = model.encoder.embeddings.word_embeddings.numpy()
        self.assertAllClose(rows[: len(vocab)], table[keep])
        for index, pieces in grown.new_rows.items():
            self.assertAllClose(rows[index], table[keep][pieces].mean(axis=0))


class BadInputTest(tf.test.TestCase):
    def test_a_checkpoint_without_its_vocab_or_with_too_few_slots_writes_nothing(self):
        from bert_tf.checkpoints import export_pretrained
        from bert_tf.config import load_config
        from bert_tf.models import BertPretrainer
        from bert_tf.training.inputs import InputError

        work = Path(tempfile.mkdtemp())
        config = load_config("bert_tiny").replace(vocab_size=30522, num_hidden_layers=1)
        bare = export_pretrained(BertPretrainer(config), str(work / "bare"))  # no vocab.txt beside it
        corpus = write_corpus(work / "corpus.txt")
        with self.assertRaisesRegex(
            InputError, "has no vocab.txt .* copy its vocab.txt there, or pass it as --vocab_file"
        ):
            pretraining.run_pretraining(
                PretrainingConfig(init_checkpoint=bare, corpus=corpus, model_dir=str(work / "a"))
            )
        Path(bare, "vocab.txt").write_text(Path(VOCAB).read_text())
        with self.assertRaisesRegex(
            UsageError, "--extend_vocab=995 is more than the 994 \\[unusedN\\] slots"
        ):
            pretraining.run_pretraining(
                PretrainingConfig(
                    init_checkpoint=bare, corpus=corpus, extend_vocab=995, model_dir=str(work / "b")
                )
            )
        self.assertFalse((work / "a").exists() or (work / "b").exists())
