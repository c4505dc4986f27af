"""SweepSpec: a base experiment plus axes over its fields, constraints and a metric to rank by.

A sweep file looks like::

    name: llama3-70b-1024
    base: ../../workloads/llama3-70b.yaml   # or an inline experiment mapping
    set: {cluster.num_gpus: 1024}           # dotted overrides applied to the base first
    axes:                                   # the Cartesian product of these ...
      parallel.tp: [1, 2, 4, 8]
      parallel.pp: {divisors_of: model.num_layers, max: 16}
      parallel.micro_batch_size: {range: [1, 4]}
    zip:                                    # ... times each zip group (fields move together)
      - parallel.pipeline_schedule: [1f1b, interleaved, interleaved]
        parallel.vpp: [1, 2, 4]
    constraints:                            # expressions over the resolved experiment
      - parallel.tp <= cluster.gpus_per_node
    metric: tokens_per_s                    # rank by it (max or min by its nature)

An axis is a list of values, ``{range: [start, stop]}`` or ``{range: [start, stop, step]}``
(both ends included, as people write sweeps), or ``{divisors_of: N}`` where ``N`` is a
number or a dotted field of the base experiment, optionally bounded by ``min``/``max``.
Fields and constraint names are checked against the experiment before anything runs; an
unknown one is a :class:`~simtrain.errors.SpecError` naming the valid fields.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from simtrain.errors import SpecError
from simtrain.specs.base import Spec, bounded, check_file_name, divisors
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import deep_merge, format_validation_error, load_yaml_tree, read_yaml

MAX_DIVIDEND = 1 << 40
"""Largest number a ``divisors_of`` axis factors (trial division up to its square root)."""
Metric = Literal[
    "tokens_per_s", "mfu", "hfu", "tflops_per_gpu", "step_time_s", "memory_headroom_bytes"
]
MINIMIZED_METRICS: frozenset[str] = frozenset({"step_time_s"})
"""Metrics where smaller is better; every other metric is maximised."""


class RangeAxis(Spec):
    """Integers from start to stop, both included, by step."""

    range: tuple[int, int] | tuple[int, int, int]
    """``[start, stop]`` or ``[start, stop, step]``; stop is included."""

    @model_validator(mode="after")
    def _check_step(self) -> RangeAxis:
        step = (*self.range, 1)[2]
        if step <= 0:
            raise ValueError(f"'range' step must be > 0 (got {step})")
        return self

    def count(self, base: dict[str, Any]) -> int:
        """How many values the range holds, without listing them."""
        start, stop, step = (*self.range, 1)[:3]
        return len(range(start, stop + 1, step))

    def values(self, base: dict[str, Any]) -> list[int]:
        """The integers of the range (``base`` is unused; kept for a uniform signature)."""
        start, stop, step = (*self.range, 1)[:3]
        return list(range(start, stop + 1, step))


class DivisorsAxis(Spec):
    """The divisors of a number or of a field of the base experiment, within bounds."""

    divisors_of: int | str
    """A positive integer up to 2**40, or a dotted field of the base experiment such as
    model.num_layers."""
    min: int = bounded(1, ge=1, le=MAX_DIVIDEND, why="as divisors_of")
    """Smallest divisor kept."""
    max: int | None = bounded(None, ge=1, le=MAX_DIVIDEND, why="as divisors_of")
    """Largest divisor kept (None: no bound)."""

    def count(self, base: dict[str, Any]) -> int:
        """How many divisors the axis holds."""
        return len(self.values(base))

    def values(self, base: dict[str, Any]) -> list[int]:
        """The divisors within ``[min, max]``, with a named field read from the base mapping."""
        target: Any = self.divisors_of
        if isinstance(target, str):
            target = lookup(base, target, "divisors_of")
        if (
            isinstance(target, bool)
            or not isinstance(target, int)
            or not 0 < target <= MAX_DIVIDEND
        ):
            raise SpecError(
                f"'divisors_of' must be an integer in 1..{MAX_DIVIDEND:,} (2**40: its divisors "
                f"are found in a million steps) (got {_short(target)})"
            )
        upper = self.max if self.max is not None else target
        return [d for d in divisors(target) if self.min <= d <= upper]


AxisValues = list[Any] | RangeAxis | DivisorsAxis
MAX_CONSTRAINT_CHARS = 1000
"""Longest sweep constraint expression."""


def _short(value: Any) -> str:
    text = (
        repr(value) if not isinstance(value, int) or value.bit_length() < 64 else "a huge integer"
    )
    return text if len(text) <= 60 else text[:57] + "..."


def _finite_values(values: Any, where: str) -> None:
    """Refuse non-finite numbers in an axis list (a value no experiment field accepts)."""
    if isinstance(values, list):
        for value in values:
            if isinstance(value, float) and not math.isfinite(value):
                raise SpecError(f"'{where}' must list finite values (got {value})")


class SweepSpec(Spec):
    """A sweep: which experiment, which fields vary over which values, and how to rank."""

    name: str = "sweep"
    """Short name shown in reports and used for the default store file: letters, digits,
    '.', '_', '+' and '-', at most 100 characters, not starting with a dot."""
    description: str = ""
    """What the sweep explores."""
    base: str | dict[str, Any]
    """The base experiment: a YAML path (relative to the sweep file) or an inline mapping."""
    set: dict[str, Any] = Field(default_factory=dict)
    """Dotted overrides applied to the base before sweeping, e.g. ``cluster.num_gpus: 1024``."""
    axes: dict[str, AxisValues] = Field(default_factory=dict)
    """Dotted experiment field -> values; the sweep takes their Cartesian product."""
    zip: list[dict[str, AxisValues]] = Field(default_factory=list)
    """Groups of fields that vary together (equal-length value lists), each a product factor."""
    constraints: list[str] = Field(default_factory=list)
    """Expressions over the resolved experiment that a configuration must satisfy."""
    metric: Metric = "tokens_per_s"
    """Result column to rank by."""
    goal: Literal["max", "min"] | None = None
    """Rank by the largest (max) or smallest (min) metric; None: min for step_time_s only."""
    top_k: int = bounded(10, gt=0, le=10_000, why="a table longer than 10,000 rows is a file")
    """Rows of the ranked table shown by the CLI."""

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        """A name that is also a safe file name (the default store is ``<name>.sqlite``)."""
        return check_file_name(value, "name")

    @field_validator("constraints")
    @classmethod
    def _short_constraints(cls, value: list[str]) -> list[str]:
        """Constraints are short expressions, not programs."""
        for i, text in enumerate(value):
            if len(text) > MAX_CONSTRAINT_CHARS:
                raise ValueError(
                    f"'constraints.{i}' must be at most {MAX_CONSTRAINT_CHARS} characters "
                    f"(got {len(text):,})"
                )
        return value

    @model_validator(mode="after")
    def _check_groups(self) -> SweepSpec:
        """Fields appear once; zip groups have at least one field."""
        seen: set[str] = set(self.axes)
        for i, group in enumerate(self.zip):
            if not group:
                raise ValueError(f"'zip.{i}' must name at least one field (got an empty group)")
            for field in group:
                if field in seen:
                    raise ValueError(f"'{field}' must be swept once (it appears in two groups)")
                seen.add(field)
        return self

    @property
    def ascending(self) -> bool:
        """Whether a smaller metric ranks first."""
        return (self.goal or ("min" if self.metric in MINIMIZED_METRICS else "max")) == "min"

    @property
    def swept_fields(self) -> list[str]:
        """Every swept dotted field, axes first, in file order."""
        return [*self.axes, *(f for group in self.zip for f in group)]


def field_paths(model: type[BaseModel], prefix: str = "", properties: bool = False) -> list[str]:
    """Dotted paths of every leaf field of a spec class (nested specs are walked).

    Args:
        model: the spec class.
        prefix: prepended to every path.
        properties: also list read-only properties (derived values such as
            ``parallel.num_microbatches``), which constraints may read but axes cannot set.

    Examples:
        >>> "parallel.tp" in field_paths(ExperimentSpec)
        True
        >>> "parallel.num_microbatches" in field_paths(ExperimentSpec, properties=True)
        True
    """
    paths: list[str] = []
    for name, info in model.model_fields.items():
        nested = [a for a in _type_args(info.annotation) if _is_spec(a)]
        if nested:
            for sub in nested:
                paths += field_paths(sub, f"{prefix}{name}.", properties)
        else:
            paths.append(f"{prefix}{name}")
    if properties:
        paths += [
            f"{prefix}{name}"
            for klass in model.__mro__
            for name, value in vars(klass).items()
            if isinstance(value, property)
            and not name.startswith("_")
            and not name.startswith("model_")
        ]
    return sorted(set(paths))


def _type_args(annotation: Any) -> list[Any]:
    args = getattr(annotation, "__args__", None)
    return [annotation] if not args else [x for a in args for x in _type_args(a)]


def _is_spec(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def check_field(field: str, where: str, properties: bool = False) -> None:
    """Raise a SpecError unless ``field`` is a dotted field (or property) of an experiment.

    The message lists the valid names of the same section, or every name.

    Examples:
        >>> check_field("parallel.tpp", "axes")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        simtrain.errors.SpecError: 'axes' names an unknown experiment field 'parallel.tpp' (...)
    """
    valid = field_paths(ExperimentSpec, properties=properties)
    if field in valid:
        return
    section = field.rpartition(".")[0]
    near = [p for p in valid if section and p.startswith(section + ".")] or valid
    raise SpecError(
        f"'{where}' names an unknown experiment field {field!r} (valid: {', '.join(near)})"
    )


def lookup(data: dict[str, Any], dotted: str, where: str) -> Any:
    """Read a dotted key of a nested mapping (the base experiment before validation)."""
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise SpecError(
                f"'{where}' must name a field set in the base experiment (got {dotted!r})"
            )
        value = value[part]
    return value


def resolve_attribute(spec: Any, dotted: str, where: str) -> Any:
    """Read a dotted public attribute (field or property) of a resolved spec."""
    value = spec
    for part in dotted.split("."):
        if part.startswith("_") or not hasattr(value, part):
            raise SpecError(f"'{where}' names an unknown experiment attribute {dotted!r}")
        value = getattr(value, part)
    return value


def load_sweep(path: str | Path) -> tuple[SweepSpec, dict[str, Any]]:
    """Read a sweep file and its base experiment mapping (``extends`` resolved, ``set`` applied).

    Raises:
        SpecError: the file is malformed, a swept field is unknown, or the base is missing.
    """
    path = Path(path)
    spec = sweep_from_dict(read_yaml(path), str(path))
    return spec, base_mapping(spec, path.parent)


def sweep_from_dict(data: dict[str, Any], source: str = "") -> SweepSpec:
    """Validate a mapping into a :class:`SweepSpec`, checking every swept field name."""
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source, SweepSpec)) from None
    for field in spec.set:
        check_field(field, f"set.{field}")
    for field, values in spec.axes.items():
        check_field(field, f"axes.{field}")
        _finite_values(values, f"axes.{field}")
    for i, group in enumerate(spec.zip):
        for field, values in group.items():
            check_field(field, f"zip.{i}.{field}")
            _finite_values(values, f"zip.{i}.{field}")
    return spec


def base_mapping(spec: SweepSpec, folder: Path) -> dict[str, Any]:
    """The base experiment as a mapping: the file (with its ``extends``) or inline data."""
    if isinstance(spec.base, str):
        data = load_yaml_tree(folder / spec.base)
    else:
        data = dict(spec.base)
        if "extends" in data:
            inline = {k: v for k, v in data.items() if k != "extends"}
            parents = data["extends"] if isinstance(data["extends"], list) else [data["extends"]]
            data = {}
            for parent in parents:
                data = deep_merge(data, load_yaml_tree(folder / parent))
            data = deep_merge(data, inline)
    return with_fields(data, spec.set)


def with_fields(data: dict[str, Any], assignments: dict[str, Any]) -> dict[str, Any]:
    """Return ``data`` with each dotted field set to its value (nested mappings created).

    Examples:
        >>> with_fields({"parallel": {"tp": 1, "pp": 2}}, {"parallel.tp": 8})
        {'parallel': {'tp': 8, 'pp': 2}}
    """
    merged = data
    for dotted, value in assignments.items():
        patch: Any = value
        for part in reversed(dotted.split(".")):
            patch = {part: patch}
        merged = deep_merge(merged, patch)
    return merged
