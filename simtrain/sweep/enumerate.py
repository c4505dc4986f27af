"""Lazy enumeration of a sweep's configurations, with the cheap feasibility filter.

The configurations are ``itertools.product`` over *groups*: each axis is a group of
one-field assignments, each zip group a list of several-field assignments. A point (one
assignment per group) is resolved into an :class:`ExperimentSpec` by setting its fields on the
base mapping; the result is a :class:`Candidate` whose ``status`` is ``"pending"`` (to be
evaluated), ``"invalid"`` (the spec's own cross-field rules reject it: degrees that do not
divide, a batch that does not split, ...) or ``"constraint"`` (a sweep constraint rejects it).
Memory pruning happens in the evaluation task (:mod:`simtrain.sweep.evaluate`), in parallel,
because the exact analytical estimate walks every pipeline stage's schedule.

Everything here is pure: no I/O, no processes.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from simtrain.errors import SpecError
from simtrain.limits import MAX_CONFIGS, check_configs
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import experiment_from_dict
from simtrain.specs.sweep import SweepSpec, check_field, with_fields
from simtrain.sweep.constraints import dotted_names, evaluate_constraint, parse_constraint

Assignment = dict[str, Any]


@dataclass(frozen=True)
class Candidate:
    """One configuration of a sweep after the cheap checks.

    Attributes:
        index: position in enumeration order (rows of the result table keep this order).
        point: the swept field values.
        status: ``pending`` (evaluate it), ``invalid`` or ``constraint`` (pruned).
        reason: why it was pruned ("" when pending).
        spec: the resolved experiment (None when invalid).
        key: hash of the resolved spec and the simtrain version (None when invalid).
    """

    index: int
    point: Assignment
    status: str
    reason: str = ""
    spec: ExperimentSpec | None = None
    key: str | None = None


def config_key(spec: ExperimentSpec, version: str) -> str:
    """Store key of a configuration: SHA-256 of the resolved spec's JSON and the version.

    Two points that resolve to the same experiment share a key and are simulated once.
    """
    text = json.dumps(spec.model_dump(mode="json"), sort_keys=True) + "|" + version
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def sweep_groups(sweep: SweepSpec, base: dict[str, Any]) -> list[list[Assignment]]:
    """Assignments of each product factor: one group per axis, one per zip group.

    Raises:
        SpecError: a zip group whose value lists differ in length, or an empty axis.
    """
    groups = [
        [{field: v} for v in _values(values, base, f"axes.{field}")]
        for field, values in sweep.axes.items()
    ]
    for i, group in enumerate(sweep.zip):
        columns = {f: _values(v, base, f"zip.{i}.{f}") for f, v in group.items()}
        lengths = {f: len(v) for f, v in columns.items()}
        if len(set(lengths.values())) > 1:
            raise SpecError(f"'zip.{i}' value lists must have equal lengths (got {lengths})")
        groups.append(
            [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]
        )
    return groups


def _values(values: Any, base: dict[str, Any], where: str) -> list[Any]:
    listed = values if isinstance(values, list) else values.values(base)
    if not listed:
        raise SpecError(f"'{where}' must have at least one value (got none)")
    return listed


def count_configurations(sweep: SweepSpec, base: dict[str, Any]) -> int:
    """Configurations the sweep spans, counted without listing any axis (ranges in O(1)).

    Examples:
        >>> from simtrain.specs.sweep import SweepSpec
        >>> axes = {"parallel.tp": [1, 2], "parallel.pp": {"range": [1, 10**9]}}
        >>> sweep = SweepSpec(base={}, axes=axes)
        >>> count_configurations(sweep, {})
        2000000000
    """

    def size(values: Any) -> int:
        return len(values) if isinstance(values, list) else values.count(base)

    axes = [size(v) for v in sweep.axes.values()]
    groups = [size(next(iter(group.values()))) for group in sweep.zip if group]
    return math.prod(axes + groups)


def count_points(groups: list[list[Assignment]]) -> int:
    """Configurations the groups span (their product), without enumerating them."""
    return math.prod(len(g) for g in groups)


def iter_points(groups: list[list[Assignment]]) -> Iterator[Assignment]:
    """Each configuration's assignments, lazily, in ``itertools.product`` order."""
    for combo in itertools.product(*groups):
        yield {field: value for assignment in combo for field, value in assignment.items()}


def parse_constraints(sweep: SweepSpec) -> list[tuple[str, ast.Expression]]:
    """Parse and name-check every constraint before anything runs.

    Raises:
        SpecError: bad syntax or an unknown field.
    """
    parsed = []
    for i, text in enumerate(sweep.constraints):
        where = f"constraints.{i}"
        tree = parse_constraint(text, where)
        for name in dotted_names(tree):
            check_field(name, where, properties=True)
        parsed.append((text, tree))
    return parsed


def resolve(
    index: int,
    point: Assignment,
    base: dict[str, Any],
    constraints: list[tuple[str, ast.Expression]],
    version: str,
) -> Candidate:
    """Resolve one point into a candidate: validated, constraint-checked and keyed."""
    try:
        # A sweep crosses settings on purpose (sp with tp=1, ...): no-effect warnings are noise.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = experiment_from_dict(with_fields(base, point))
    except SpecError as exc:
        return Candidate(index, point, "invalid", str(exc))
    key = config_key(spec, version)
    for i, (text, tree) in enumerate(constraints):
        if not evaluate_constraint(tree, spec, f"constraints.{i}", text):
            return Candidate(index, point, "constraint", f"violates {text!r}", spec, key)
    return Candidate(index, point, "pending", "", spec, key)


def never_valid(seen: Iterable[Candidate]) -> list[str]:
    """One message per swept value that no configuration accepted, with the first reason.

    A sweep prunes invalid combinations on purpose, but a value that is invalid in every
    combination is most likely a typo (``training.framework: torchtitan-2026``) or a value
    the base rules out, and its rows alone would only say ``invalid``.

    Examples:
        >>> seen = [Candidate(0, {"parallel.tp": 2}, "pending"),
        ...         Candidate(1, {"parallel.tp": 3}, "invalid", "3 must divide 32")]
        >>> never_valid(seen)
        ['no valid configuration has parallel.tp=3 (the first reason: 3 must divide 32)']
    """
    valid: set[tuple[str, str]] = set()
    first: dict[tuple[str, str], str] = {}
    for cand in seen:
        for name, value in cand.point.items():
            key = (name, str(value))
            if cand.status == "invalid":
                first.setdefault(key, cand.reason)
            else:
                valid.add(key)
    return [
        f"no valid configuration has {name}={value} (the first reason: {reason})"
        for (name, value), reason in first.items()
        if (name, value) not in valid
    ]


def candidates(
    sweep: SweepSpec, base: dict[str, Any], version: str, max_configs: int = MAX_CONFIGS
) -> Iterator[Candidate]:
    """Every configuration of the sweep, lazily, with the cheap feasibility verdicts.

    Raises:
        SpecError: the sweep is empty, an axis has no value, a constraint is malformed, or
            the sweep spans more than ``max_configs`` configurations.
    """
    if not sweep.axes and not sweep.zip:
        raise SpecError("the sweep is empty: 'axes' or 'zip' must name at least one field")
    check_configs(count_configurations(sweep, base), max_configs)
    groups = sweep_groups(sweep, base)
    constraints = parse_constraints(sweep)
    # checks above run at the call; the configurations below are produced on demand
    return (
        resolve(index, point, base, constraints, version)
        for index, point in enumerate(iter_points(groups))
    )
