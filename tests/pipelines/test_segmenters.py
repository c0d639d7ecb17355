"""Chinese whole-word masking: segmenter marks, masking of whole segmented words, bad input.

The Chinese text is tests/fixtures/chinese_corpus.txt, written for these tests (plain
sentences about everyday topics, one per line, a blank line between documents; the
tenth document mixes in English words). The vocab is the uncased English fixture with the
corpus's missing characters appended, so every id of the fixture is unchanged. The
reference segmentation is the `jieba` package itself (the segmenter runs its Rust port).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import jieba
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.tokenization import BertTokenizer
from pipelines import corpus, generate, masking, pretraining_dataset, records, segmenters, text_dataset

ROOT = Path(__file__).resolve().parents[2]
ENGLISH_VOCAB = ROOT / "tests" / "fixtures" / "bert_uncased_vocab.txt"
CHINESE_CORPUS = str(ROOT / "tests" / "fixtures" / "chinese_corpus.txt")
CHINESE_TEXT = Path(CHINESE_CORPUS).read_text(encoding="utf-8")
CJK = re.compile("[\u4e00-\u9fff]")

jieba.setLogLevel(60)


def _running(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _read(path: str, max_seq_length: int, max_predictions: int = 20) -> dict[str, np.ndarray]:
    spec = records.feature_spec(max_seq_length, max_predictions, masked=True)
    rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]
    return {name: np.stack([row[name].numpy() for row in rows]) for name in spec}


def _restored(features: dict[str, np.ndarray]) -> np.ndarray:
    """The ids before masking: masked_lm_ids put back at masked_lm_positions."""
    ids = features["input_ids"].copy()
    for row, (positions, labels, weights) in enumerate(
        zip(
            features["masked_lm_positions"],
            features["masked_lm_ids"],
            features["masked_lm_weights"],
            strict=True,
        )
    ):
        real = weights > 0
        ids[row, positions[real]] = labels[real]
    return ids


class WordMarkerTest(tf.test.TestCase):
    def test_marks_follow_the_spans_for_cjk_characters_only(self):
        # "中文好" one word, then "好龘好" another (龘 is in no vocab here: [UNK], still in its word).
        spans = {"中文好 ok 好龘好": [(0, 3), (4, 6), (7, 10)]}
        marker = segmenters.WordMarker(lambda text: spans.get(text, []))
        self.assertEqual(marker.marks("中文好 ok 好龘好"), [False, True, True, False, True, True])
        # Characters outside every span are words of their own; no CJK: the segmenter is not called.
        self.assertEqual(segmenters.WordMarker(lambda text: []).marks("中文"), [False, False])
        calls = []
        counting = segmenters.WordMarker(lambda text: calls.append(text) or [])
        calls.clear()
        self.assertEqual(counting.marks("no cjk at all"), [])
        self.assertEqual(calls, [])
        # The compatibility ideograph U+F900 is a CJK character too.
        one_word = segmenters.WordMarker(lambda text: [(0, len(text))])
        self.assertEqual(one_word.marks("中\uf900"), [False, True])

    def test_an_unknown_character_stays_in_its_word(self):
        vocab_file = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        Path(vocab_file).write_text(
            "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "中", "文", "好", "ok"]) + "\n"
        )
        tokenizer = BertTokenizer(vocab_file, lower_case=True)
        lines = tf.constant(["中龘文 ok 好", "豈\uf900好"])  # 龘 and 豈 are not in the vocab: [UNK]
        spans = {"中龘文 ok 好": [(0, 3)], "豈\uf900好": [(0, 3)]}
        marker = segmenters.WordMarker(lambda text: spans.get(text, []))
        marks = marker([line.decode() for line in lines.numpy()])
        continues = text_dataset.word_continues(
            tokenizer.tokenize_with_words(lines), tokenizer.split_words(lines), marks
        )
        pieces = [tokenizer.vocab[i] for i in tokenizer.tokenize(lines).flat_values.numpy()]
        self.assertEqual(pieces, ["中", "[UNK]", "文", "ok", "好", "[UNK]", "[UNK]", "好"])
        # 中 [UNK] 文 one word, then ok and 好 words of their own; [UNK] [UNK] 好 one word.
        self.assertEqual(continues.numpy().tolist(), [False, True, True, False, False, False, True, True])

    def test_jieba_segmenter_gives_jiebas_own_words(self):
        segmenter = segmenters.get_segmenter("jieba")
        lines = [line for line in Path(CHINESE_CORPUS).read_text(encoding="utf-8").splitlines() if line]
        lines += ["南京市长江大桥", "T恤和卡拉OK都是外来词，3月15日发布。", "中華人民共和國"]
        for line in lines:
            words = [line[start:end] for start, end in segmenter(line)]
            self.assertEqual(words, jieba.lcut(line))

    def test_worker_processes_give_the_same_marks_in_order(self):
        marker = segmenters.WordMarker("jieba")
        lines = [line for line in CHINESE_TEXT.splitlines() if line]
        blocks = [(index, lines[index : index + 7]) for index in range(0, len(lines), 7)]
        expected = [(block, marker(block[1])) for block in blocks]
        got = list(segmenters.marked(iter(blocks), marker, lambda block: block[1], processes=2))
        self.assertEqual([block for block, _ in got], [block for block, _ in expected])
        for (_, ours), (_, theirs) in zip(got, expected, strict=True):
            self.assertEqual(ours.tolist(), theirs.tolist())
        # A segmenter that cannot be sent to a worker (a lambda) runs in this process.
        local = segmenters.WordMarker(lambda text: [(0, len(text))])
        self.assertEqual(
            [m.tolist() for _, m in segmenters.marked([["中文"]], local, list, processes=2)], [[False, True]]
        )

    def test_workers_end_when_their_program_ends_at_once(self):
        """A program that ends at once (os._exit: after an error or a stop, bert_tf.cli.fail)
        with segmentation workers running leaves none behind."""
        script = (
            "import multiprocessing, os, sys\n"
            "from pipelines import segmenters\n"
            "if __name__ == '__main__':\n"
            "    blocks = (['中文文本'] * 50 for _ in range(1000))\n"
            "    marks = segmenters.marked(blocks, segmenters.WordMarker('jieba'), list, processes=2)\n"
            "    next(marks)\n"
            "    print(' '.join(str(p.pid) for p in multiprocessing.active_children()), flush=True)\n"
            "    os._exit(1)\n"
        )
        path = os.path.join(tempfile.mkdtemp(dir=self.get_temp_dir()), "ends_at_once.py")
        Path(path).write_text(script, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(__file__)))}
        result = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=60)
        workers = [int(pid) for pid in result.stdout.split()]
        self.assertLen(workers, 2, result.stderr)
        deadline = time.monotonic() + 30
        while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual([pid for pid in workers if _running(pid)], [])

    def test_bad_settings_are_clear_errors(self):
        with self.assertRaisesRegex(
            segmenters.SegmenterError, r"unknown word segmenter 'pkuseg'; known segmenters: jieba"
        ):
            segmenters.get_segmenter("pkuseg")
        problems = segmenters.setting_problems("pkuseg", whole_word_mask=False, dynamic_masking=True)
        self.assertLen(problems, 3)
        self.assertIn("known segmenters: jieba", problems[0])
        self.assertIn("no effect without whole-word masking", problems[1])
        self.assertIn("--dynamic_masking", problems[2])
        self.assertEqual(segmenters.setting_problems(None, whole_word_mask=False), [])
        with self.assertRaisesRegex(ValueError, "no effect without whole-word masking"):
            generate.GenerationConfig("in", "out", "vocab", word_segmenter="jieba").validate()
        from bert_tf.training.settings import PretrainingConfig

        with self.assertRaisesRegex(
            UsageError, "no effect without whole-word masking; add --do_whole_word_mask"
        ):
            PretrainingConfig(word_segmenter="jieba")
        with self.assertRaisesRegex(UsageError, "applies to raw text \\(--corpus\\)"):
            PretrainingConfig(word_segmenter="jieba", whole_word_mask=True, train_files="data/*.tfrecord")
        with self.assertRaisesRegex(ValueError, "unknown word segmenter"):
            pretraining_dataset(CHINESE_CORPUS, vocab_file=ENGLISH_VOCAB, batch_size=2, whole_word_mask=True,
                                word_segmenter="pkuseg")  # fmt: skip
        # A custom segmenter returning something else than increasing spans inside the text
        # fails when the marker is made, before any data is read.
        with self.assertRaisesRegex(
            segmenters.SegmenterError, r"returned the span \(0, 50\) for a line of 13"
        ):
            segmenters.WordMarker(lambda text: [(0, 50)])
        with self.assertRaisesRegex(
            segmenters.SegmenterError, "must return a list of \\(start, end\\) character offsets"
        ):
            segmenters.WordMarker(lambda text: ["中文"])
        with self.assertRaisesRegex(segmenters.SegmenterError, "must return a list of"):
            segmenters.WordMarker(lambda text: None)

    def test_segmenter_not_installed_says_which_extra_to_install(self):
        with mock.patch.dict(sys.modules, {"rjieba": None, "jieba": None}):
            with self.assertRaises(segmenters.SegmenterError) as raised:
                segmenters.get_segmenter("jieba")
        message = str(raised.exception)
        self.assertEqual(message.count("\n"), 0)
        self.assertIn('pip install "bert_tf[chinese]"', message)

    def test_very_long_unsegmentable_runs(self):
        marker = segmenters.WordMarker("jieba")
        rng = np.random.default_rng(0)
        line = "龘" * 3_000 + "".join(chr(c) for c in rng.integers(0x4E00, 0x9FFF, 30_000))
        marks = marker.marks(line)
        self.assertEqual(len(marks), len(line))
        # Marked exactly as jieba cuts the run (the reference, on its own).
        words = jieba.lcut("龘" * 3_000)
        self.assertEqual(sum(marks[:3_000]), 3_000 - len(words))


class ChineseWholeWordMaskingTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.directory = tempfile.mkdtemp()
        vocab = ENGLISH_VOCAB.read_text(encoding="utf-8").splitlines()
        text = Path(CHINESE_CORPUS).read_text(encoding="utf-8")
        missing = sorted(set(CJK.findall(text)) - set(vocab))
        cls.vocab_file = os.path.join(cls.directory, "vocab.txt")
        Path(cls.vocab_file).write_text("\n".join(vocab + missing) + "\n", encoding="utf-8")
        cls.tokenizer = BertTokenizer(cls.vocab_file)
        cls.vocab = np.array(cls.tokenizer.vocab)
        # The same corpus and seed with and without the segmenter (shared by the tests).
        cls.words_file = cls._generate("words")
        cls.pieces_file = cls._generate("pieces", word_segmenter=None)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.directory, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def _generate(cls, name: str, **overrides) -> str:
        values = dict(
            input_file=CHINESE_CORPUS,
            output_file=os.path.join(cls.directory, f"{name}.tfrecord"),
            vocab_file=cls.vocab_file,
            do_whole_word_mask=True,
            word_segmenter="jieba",
            dupe_factor=4,
            max_seq_length=64,
        )
        values.update(overrides)
        generate.create_pretraining_data(
            generate.GenerationConfig(**values), progress=False, tokenizer=cls.tokenizer
        )
        return values["output_file"]

    def test_masked_characters_make_whole_jieba_words_and_ids_are_unchanged(self):
        with_words = _read(self.words_file, 64)
        without = _read(self.pieces_file, 64)
        # Segmentation changes the masks only: the same pairs, ids and features.
        for name in ("input_mask", "segment_ids", "next_sentence_labels"):
            self.assertAllEqual(with_words[name], without[name])
        self.assertAllEqual(_restored(with_words), _restored(without))

        mask_id = self.tokenizer.mask_id
        checked_words = multi_character_chosen = english_chosen = 0
        for row, ids in enumerate(_restored(with_words)):
            weights = with_words["masked_lm_weights"][row] > 0
            chosen = np.zeros(len(ids), bool)
            chosen[with_words["masked_lm_positions"][row][weights]] = True
            masked_ids = with_words["input_ids"][row]
            tokens = self.vocab[ids].tolist()
            special = [i for i, t in enumerate(tokens) if t in ("[CLS]", "[SEP]", "[PAD]")]
            self.assertFalse(chosen[special].any())
            for begin, end in zip(special[:-1], special[1:], strict=False):  # each segment
                # Runs of CJK characters that do not touch the segment's ends (which may cut a word).
                position = begin + 1
                while position < end:
                    if not CJK.fullmatch(tokens[position]):
                        # An English word: its ## pieces are chosen and replaced with it.
                        word_end = position + 1
                        while word_end < end and tokens[word_end].startswith("##"):
                            word_end += 1
                        if word_end - position > 1 and chosen[position]:
                            english_chosen += 1
                        self.assertEqual(len(set(chosen[position:word_end])), 1)
                        self.assertEqual(len(set(masked_ids[position:word_end] == mask_id)), 1)
                        position = word_end
                        continue
                    run_end = position
                    while run_end < end and CJK.fullmatch(tokens[run_end]):
                        run_end += 1
                    if position > begin + 1 and run_end < end:
                        start = position
                        for word in jieba.lcut("".join(tokens[position:run_end])):
                            stop = start + len(word)
                            checked_words += 1
                            self.assertEqual(len(set(chosen[start:stop])), 1, (word, tokens, chosen))
                            self.assertEqual(len(set(masked_ids[start:stop] == mask_id)), 1)
                            multi_character_chosen += len(word) > 1 and chosen[start]
                            start = stop
                    position = run_end
        self.assertGreater(checked_words, 1000)
        self.assertGreater(multi_character_chosen, 100)
        self.assertGreater(english_chosen, 0)

    def test_text_without_cjk_gives_the_same_records_as_without_a_segmenter(self):
        english = os.path.join(self.directory, "english.txt")
        documents = list(corpus.documents())[:10]
        Path(english).write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
        a = Path(self._generate("english_words", input_file=english, dupe_factor=1)).read_bytes()
        b = Path(
            self._generate("english_pieces", input_file=english, dupe_factor=1, word_segmenter=None)
        ).read_bytes()
        self.assertEqual(a, b)

    @pytest.mark.slow
    def test_chosen_fraction_and_80_10_10_per_word_over_20000_sequences(self):
        marker = segmenters.WordMarker("jieba")
        blocks = text_dataset.pair_blocks(
            [CHINESE_CORPUS], self.tokenizer, max_seq_length=128, seed=3, num_passes=4, word_marker=marker
        )
        parts = [
            (b["input_ids"].numpy(), b["input_mask"].numpy(), b["word_continues"].numpy()) for b in blocks
        ]
        ids, input_mask, continues = (np.concatenate(p) for p in zip(*parts, strict=True))
        repeat = -(-20_000 // len(ids))
        ids, input_mask, continues = (np.tile(x, (repeat, 1)) for x in (ids, input_mask, continues))
        masking_vocab = masking.MaskingVocab.from_vocab(self.tokenizer.vocab)
        out = masking.mask_sequences(
            ids, input_mask, tf.constant([7, 8], tf.int64), masking_vocab=masking_vocab,
            max_predictions_per_seq=20, whole_word_mask=True, word_continues=continues,
        )  # fmt: skip
        weights = out["masked_lm_weights"].numpy() > 0
        positions = out["masked_lm_positions"].numpy()
        rows = np.repeat(np.arange(len(ids)), weights.sum(1))
        chosen = np.zeros(ids.shape, bool)
        chosen[rows, positions[weights]] = True
        self.assertGreaterEqual(len(ids), 20_000)
        self.assertFalse(
            chosen[(ids == masking_vocab.cls_id) | (ids == masking_vocab.sep_id) | (input_mask == 0)].any()
        )
        self.assertAllClose(chosen.sum() / input_mask.sum(), 0.15, atol=0.005)

        # Words: a token starts one unless it is a ## piece or marked, right after a candidate.
        candidate = (input_mask > 0) & (ids != masking_vocab.cls_id) & (ids != masking_vocab.sep_id)
        joins = (masking_vocab.is_continuation[ids] | continues) & np.pad(candidate[:, :-1], ((0, 0), (1, 0)))
        word = np.cumsum((candidate & ~joins).ravel()).reshape(ids.shape)
        keys, size = np.unique(word[candidate], return_counts=True)
        chosen_count = np.zeros(keys.max() + 1, int)
        np.add.at(chosen_count, word[chosen], 1)
        self.assertTrue(np.all((chosen_count[keys] == 0) | (chosen_count[keys] == size)))  # whole words only
        masked_ids = out["input_ids"].numpy()
        per_word = {}
        for name, hit in (("mask", masked_ids == masking_vocab.mask_id), ("same", masked_ids == ids)):
            per_word[name] = np.zeros(keys.max() + 1, int)
            np.add.at(per_word[name], word[chosen & hit], 1)
        chosen_words = np.flatnonzero(chosen_count)
        n = chosen_count[chosen_words]
        self.assertTrue(np.all((per_word["mask"][chosen_words] == 0) | (per_word["mask"][chosen_words] == n)))
        masked = np.mean(per_word["mask"][chosen_words] == n)
        kept = np.mean(per_word["same"][chosen_words] == n)
        self.assertGreater((n > 1).mean(), 0.3)  # many chosen words have several characters
        self.assertAllClose([masked, kept, 1 - masked - kept], [0.8, 0.1, 0.1], atol=0.01)

    def test_pretraining_dataset_takes_a_segmenter_for_raw_text_only(self):
        dataset = pretraining_dataset(
            CHINESE_CORPUS, vocab_file=self.vocab_file, batch_size=4, max_seq_length=64, whole_word_mask=True,
            word_segmenter="jieba", seed=1, repeat=False,
        )  # fmt: skip
        batch = next(iter(dataset))
        self.assertEqual(sorted(batch), sorted(records.FEATURE_ORDER))
        self.assertEqual(batch["input_ids"].shape, (4, 64))
        with self.assertRaisesRegex(ValueError, "applies to raw text input"):
            pretraining_dataset(self.words_file, vocab_file=self.vocab_file, batch_size=4, max_seq_length=64,
                                whole_word_mask=True, word_segmenter="jieba")  # fmt: skip

    def test_ids_equal_the_reference_tokenizer(self):
        from tokenizers import BertWordPieceTokenizer

        reference = BertWordPieceTokenizer(
            self.vocab_file, lowercase=True, strip_accents=True, clean_text=True
        )
        lines = [line for line in Path(CHINESE_CORPUS).read_text(encoding="utf-8").splitlines() if line]
        ours = self.tokenizer.tokenize(lines).to_list()
        theirs = [encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)]
        self.assertEqual(ours, theirs)


if __name__ == "__main__":
    tf.test.main()
