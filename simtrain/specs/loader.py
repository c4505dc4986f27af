"""Load experiment YAML files: ``extends`` chains, deep merge, dotted ``--set`` overrides.

An experiment file may name one or more base files with ``extends:`` (paths relative to the
file that names them). Bases are merged first, in order, then the file itself on top: mappings
merge key by key, everything else is replaced. Overrides such as ``parallel.tp=8`` are applied
last; their values are parsed as YAML scalars, so ``8`` is an int and ``true`` a bool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from simtrain.errors import SpecError
from simtrain.specs.experiment import ExperimentSpec


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``base`` updated by ``top``; nested mappings merge, other values are replaced.

    Examples:
        >>> deep_merge({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}})
        {'a': {'x': 1, 'y': 3}, 'b': 1}
    """
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_yaml(path: Path) -> dict[str, Any]:
    """Parse one YAML file into a mapping, with errors that name the file and line."""
    if not path.exists():
        raise SpecError(f"file '{path}' does not exist")
    if not path.is_file():
        raise SpecError(f"'{path}' is not a file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"'{path}' is not valid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise SpecError(f"'{path}' is not a UTF-8 text file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"'{path}' must contain a mapping of sections (got {type(data).__name__})")
    return data


def load_yaml_tree(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read ``path`` and everything it ``extends``, merged into one mapping."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _seen:
        chain = " -> ".join(str(p) for p in (*_seen, resolved))
        raise SpecError(f"'extends' forms a cycle: {chain}")
    data = read_yaml(path)
    _anchor_calibration(data, path)
    bases = data.pop("extends", [])
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        raise SpecError(f"'{path}': 'extends' must be a path or a list of paths (got {bases!r})")
    merged: dict[str, Any] = {}
    for base in bases:
        merged = deep_merge(merged, load_yaml_tree(path.parent / base, (*_seen, resolved)))
    return deep_merge(merged, data)


def _anchor_calibration(data: dict[str, Any], path: Path) -> None:
    """Make a relative ``cluster.calibration`` path relative to the file that sets it."""
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and isinstance(cluster.get("calibration"), str):
        file = Path(cluster["calibration"])
        if not file.is_absolute():
            cluster["calibration"] = str(path.parent / file)


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides; values are parsed as YAML scalars.

    Examples:
        >>> apply_overrides({"parallel": {"tp": 1}}, ["parallel.tp=8", "name=x"])
        {'parallel': {'tp': 8}, 'name': 'x'}
    """
    result = dict(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"override '{item}' must have the form section.field=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        patch: Any = value
        for part in reversed(key.strip().split(".")):
            patch = {part: patch}
        result = deep_merge(result, patch)
    return result


def format_validation_error(exc: ValidationError, source: str = "") -> str:
    """Turn pydantic's report into one line: ``'<field>' <problem> (got <value>)`` per error."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "is not a known field (check the spelling; see the spec reference)"
        elif err["type"] == "missing":
            msg = "is required"
        if loc:
            got = err.get("input")
            shown = (
                "" if err["type"] in ("missing",) or isinstance(got, dict) else f" (got {got!r})"
            )
            parts.append(f"'{loc}' {msg}{shown}")
        else:
            parts.append(msg)
    prefix = f"{source}: " if source else ""
    return prefix + "; ".join(parts)


def experiment_from_dict(data: Mapping[str, Any], source: str = "") -> ExperimentSpec:
    """Validate a mapping into an :class:`ExperimentSpec`, raising :class:`SpecError`."""
    try:
        return ExperimentSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source)) from None


def load_experiment(path: str | Path, overrides: Iterable[str] = ()) -> ExperimentSpec:
    """Load an experiment YAML file with its ``extends`` chain and ``--set`` overrides.

    Raises:
        SpecError: the file is missing or malformed, or the spec is invalid.
    """
    overrides = list(overrides)
    data = apply_overrides(load_yaml_tree(path), overrides)
    if overrides and not any(o.split("=", 1)[0].strip() == "description" for o in overrides):
        # The file's description told what the file sets up; after an override it would
        # describe another experiment, so reports fall back to titles built from the spec.
        data = {**data, "description": ""}
    return experiment_from_dict(data, str(path))
