"""Every number a user can write has a documented physical range (simtrain/specs/base.py).

This test walks every spec class and fails for a numeric field without an upper bound and a
reason, so a field added later cannot slip in unbounded (the hostile corpus then sends it
``.inf``, ``.nan`` and ``1e300`` automatically).
"""

from __future__ import annotations

import importlib
import pkgutil
import typing

import pytest

import simtrain.specs
from simtrain.specs.base import Spec, bounded, field_range

for module in pkgutil.iter_modules(simtrain.specs.__path__):
    importlib.import_module(f"simtrain.specs.{module.name}")


def _spec_classes() -> list[type[Spec]]:
    found, todo = [], [Spec]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("simtrain."):
                found.append(sub)
            todo.append(sub)
    return sorted(set(found), key=lambda c: f"{c.__module__}.{c.__name__}")


def _leaf_types(annotation: typing.Any) -> list[typing.Any]:
    if typing.get_origin(annotation) is typing.Annotated:
        return _leaf_types(typing.get_args(annotation)[0])
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict:
        return []  # catalog tables such as peak FLOP/s per dtype
    return [t for a in args for t in _leaf_types(a)] if args else [annotation]


NUMERIC_FIELDS = [
    (cls, name, info)
    for cls in _spec_classes()
    for name, info in cls.model_fields.items()
    if {int, float} & set(_leaf_types(info.annotation))
    and typing.get_origin(info.annotation) is not tuple
]
# Numbers whose range a validator checks instead of Field bounds (with the same message shape).
CHECKED_BY_VALIDATORS = {
    ("_CheckpointBase", "interval_s"),
    ("SyncCheckpointSpec", "interval_s"),
    ("SnapshotCheckpointSpec", "interval_s"),
    ("InMemoryCheckpointSpec", "interval_s"),
    ("DivisorsAxis", "divisors_of"),
    ("RangeAxis", "range"),
}


def test_the_walk_finds_the_fields():
    names = {(c.__name__, n) for c, n, _ in NUMERIC_FIELDS}
    assert ("ClusterSpec", "num_gpus") in names and ("ModelSpec", "num_layers") in names
    assert len(NUMERIC_FIELDS) > 60


@pytest.mark.parametrize(
    ("cls", "name", "info"),
    NUMERIC_FIELDS,
    ids=[f"{c.__name__}.{n}" for c, n, _ in NUMERIC_FIELDS],
)
def test_every_numeric_field_has_an_upper_bound_and_a_reason(cls, name, info):
    if (cls.__name__, name) in CHECKED_BY_VALIDATORS:
        return
    span, why = field_range(info)
    assert "<" in span or ".." in span, f"{cls.__name__}.{name} has no upper bound: use bounded()"
    assert why, f"{cls.__name__}.{name} has no reason for its range: bounded(..., why=...)"


def test_numbers_are_finite_everywhere():
    class Demo(Spec):
        x: float = 1.0

    with pytest.raises(ValueError, match="finite"):
        Demo(x=float("inf"))


def test_bounded_field_error_quotes_the_range_and_the_reason():
    from pydantic import ValidationError

    from simtrain.specs.loader import format_validation_error

    class Demo(Spec):
        n: int = bounded(1, ge=1, le=8, why="eight is plenty")

    with pytest.raises(ValidationError) as caught:
        Demo(n=9)
    line = format_validation_error(caught.value, "demo.yaml", Demo)
    assert line == "demo.yaml: 'n' must be an integer in 1..8 (got 9): eight is plenty"
