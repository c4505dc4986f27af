"""Framework profiles: one data file per software stack and era, looked up by name.

Each ``<name>.yaml`` beside this module is a :class:`~simtrain.specs.framework.FrameworkProfile`
with a ``sources`` entry for every field. A profile may ``extends:`` another (a stack built on
a base stack, e.g. NeMo on Megatron-Core): mappings merge key by key, the file's own values
win, and so do its sources. A source is written ``"<provenance>: <citation>"`` with provenance
documented, fitted or assumed.

The files are package data, read once per process; profiles are frozen, so sharing them is safe.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

from pydantic import ValidationError

from simtrain.errors import SpecError
from simtrain.specs.framework import DEFAULT_FRAMEWORK, FieldSource, FrameworkProfile
from simtrain.specs.safe_yaml import load_yaml_text

__all__ = ["DEFAULT_FRAMEWORK", "framework_names", "get_framework"]


@cache
def framework_names() -> tuple[str, ...]:
    """Names of the built-in profiles, sorted."""
    folder = files(__package__)
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _raw(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    if name in seen:
        raise SpecError(f"framework profile '{name}' extends itself ({' -> '.join(seen)})")
    text = files(__package__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    data = load_yaml_text(text, f"{name}.yaml") or {}
    base = data.pop("extends", None)
    if base is not None:
        data = _deep_merge(_raw(base, (*seen, name)), data)
    return data


def _source(text: Any) -> Any:
    """``"documented: docs/..."`` -> FieldSource; anything else is left to validation."""
    if isinstance(text, str) and ":" in text:
        provenance, _, source = text.partition(":")
        return FieldSource(provenance=provenance.strip(), source=source.strip())  # type: ignore[arg-type]
    return text


@cache
def get_framework(name: str, field: str = "training.framework") -> FrameworkProfile:
    """The built-in profile ``name``, or a SpecError listing the known ones.

    Examples:
        >>> get_framework("megatron-lm-2021").zero_stages
        (0,)
    """
    known = framework_names()
    if name not in known:
        raise SpecError(
            f"'{field}' must be a known framework (got {name!r}; known: {', '.join(known)})"
        )
    data = _raw(name)
    data["name"] = name
    data["sources"] = {key: _source(value) for key, value in data.get("sources", {}).items()}
    try:
        return FrameworkProfile.model_validate(data)
    except ValidationError as exc:  # a broken data file is a packaging bug; say which
        raise SpecError(f"framework profile '{name}' is invalid: {exc}") from None
