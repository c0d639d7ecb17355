"""The small-data benchmark's tasks: real classification text found offline on a Debian machine.

Each builder returns rows (text, label, group); `write_task` de-duplicates them, caps each
class, splits them into train.csv and dev.csv by group (so the near-copies within a source
package, a manual's node or a class stay on one side) and drops dev rows that are still near a
training row. Everything is deterministic for a given seed.

- `debian`: Debian package short descriptions (apt's Packages index of bookworm main; the
  index holds only the one-line description, the long ones are in Translation files this
  machine lacks) -> their Section: games, science, sound, graphics, net. Library, -dev, -dbg,
  -doc, -data and -common packages are left out (their descriptions are templated); the
  group is the source package.
- `docstrings`: docstrings (of modules, classes and functions, 8 words or more) of Python's
  standard library -> the package they are in: asyncio, email, http and urllib (one class),
  logging, xml. Read with `ast` from the source files, nothing imported; the group is the
  top-level class or function (a module's docstring: the module).
- `info`: paragraphs (12 words or more) of GNU info manuals in /usr/share/info -> the
  manual: coreutils, gettext, gnupg, find, wget; licence, copying and index nodes left out,
  and any text found in two manuals. The group is the node.
- `manpages`: paragraphs (12 words or more) of the DESCRIPTION section of man pages in
  /usr/share/man/man{1,2,3,5,8} -> the section (a seeded sample of each section's pages; the
  Google Cloud CLI's generated pages, 93% of man1 here, left out). The task the fine-tuning
  defaults were chosen on: not one of the benchmark's default tasks.

>>> key("Hello,  World!") == key("hello world")
True
>>> near_duplicate("a b c d e f", [trigrams("x y z"), trigrams("a b c d e x")], {})  # 3 of 4 trigrams
1
>>> near_duplicate("a b c d e f", [trigrams("a b c x y z")], {}) is None  # 1 of 4
True
"""

from __future__ import annotations

import ast
import collections
import csv
import dataclasses
import glob
import gzip
import importlib.util
import random
import re
import subprocess
import time
from pathlib import Path

Row = tuple[str, str, str]  # (text, label, group)

DEV_SHARE = 0.25  # of a class's rows: dev is about a third of train
MAX_PER_GROUP = 20  # rows of one source package, node, page or top-level definition
NEAR = 0.5  # a dev row sharing this share of its word trigrams with one training row is dropped


# -- the sources -------------------------------------------------------------------------------
DEBIAN_SECTIONS = ("games", "science", "sound", "graphics", "net")
DEBIAN_SKIPPED = re.compile(r"^lib|-(dev|dbg|dbgsym|doc|data|common|l10n)$")


def debian_sections() -> list[Row]:
    """(short description, section, source package) of the packages in apt's Packages index."""
    paths = sorted(glob.glob("/var/lib/apt/lists/*_Packages.lz4"))
    if not paths:
        raise SystemExit("the debian task reads /var/lib/apt/lists/*_Packages.lz4: run apt-get update")
    rows = []
    for path in paths:
        text = subprocess.run(["lz4", "-dc", path], check=True, capture_output=True, text=True).stdout
        for stanza in text.split("\n\n"):
            fields = dict(re.findall(r"^([\w-]+): (.*)$", stanza, flags=re.M))
            name, section = fields.get("Package", ""), fields.get("Section", "")
            if section in DEBIAN_SECTIONS and not DEBIAN_SKIPPED.search(name):
                source = fields.get("Source", name).split()[0]
                rows.append((fields["Description"], section, source))
    return rows


DOCSTRING_PACKAGES = {
    "asyncio": ("asyncio",),
    "email": ("email",),
    "http": ("http", "urllib"),
    "logging": ("logging",),
    "xml": ("xml",),
}
MIN_DOCSTRING_WORDS = 8


def python_docstrings() -> list[Row]:
    """(docstring, package, file:top-level definition) of the standard library's packages."""
    rows = []
    for label, packages in DOCSTRING_PACKAGES.items():
        for package in packages:
            root = Path(next(iter(importlib.util.find_spec(package).submodule_search_locations)))
            for path in sorted(root.rglob("*.py")):
                tree = ast.parse(path.read_bytes())
                for top in [tree, *tree.body]:
                    group = f"{path}:{getattr(top, 'name', '')}"
                    nodes = [top] if top is tree else ast.walk(top)
                    for node in nodes:
                        if isinstance(
                            node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                        ):
                            doc = ast.get_docstring(node)
                            if doc and len(doc.split()) >= MIN_DOCSTRING_WORDS:
                                rows.append((" ".join(doc.split()), label, group))
    return rows


