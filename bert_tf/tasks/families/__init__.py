"""The task families, filed by the task names and kinds they serve.

A family (`base.TaskFamily`) is everything one kind of task needs: its readers, its
preprocessor, its head, its loss and metrics, what its task.json holds, its serving
signatures and its post-processing. The runner, the saved-model folder
(`bert_tf.tasks.finetuned`), `bert_tf.tasks.models.compile_args` and the raw-text export
(`bert_tf.serving.task`) look the family up here instead of testing a task's name or kind.

>>> from bert_tf.tasks import families
>>> families.family_for_task("MRPC").__name__, families.family_for_kind("span").__name__
('ClassificationFamily', 'SpanFamily')
>>> families.family_for_task("imdb")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
bert_tf.tasks.features.TaskDataError: unknown task 'imdb'; use one of cola, sst2, ...
"""

from __future__ import annotations

from bert_tf.checkpoints import TaskHead
from bert_tf.tasks.families.base import Predictions, TaskData, TaskFamily
from bert_tf.tasks.families.choice import ChoiceFamily
from bert_tf.tasks.families.classification import ClassificationFamily
from bert_tf.tasks.families.span import SpanFamily
from bert_tf.tasks.families.token import TokenFamily
from bert_tf.tasks.features import TaskDataError
from bert_tf.tasks.kinds import TaskKind

__all__ = [
    "TASKS",
    "ChoiceFamily",
    "ClassificationFamily",
    "Predictions",
    "SpanFamily",
    "TaskData",
    "TaskFamily",
    "TokenFamily",
    "family_for_kind",
    "family_for_model",
    "family_for_task",
    "make_family",
    "register",
    "task_heads",
]

_BY_TASK: dict[str, type[TaskFamily]] = {}  # task name (lower case, aliases too) -> family
_BY_KIND: dict[TaskKind, type[TaskFamily]] = {}
TASKS: tuple[str, ...] = ()  # the task names, in the order --task lists them


def register(family: type[TaskFamily]) -> type[TaskFamily]:
    """Files `family` under its `tasks`, `aliases` and `kinds`; a name or kind that another
    family holds already is refused."""
    global TASKS
    names = [name.lower() for name in (*family.tasks, *family.aliases)]
    taken = [name for name in names if name in _BY_TASK] + [kind for kind in family.kinds if kind in _BY_KIND]
    if taken or not family.tasks or not family.kinds:
        raise ValueError(
            f"{family.__name__} needs task names and kinds of its own; taken or missing: {taken or 'none given'}"
        )
    _BY_TASK.update(dict.fromkeys(names, family))
    _BY_KIND.update(dict.fromkeys(family.kinds, family))
    TASKS = (*TASKS, *family.tasks)
    return family


for _family in (ClassificationFamily, SpanFamily, TokenFamily, ChoiceFamily):
    register(_family)


def family_for_task(task: str) -> type[TaskFamily]:
    """The family of a task name (any case): "mrpc", "squad_v2", "ner", "swag", ..."""
    family = _BY_TASK.get(task.lower())
    if family is None:
        raise TaskDataError(f"unknown task {task!r}; use one of {', '.join(TASKS)}")
    return family


def family_for_kind(kind: TaskKind | str) -> type[TaskFamily]:
    """The family whose models are of `kind` (a task.json's "kind")."""
    try:
        family = _BY_KIND.get(TaskKind(kind))
    except ValueError:
        family = None
    if family is None:
        raise ValueError(f"unknown task kind {kind!r}; use one of {', '.join(_BY_KIND)}")
    return family


def family_for_model(model_class: type) -> type[TaskFamily]:
    """The family whose heads are `model_class` (a task model class or a subclass of one)."""
    for family in _BY_KIND.values():
        if issubclass(model_class, family.model_class):
            return family
    raise TypeError(f"{model_class.__name__} is not the task model of a task family")


def task_heads() -> dict[TaskKind, TaskHead]:
    """Every kind's head as Hugging Face folders and original checkpoints store it
    (`TaskFamily.head`); a kind is found back from its head (`bert_tf.tasks.finetuned`)."""
    return {kind: family.head(kind) for kind, family in _BY_KIND.items()}


def make_family(settings, tokenizer) -> TaskFamily:
    """The family of `settings.task`, built on a run's settings and tokenizer."""
    return family_for_task(settings.task)(settings, tokenizer)
