"""The task families, and the one place that lists the built-in ones.

A task family (`bert_tf.tasks.family.TaskFamily`) is everything one kind of task needs;
the driver, the fine-tuned folder, the Keras task models and the exports find it here, by
the task a run names (`family_for_task`), by the family a task.json names (`family_named`),
or by a model's class (`family_for_model`), and never test a task's name or kind.

A family written outside bert_tf is named by its import path, `MODULE:CLASS`
(`python -m bert_tf.finetune --task=my_tasks.similarity:SimilarityFamily`): it is imported
and registered on first use, and a saved model records that path and finds it again.

>>> from bert_tf.tasks import registry
>>> registry.family_for_task("MRPC").name, registry.family_named("span").name
('classification', 'span')
>>> registry.family_for_task("imdb")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
bert_tf.errors.UsageError: unknown task 'imdb'; use one of cola, sst2, ... or MODULE:CLASS, a task family of your own
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from typing import TYPE_CHECKING

from bert_tf.errors import UsageError

if TYPE_CHECKING:  # a type only (the families are imported by their paths, on first use)
    from bert_tf.tasks.family import TaskFamily

# The built-in families, each `MODULE:CLASS`, imported on first use: a new built-in family is
# one line here.
BUILT_IN = (
    "bert_tf.tasks.classification.family:ClassificationFamily",
    "bert_tf.tasks.span.family:SpanFamily",
    "bert_tf.tasks.token.family:TokenFamily",
    "bert_tf.tasks.choice.family:ChoiceFamily",
    "bert_tf.tasks.sentence_embedding.family:SentenceEmbeddingFamily",
)

_by_name: dict[str, type[TaskFamily]] = {}  # family name (built-in) or MODULE:CLASS -> family
_by_task: dict[str, type[TaskFamily]] = {}  # task name (lower case, aliases too) -> family
_by_kind: dict[str, type[TaskFamily]] = {}
_loaded = False


def _built_ins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for reference in BUILT_IN:
            register(_import(reference))


def _import(reference: str) -> type[TaskFamily]:
    """The family class `MODULE:CLASS` names, imported; one line naming the fix otherwise."""
    from bert_tf.tasks.family import TaskFamily

    module_name, _, class_name = reference.partition(":")
    if not module_name or not class_name:
        raise UsageError(f"{reference!r} is not MODULE:CLASS, the import path of a task family")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or not module_name.startswith(error.name):
            raise  # the module is there, and something it imports is not: its own traceback says what
        raise UsageError(
            f"task family {reference}: no module named {module_name!r}; install it, or put its folder on "
            "PYTHONPATH (or run from the folder that holds it)"
        ) from None
    family = getattr(module, class_name, None)
    if family is None:
        raise UsageError(f"task family {reference}: module {module_name} has no {class_name!r}")
    if not (isinstance(family, type) and issubclass(family, TaskFamily)) or family is TaskFamily:
        raise UsageError(
            f"task family {reference}: {class_name} is not a task family (a subclass of "
            "bert_tf.tasks.family.TaskFamily); see docs/task-families.md"
        )
    return family


def register(family: type[TaskFamily]) -> type[TaskFamily]:
    """Files `family` under its name, tasks, aliases and kinds (once); a name or kind another
    family holds already, or options that clash with the shared settings, are refused. The
    built-in families and those named MODULE:CLASS are registered when first asked for."""
    _built_ins()
    name = family.reference()
    if _by_name.get(name) is family:
        return family
    tasks = [task.lower() for task in (*family.tasks, *family.aliases)]
    taken = [task for task in tasks if task in _by_task] + [kind for kind in family.kinds if kind in _by_kind]
    if taken or not family.tasks or not family.kinds:
        raise UsageError(
            f"task family {name} needs task names and kinds of its own; taken or missing: {taken or 'none given'}"
        )
    _check_options(family, name)
    _by_name[name] = family
    _by_task.update(dict.fromkeys(tasks, family))
    _by_kind.update(dict.fromkeys(family.kinds, family))
    return family


def _check_options(family: type[TaskFamily], name: str) -> None:
    """A family's options are its own flags: none may be named like a shared setting, nor like
    another family's option of another type."""
    from bert_tf.cli import flag_type
    from bert_tf.tasks.settings import FinetuneSettings

    shared = {field.name for field in dataclasses.fields(FinetuneSettings)}
    known = {other.name: flag_type(typing.get_type_hints(owner)[other.name]) for owner, other in _options()}
    hints = typing.get_type_hints(family.Options)
    for field in dataclasses.fields(family.Options):
        if field.name in shared:
            raise UsageError(
                f"task family {name}: its option {field.name!r} clashes with the shared setting "
                f"--{field.name}; rename the option"
            )
        kind = flag_type(hints[field.name])
        if known.get(field.name, kind) is not kind:
            raise UsageError(
                f"task family {name}: its option {field.name!r} ({kind.__name__}) clashes with another "
                f"family's option of that name ({known[field.name].__name__}); rename it"
            )


