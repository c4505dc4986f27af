"""Load experiment YAML files: ``extends`` chains, deep merge, dotted ``--set`` overrides.

An experiment file may name one or more base files with ``extends:`` (paths relative to the
file that names them). Bases are merged first, in order, then the file itself on top: mappings
merge key by key, everything else is replaced. Overrides such as ``parallel.tp=8`` are applied
last; their values are parsed as YAML scalars, so ``8`` is an int and ``true`` a bool.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simtrain.errors import SpecError
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.safe_yaml import load_yaml_text, read_yaml_file


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
    """Parse one YAML file into a mapping, through the front door (:mod:`.safe_yaml`)."""
    data = read_yaml_file(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"'{path}' must contain a mapping of sections (got {type(data).__name__})")
    return data


MAX_EXTENDS_DEPTH = 16
"""Longest chain of ``extends`` (a file that extends a file that extends ...)."""
MAX_EXTENDS_FILES = 64
"""Most files one experiment may pull in through ``extends``, counting repeats."""


def load_yaml_tree(
    path: str | Path, _seen: tuple[str, ...] = (), _count: list[int] | None = None
) -> dict[str, Any]:
    """Read ``path`` and everything it ``extends``, merged into one mapping.

    Chains are at most :data:`MAX_EXTENDS_DEPTH` deep and pull in at most
    :data:`MAX_EXTENDS_FILES` files; a file that extends itself, directly or through others
    or through symbolic links, is an error naming the cycle.
    """
    path = Path(path)
    count = [0] if _count is None else _count
    count[0] += 1
    if count[0] > MAX_EXTENDS_FILES:
        raise SpecError(
            f"'extends' must pull in at most {MAX_EXTENDS_FILES} files (got more, at '{path}')"
        )
    resolved = os.path.realpath(path)
    if resolved in _seen:
        chain = " -> ".join((*_seen, resolved))
        raise SpecError(f"'extends' must not form a cycle (got {chain})")
    if len(_seen) >= MAX_EXTENDS_DEPTH:
        raise SpecError(
            f"'extends' chains must be at most {MAX_EXTENDS_DEPTH} files deep (got more, at "
            f"'{path}')"
        )
    data = read_yaml(path)
    _anchor_calibration(data, path)
    bases = data.pop("extends", [])
    if isinstance(bases, str):
        bases = [bases]
    if (
        not isinstance(bases, list)
        or not all(isinstance(b, str) and b and "\0" not in b for b in bases)
        or len(bases) > MAX_EXTENDS_FILES
    ):
        shown = repr(bases) if len(repr(bases)) < 80 else f"{type(bases).__name__} of {len(bases)}"
        raise SpecError(
            f"'{path}': 'extends' must be a path or a list of at most {MAX_EXTENDS_FILES} paths "
            f"(got {shown})"
        )
    merged: dict[str, Any] = {}
    for base in bases:
        merged = deep_merge(merged, load_yaml_tree(path.parent / base, (*_seen, resolved), count))
    return deep_merge(merged, data)


_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d{1,3}")
MAX_OVERRIDE_KEY_PARTS = 8
"""Most dotted parts of a ``--set`` key (the deepest spec field has four)."""


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
        parts = key.strip().split(".")
        if not sep or not key.strip() or not all(parts):
            raise SpecError(f"'--set' must have the form section.field=value (got {item[:80]!r})")
        if len(parts) > MAX_OVERRIDE_KEY_PARTS:
            raise SpecError(
                f"'--set' keys must have at most {MAX_OVERRIDE_KEY_PARTS} dotted parts "
                f"(got {len(parts)})"
            )
        value = _override_value(raw, key.strip())
        patch: Any = value
        for part in reversed(parts):
            patch = {part: patch}
        result = deep_merge(result, patch)
    return result


def _override_value(raw: str, key: str) -> Any:
    """The value of ``--set key=raw``: a YAML scalar or flow collection, else the raw text."""
    if not raw.strip():
        return ""
    if _SCIENTIFIC.fullmatch(raw.strip()):  # YAML 1.1 reads 1e9 as a string; people mean 1e9
        return float(raw)
    try:
        return load_yaml_text(raw, f"--set {key}")
    except SpecError as exc:
        if "must be valid YAML" in str(exc):
            return raw  # free text such as "a: b" stays a string
        raise


_TYPE_WORDS = {
    "int_parsing": "an integer",
    "int_type": "an integer",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "a string",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "tuple_type": "a list",
}
_RANGE_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"}
)


def _walk(model: Any, loc: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """The FieldInfo at a pydantic error location and the spec classes it holds.

    Walks nested specs, unions and lists; the classes are those whose fields come next.
    """
    import typing

    from pydantic import BaseModel

    def models(annotation: Any) -> list[type[BaseModel]]:
        args = typing.get_args(annotation)
        if not args:
            ok = isinstance(annotation, type) and issubclass(annotation, BaseModel)
            return [annotation] if ok else []
        return [m for a in args for m in models(a)]

    current, info = [model], None
    for part in loc:
        if not isinstance(part, str):
            continue  # a list index
        hit = next((m.model_fields[part] for m in current if part in m.model_fields), None)
        if hit is None:
            continue  # a union tag such as 'sync'
        info = hit
        current = models(hit.annotation) or current
    return info, current


def _field_info(model: Any, loc: tuple[Any, ...]) -> Any:
    """The FieldInfo at a pydantic error location, walking nested specs, unions and lists."""
    return _walk(model, loc)[0]


def _unknown_field(model: Any, loc: tuple[Any, ...]) -> str:
    """``is not a known field`` with the nearest known names, or all of them.

    Examples:
        >>> from simtrain.specs.experiment import ExperimentSpec
        >>> _unknown_field(ExperimentSpec, ("training", "framwork"))
        "is not a known field (did you mean 'framework'?)"
    """
    import difflib

    if model is None or not loc or not isinstance(loc[-1], str):
        return "is not a known field (check the spelling)"
    known = sorted({name for m in _walk(model, loc[:-1])[1] for name in m.model_fields})
    near = difflib.get_close_matches(loc[-1], known, n=3, cutoff=0.6)
    if near:
        return f"is not a known field (did you mean {' or '.join(repr(n) for n in near)}?)"
    return f"is not a known field (known: {', '.join(known)})"


def _shown(value: Any) -> str:
    """A short, safe rendering of a bad value (huge integers and strings abbreviated)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, float) and value == value and abs(value) >= 1e6:
        return f"{value:g}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(err: Any, model: Any) -> str:
    """``must be ...`` for one pydantic error, with the field's full range where it has one."""
    from simtrain.specs.base import field_range

    kind, msg = err["type"], err["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return _unknown_field(model, tuple(err["loc"]))
    if kind == "missing":
        return "is required"
    info = _field_info(model, tuple(err["loc"])) if model is not None else None
    span, why = field_range(info) if info is not None else ("", "")
    where = ""
    if span:
        where = f" in {span}" if span[0].isdigit() or span[0] == "-" else f" {span}"
    reason = f" [{why}]" if why and span else ""
    if kind in _RANGE_ERRORS or (span and kind in ("int_from_float",)):
        integer = (
            info is not None
            and "int" in str(info.annotation)
            and "float" not in str(info.annotation)
        )
        noun = "an integer" if integer else "a finite number"
        return f"must be {noun}{where}{reason}"
    if kind in _TYPE_WORDS:
        return f"must be {_TYPE_WORDS[kind]}{where}{reason}"
    if kind in ("literal_error", "enum"):
        return "must be " + msg.removeprefix("Input should be ")
    if kind == "union_tag_invalid":
        return "must have a 'kind' of " + msg.split("expected tags: ")[-1].rstrip(")")
    if kind == "union_tag_not_found":
        return "must have a 'kind'"
    if kind == "string_too_long":
        return "must be " + msg.replace("String should have", "a string of")
    if msg.startswith("Input should be "):
        return "must be " + msg.removeprefix("Input should be ")
    return msg


def format_validation_error(exc: ValidationError, source: str = "", model: Any = None) -> str:
    """Turn pydantic's report into one line: ``'<field>' must be <constraint> (got <value>)``.

    Args:
        exc: the validation error.
        source: the file (or flag) the input came from, prefixed to the line.
        model: the spec class that was validated; with it, range errors quote the field's
            whole range and the reason for its limit (:func:`~simtrain.specs.base.bounded`).
    """
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        msg = _message(err, model)
        if loc:
            got = err.get("input")
            shown = (
                ""
                if err["type"] in ("missing",)
                or isinstance(got, dict)
                or msg.startswith("is ")
                or "(got " in msg
                else f" (got {_shown(got)})"
            )
            if "[" in msg and msg.endswith("]") and shown:
                head, _, why = msg.rpartition(" [")
                parts.append(f"'{loc}' {head}{shown}: {why[:-1]}")
            else:
                parts.append(f"'{loc}' {msg}{shown}")
        else:
            parts.append(msg)
    if len(exc.errors()) > 5:
        parts.append(f"and {len(exc.errors()) - 5} more")
    prefix = f"{source}: " if source else ""
    return " ".join((prefix + "; ".join(parts)).split())


def experiment_from_dict(data: Mapping[str, Any], source: str = "") -> ExperimentSpec:
    """Validate a mapping into an :class:`ExperimentSpec`, raising :class:`SpecError`."""
    try:
        return ExperimentSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source, ExperimentSpec)) from None


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
