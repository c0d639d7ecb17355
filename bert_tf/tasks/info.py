"""task.json: what a fine-tuned model is for and how its text becomes features (a leaf module).

`FinetunedModelInfo` holds what every task family shares (the task, the family, the kind
of its model, the labels, the casing, the sequence length) and `options`, the family's
own fields (SQuAD's `doc_stride` and `max_answer_length`, a multi-label model's
`threshold`, ...), which only the family reads. task.json is one flat JSON object: the
common fields and the family's, side by side, as every version of bert_tf wrote it.

task.json is versioned (`format_version`); a file without one is version 1, the format
before the field existed, and reads unchanged. `family` names the task family: a
built-in family's name ("classification", "span", ...) or, for a family written outside
bert_tf, its import path ("my_package.my_module:MyFamily"); a file without it (written
before families were named) is read by its `kind`.

This module imports nothing from the rest of bert_tf but its errors.

Example:

>>> info = FinetunedModelInfo(task="mrpc", kind="classification", label_list=["0", "1"],
...                           lower_case=True, max_seq_length=128, family="classification")
>>> FinetunedModelInfo.from_json(info.to_json()) == info
True
>>> sorted(info.to_json())
['family', 'format_version', 'kind', 'label_list', 'lower_case', 'max_seq_length', 'task']
>>> FinetunedModelInfo.from_json({**info.to_json(), "doc_stride": 64}).options
{'doc_stride': 64}
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bert_tf.errors import damaged

TASK_FILE = "task.json"
FORMAT_VERSION = 1
# What every task.json holds; its other fields are the family's options.
COMMON_FIELDS = ("task", "family", "kind", "label_list", "lower_case", "max_seq_length", "format_version")


@dataclasses.dataclass(frozen=True)
class FinetunedModelInfo:
    """A fine-tuned model's task.json (see the module docstring)."""

    task: str
    kind: str
    label_list: list[str] | None
    lower_case: bool
    max_seq_length: int
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    family: str | None = None  # None: a task.json written before families were named (read by its kind)
    format_version: int = FORMAT_VERSION

    def option(self, name: str, default: Any = None) -> Any:
        """The family's field `name` (None and absent read as `default`)."""
        value = self.options.get(name)
        return default if value is None else value

    def replace(self, **changes) -> FinetunedModelInfo:
        """A copy with common fields changed; other names change the family's options."""
        common = {name: value for name, value in changes.items() if name in COMMON_FIELDS}
        options = {name: value for name, value in changes.items() if name not in COMMON_FIELDS}
        return dataclasses.replace(self, **common, options={**self.options, **options})

    def to_json(self) -> dict[str, Any]:
        """The task.json content: the common fields, then the family's options that are set."""
        values = {name: getattr(self, name) for name in COMMON_FIELDS}
        if values["family"] is None:
            del values["family"]
        values.update({name: value for name, value in self.options.items() if value is not None})
        return values

    @classmethod
    def from_json(cls, values: Any, source: str = TASK_FILE) -> FinetunedModelInfo:
        """Reads task.json content, any version up to FORMAT_VERSION; raises DamagedFileError
        (naming `source`) for content that is not a task description of a known version."""
        if not isinstance(values, dict):
            raise damaged(source, "not a task description", "save the model again")
        version = values.get("format_version", 1)  # files from before the field are version 1
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
            raise damaged(
                source,
                f"format_version {version!r}; this bert_tf reads versions 1 to {FORMAT_VERSION}",
                "update bert_tf, or save the model again with this one",
            )
        missing = [name for name in ("task", "kind", "lower_case", "max_seq_length") if name not in values]
        if missing:
            raise damaged(source, f"not a task description: no {', '.join(missing)}", "save the model again")
        options = {name: value for name, value in values.items() if name not in COMMON_FIELDS}
        info = cls(
            task=values["task"],
            family=values.get("family"),
            kind=values["kind"],
            label_list=values.get("label_list"),  # absent: no labels (what needs them says so)
            lower_case=values["lower_case"],
            max_seq_length=values["max_seq_length"],
            options=options,
            format_version=version,
        )
        info._check(source)
        return info

    def _check(self, source: str) -> None:
        labels = self.label_list
        wrong = [
            name
            for name, ok in (
                ("task", isinstance(self.task, str) and self.task),
                ("family", self.family is None or (isinstance(self.family, str) and self.family)),
                ("kind", isinstance(self.kind, str) and self.kind),
                ("lower_case", isinstance(self.lower_case, bool)),
                ("max_seq_length", isinstance(self.max_seq_length, int) and self.max_seq_length > 0),
                (
                    "label_list",
                    labels is None or (isinstance(labels, list) and all(isinstance(x, str) for x in labels)),
                ),
            )
            if not ok
        ]
        if wrong:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in wrong)
            raise damaged(source, f"not a task description: {shown}", "save the model again")