def families() -> list[type[TaskFamily]]:
    """Every registered family: the built-in ones first."""
    _built_ins()
    return list(dict.fromkeys(_by_name.values()))


def tasks() -> tuple[str, ...]:
    """The task names `--task` takes, family by family."""
    return tuple(task for family in families() for task in family.tasks)


def family_for_task(task: str) -> type[TaskFamily]:
    """The family of a task name (any case: "mrpc", "squad_v2", "ner", "swag", ...), or of a
    family written outside bert_tf, named `MODULE:CLASS` (imported and registered)."""
    if ":" in task:
        return load_family(task)
    _built_ins()
    family = _by_task.get(task.lower())
    if family is None:
        raise UsageError(
            f"unknown task {task!r}; use one of {', '.join(tasks())} or MODULE:CLASS, a task family of your own"
        )
    return family


def load_family(reference: str) -> type[TaskFamily]:
    """The family `MODULE:CLASS`, imported and registered (once)."""
    _built_ins()
    found = _by_name.get(reference)
    return found if found is not None else register(_import(reference))


def family_named(name: str) -> type[TaskFamily]:
    """The family a task.json names: a built-in family's name, or `MODULE:CLASS`."""
    if ":" in name:
        return load_family(name)
    _built_ins()
    if name not in _by_name:
        raise UsageError(f"unknown task family {name!r}; bert_tf's own are {', '.join(_by_name)}")
    return _by_name[name]


def family_of_info(info) -> type[TaskFamily]:
    """The family a task.json (`FinetunedModelInfo`) names (files written before families were
    named: by their kind)."""
    return family_named(info.family) if info.family else family_for_kind(info.kind)


def family_for_kind(kind: str) -> type[TaskFamily]:
    """The family whose models are of `kind` (a task.json written before families were named)."""
    _built_ins()
    family = _by_kind.get(kind)
    if family is None:
        raise UsageError(f"unknown task kind {kind!r}; use one of {', '.join(_by_kind)}")
    return family


def family_for_model(model_class: type) -> type[TaskFamily]:
    """The family whose heads are `model_class` (a task model class or a subclass of one)."""
    for family in families():
        if issubclass(model_class, family.model_class):
            return family
    raise TypeError(f"{model_class.__name__} is not the task model of a task family")


def task_heads() -> dict[str, object]:
    """{kind: its head as Hugging Face folders and original checkpoints store it}
    (`TaskFamily.head`), for the families that have one; a kind is found back from its head."""
    heads = {}
    for family in families():
        for kind in family.kinds:
            head = family.head(kind)
            if head is not None:
                heads[kind] = head
    return heads


def family_export(kind: str):
    """(family, FUNCTION) of a task family's own export kind (`TaskFamily.export_kinds`), or None."""
    for family in families():
        if kind in family.export_kinds:
            module_name, _, function_name = family.export_kinds[kind].partition(":")
            return family, getattr(importlib.import_module(module_name), function_name)
    return None


def export_kinds() -> tuple[str, ...]:
    """The export kinds the registered families add."""
    return tuple(kind for family in families() for kind in family.export_kinds)


def _options() -> list[tuple[type, dataclasses.Field]]:
    """(Options class, field) of every registered family's options."""
    return [
        (family.Options, field)
        for family in _by_name.values()
        for field in dataclasses.fields(family.Options)
    ]


def option_fields() -> dict[str, dataclasses.Field]:
    """{name: field} of every registered family's options (the first family's field of a name)."""
    found: dict[str, dataclasses.Field] = {}
    for _, field in _options():
        found.setdefault(field.name, field)
    return found


def make_family(settings, tokenizer) -> TaskFamily:
    """The family of `settings.task` (a `FinetuneSettings`), built on its settings and `tokenizer`."""
    return family_for_task(settings.task)(settings, tokenizer)