INFO_MANUALS = ("coreutils", "gettext", "gnupg", "find", "wget")
INFO_SKIPPED_NODES = re.compile(r"licen[sc]e|copying|index|free documentation", re.I)
MIN_PARAGRAPH_WORDS = 12


def info_manuals() -> list[Row]:
    """(paragraph, manual, manual:node) of the GNU info manuals in /usr/share/info."""
    rows = []
    for manual in INFO_MANUALS:
        paths = sorted(glob.glob(f"/usr/share/info/{manual}.info*.gz"))
        if not paths:
            raise SystemExit(f"the info task reads /usr/share/info/{manual}.info.gz: it is not installed")
        for path in paths:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
                nodes = handle.read().split("\x1f")
            for node in nodes:
                header, _, body = node.strip("\n").partition("\n")
                name = re.search(r"Node: ([^,\n]*)", header)
                if not name or INFO_SKIPPED_NODES.search(name[1]):
                    continue
                for paragraph in re.split(r"\n\s*\n", body):
                    if paragraph.lstrip().startswith(("* ", "=", "-")):  # menus, heading underlines
                        continue
                    words = paragraph.split()
                    if len(words) >= MIN_PARAGRAPH_WORDS:
                        rows.append((" ".join(words), manual, f"{manual}:{name[1]}"))
    return rows


MAN_SECTIONS = ("1", "2", "3", "5", "8")
MAN_PAGES_READ = 600  # per section, a seeded sample: enough paragraphs, and quick
MAN_SKIPPED = ("gcloud",)  # 16,631 generated pages of the Google Cloud CLI: 93% of man1, templated


def man_pages(seed: int = 0) -> list[Row]:
    """(paragraph of DESCRIPTION, section, page) of a seeded sample of each section's pages."""
    rows = []
    for section in MAN_SECTIONS:
        pages = sorted(glob.glob(f"/usr/share/man/man{section}/*.gz"))
        pages = [page for page in pages if not Path(page).name.startswith(MAN_SKIPPED)]
        random.Random(f"{seed}:{section}").shuffle(pages)
        for page in pages[:MAN_PAGES_READ]:
            with gzip.open(page, "rt", encoding="utf-8", errors="replace") as handle:
                source = handle.read()
            for paragraph in description_paragraphs(source):
                if len(paragraph.split()) >= MIN_PARAGRAPH_WORDS:
                    rows.append((paragraph, section, Path(page).name))
    return rows


PARAGRAPH_MACROS = {"PP", "P", "LP", "TP", "IP", "HP", "sp", "Pp", "It", "Bl", "El", "RS", "RE", "SS", "Ss"}
FONT_MACROS = {"B", "I", "BR", "IR", "RB", "RI", "BI", "IB", "SM", "SB", "R"}
ESCAPES = re.compile(
    r"\\f(\(..|\[[^]]*\]|.)|\\[*n](\(..|\[[^]]*\]|.)|\\s[-+]?\d|\\\(..|\\\[[^]]*\]|\\[&|^c%]"
)


def description_paragraphs(source: str) -> list[str]:
    """The DESCRIPTION section of a man page's roff, roughly: paragraphs of plain text (font
    macros kept as their text, other macros and no-fill blocks dropped, escapes removed)."""
    paragraphs, current, inside, no_fill = [], [], False, False
    for line in source.splitlines():
        if line.startswith((".", "'")):
            macro, _, arguments = line[1:].strip().partition(" ")
            if macro in ("SH", "Sh"):
                if inside:
                    break
                inside = arguments.strip().strip('"').upper() == "DESCRIPTION"
                continue
            if macro == "nf":
                no_fill = True
            elif macro == "fi":
                no_fill = False
            if macro in PARAGRAPH_MACROS or macro in ("nf", "fi"):
                paragraphs.append(current)
                current = []
            elif inside and not no_fill and macro in FONT_MACROS:
                current.append(arguments.replace('"', ""))
            continue
        if not inside or no_fill:
            continue
        if not line.strip():
            paragraphs.append(current)
            current = []
        else:
            current.append(line)
    paragraphs.append(current)
    texts = [
        ESCAPES.sub("", " ".join(lines)).replace("\\-", "-").replace("\\e", "\\") for lines in paragraphs
    ]
    return [" ".join(text.split()) for text in texts if text.strip()]


BUILDERS = {
    "debian": debian_sections,
    "docstrings": python_docstrings,
    "info": info_manuals,
    "manpages": man_pages,
}
BENCH_TASKS = ("debian", "docstrings", "info")
MAX_PER_CLASS = {"debian": 800, "docstrings": 400, "info": 500, "manpages": 310}


