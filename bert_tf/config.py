"""Model configuration: the fields of the original `bert_config.json`, validated.

`BertConfig` reads and writes the JSON file of the original release unchanged, so a
Google checkpoint directory's `bert_config.json` loads as it is. Unknown keys are
rejected with a message naming them: a misspelt field (`hidden_layers`) silently
falling back to a default would build the wrong model. Hugging Face `config.json`
files carry many extra keys; `BertConfig.from_hf_dict` maps the ones that matter.

Example:

>>> from bert_tf.config import load_config
>>> config = load_config("bert_tiny")
>>> config.num_hidden_layers, config.hidden_size, config.head_size
(2, 128, 64)
"""

from __future__ import annotations

import dataclasses
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from bert_tf.errors import BertTfError, damaged

# Activations by name. "gelu" is the original modeling.py's: the tanh approximation.
# "gelu_exact" is the erf form, which Hugging Face calls "gelu" (and its released BERT
# configs use); from_hf_dict translates transformers' names into these.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")
# transformers' hidden_act name -> ours.
_HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu"}

_CONFIG_SOURCE_DIR = Path(__file__).resolve().parent.parent / "configs"


class ConfigError(BertTfError, ValueError):
    """A configuration value a user must fix; the message says what and how."""


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyperparameters of a BERT encoder, as in the original `bert_config.json`."""

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                f"({self.num_attention_heads}); choose a head count that divides it "
                f"(e.g. {_divisor_hint(self.hidden_size, self.num_attention_heads)})"
            )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ConfigError(
                f"unknown hidden_act {self.hidden_act!r}; use one of {', '.join(SUPPORTED_ACTIVATIONS)}"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{name} must be a number, got {value!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value!r}")
        if not self.initializer_range > 0:
            raise ConfigError(f"initializer_range must be > 0, got {self.initializer_range!r}")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    # --- (de)serialization -------------------------------------------------

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> BertConfig:
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"{source}: unknown keys {unknown}; a bert_config.json has only "
                f"{sorted(known)} (for a Hugging Face config.json use BertConfig.from_hf_dict)"
            )
        if "vocab_size" not in values:
            raise ConfigError(f"{source}: vocab_size is missing")
        try:
            return cls(**values)
        except ConfigError as error:  # a bad value: say which file it came from
            raise ConfigError(f"{source}: {error}") from None

    @classmethod
    def from_hf_dict(cls, values: dict[str, Any], source: str = "config.json") -> BertConfig:
        """Builds a config from a Hugging Face `BertConfig` JSON dict (extra keys ignored)."""
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise ConfigError(f"{source}: model_type is {model_type!r}; only 'bert' is supported")
        epsilon = values.get("layer_norm_eps", 1e-12)
        if abs(epsilon - 1e-12) > 1e-15:
            raise ConfigError(f"{source}: layer_norm_eps={epsilon}; BERT uses 1e-12")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"{source}: only absolute position embeddings are supported")
        known = {field.name for field in dataclasses.fields(cls)}
        values = {k: v for k, v in values.items() if k in known}
        if "hidden_act" in values:
            values["hidden_act"] = _HF_ACTIVATIONS.get(values["hidden_act"], values["hidden_act"])
        return cls.from_dict(values, source)

    def to_hf_dict(self) -> dict[str, Any]:
        """The BERT fields of a Hugging Face `config.json`, activation named as transformers names it."""
        values = self.to_dict()
        values["hidden_act"] = {
            ours: hf for hf, ours in _HF_ACTIVATIONS.items() if hf != "gelu_pytorch_tanh"
        }.get(values["hidden_act"], values["hidden_act"])
        return values

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> BertConfig:
        # lazy: fileio loads TensorFlow; configs load without it (bench/gpu/pretrain_jax.py)
        from bert_tf import fileio

        path = os.fspath(path)
        if not fileio.isfile(path):
            raise ConfigError(f"config file not found: {path}")
        try:
            values = json.loads(fileio.read_text(path))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise damaged(path, f"not valid JSON: {error}", "copy it again, or rewrite it") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path} must hold a JSON object, got {type(values).__name__}")
        return cls.from_dict(values, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        # lazy: fileio loads TensorFlow; configs load without it (bench/gpu/pretrain_jax.py)
        from bert_tf import fileio

        fileio.write_text(path, self.to_json_string())

    def replace(self, **changes: Any) -> BertConfig:
        return dataclasses.replace(self, **changes)


def _divisor_hint(hidden_size: int, heads: int) -> int:
    divisors = [d for d in range(1, hidden_size + 1) if hidden_size % d == 0]
    return min(divisors, key=lambda d: abs(d - heads))


def config_names() -> list[str]:
    """Names of the configs shipped in `configs/` (usable as `--config=NAME`)."""
    return sorted(
        path.name[: -len(".json")] for path in _config_dir().iterdir() if path.name.endswith(".json")
    )


def _config_dir():
    # From a source checkout the top-level configs/ folder; once installed, the copy that
    # setup.py places in the package as bert_tf._configs.
    if _CONFIG_SOURCE_DIR.is_dir():
        return _CONFIG_SOURCE_DIR
    return resources.files("bert_tf._configs")


def load_config(name_or_path: str | os.PathLike) -> BertConfig:
    """Loads a shipped config by name (`bert_base`) or a `bert_config.json` by path."""
    text = os.fspath(name_or_path)
    if os.path.sep in text or text.endswith(".json") or "://" in text or os.path.exists(text):
        return BertConfig.from_json_file(text)
    candidate = _config_dir() / f"{text}.json"
    if not candidate.is_file():
        raise ConfigError(f"no config named {text!r}; use one of {config_names()} or a path to a JSON file")
    return BertConfig.from_dict(
        json.loads(candidate.read_text(encoding="utf-8")), source=f"configs/{text}.json"
    )