# -- de-duplication and the split ---------------------------------------------------------------
def key(text: str) -> str:
    """A text's identity for de-duplication: its words, lower-cased."""
    return " ".join(re.findall(r"\w+", text.lower()))


def trigrams(text: str) -> frozenset:
    words = key(text).split()
    return frozenset(zip(words, words[1:], words[2:], strict=False)) or frozenset([tuple(words)])


def near_duplicate(text: str, train: list[frozenset], index: dict) -> int | None:
    """The training row (its number) that shares at least NEAR of `text`'s word trigrams, if any.
    `index` maps a trigram to the training rows holding it (built on first use)."""
    if not index:
        for number, grams in enumerate(train):
            for gram in grams:
                index.setdefault(gram, []).append(number)
    grams = trigrams(text)
    shared = collections.Counter(number for gram in grams for number in index.get(gram, ()))
    near = [number for number, count in shared.items() if count >= NEAR * min(len(grams), len(train[number]))]
    return min(near, default=None)


@dataclasses.dataclass
class Task:
    name: str
    train: Path
    dev: Path
    train_rows: list[tuple[str, str]]
    dev_rows: list[tuple[str, str]]
    dropped_near: int  # dev rows dropped as near-duplicates of training rows
    seconds: float  # to build

    def class_counts(self, rows) -> dict[str, int]:
        return dict(sorted(collections.Counter(label for _, label in rows).items()))


def split(rows: list[Row], max_per_class: int, seed: int) -> tuple[list, list, int]:
    """(train, dev, dev rows dropped as near-duplicates): `rows` de-duplicated (a text under two
    labels is dropped), at most MAX_PER_GROUP rows of a group (a seeded sample) and
    `max_per_class` of a class (whole groups taken in a seeded order), then each class' groups
    dealt to dev while that brings dev nearer DEV_SHARE of the class' rows, else to train."""
    labels_of: dict[str, set] = collections.defaultdict(set)
    for text, label, _ in rows:
        labels_of[key(text)].add(label)
    seen, groups = set(), collections.defaultdict(lambda: collections.defaultdict(list))
    for text, label, group in rows:
        if len(labels_of[key(text)]) == 1 and key(text) not in seen:
            seen.add(key(text))
            groups[label][group].append((text, label))
    rng = random.Random(seed)
    train, dev = [], []
    for label in sorted(groups):
        names = sorted(groups[label])
        rng.shuffle(names)
        taken, total = [], 0
        for name in names:
            group = groups[label][name]
            group = rng.sample(group, min(len(group), MAX_PER_GROUP, max_per_class - total))
            taken.append(group)
            total += len(group)
            if total >= max_per_class:
                break
        target, dev_count = DEV_SHARE * total, 0
        for group in taken:
            if abs(dev_count + len(group) - target) < abs(dev_count - target):
                dev += group
                dev_count += len(group)
            else:
                train += group
    train_grams, index = [trigrams(text) for text, _ in train], {}
    kept = [row for row in dev if near_duplicate(row[0], train_grams, index) is None]
    rng.shuffle(train)
    rng.shuffle(kept)
    return train, kept, len(dev) - len(kept)


def write_task(name: str, directory: Path, seed: int = 0) -> Task:
    """Builds task `name` (see BUILDERS) into directory/train.csv and dev.csv (text,label)."""
    start = time.perf_counter()
    builder = BUILDERS[name]
    rows = builder(seed) if name == "manpages" else builder()
    train, dev, dropped = split(rows, MAX_PER_CLASS[name], seed)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for part, part_rows in (("train", train), ("dev", dev)):
        paths[part] = directory / f"{part}.csv"
        with open(paths[part], "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows(part_rows)
    return Task(name, paths["train"], paths["dev"], train, dev, dropped, time.perf_counter() - start)


def bag_of_words(task: Task) -> tuple[float, float]:
    """(dev accuracy, seconds to fit and score) of bert_tf's bag-of-words baseline (TF-IDF of
    word 1-2-grams + logistic regression), the model every fine-tuning run scores beside itself."""
    import numpy as np

    from bert_tf.tasks.classification import baseline

    baseline.pipeline("classification", pair=False)  # imports scikit-learn, outside the timing
    start = time.perf_counter()
    model = baseline.pipeline("classification", pair=False)
    model.fit(
        np.array([[text] for text, _ in task.train_rows], dtype=object),
        [label for _, label in task.train_rows],
    )
    predicted = model.predict(np.array([[text] for text, _ in task.dev_rows], dtype=object))
    accuracy = float(np.mean(predicted == np.array([label for _, label in task.dev_rows])))
    return accuracy, time.perf_counter() - start
