"""Validation against published figures: run every experiment that has an ``expected:`` block."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from simtrain.api import simulate
from simtrain.specs.loader import load_experiment, load_yaml_tree


@dataclass(frozen=True)
class ValidationRow:
    """One experiment compared with its published figure."""

    case: str
    metric: str
    expected: float
    predicted: float
    rel_error: float
    tolerance: float
    within_tolerance: bool
    source: str
    note: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with the keys ``simtrain validate --json`` promises."""
        return asdict(self)


def validation_cases(directory: Path) -> list[Path]:
    """Experiment files under ``directory`` (recursively) that carry an ``expected:`` block."""
    return [
        path for path in sorted(directory.rglob("*.yaml")) if "expected" in load_yaml_tree(path)
    ]


def validate_case(path: Path) -> ValidationRow:
    """Simulate one experiment and compare the metric it names with the published value."""
    spec = load_experiment(path)
    expected = spec.expected
    assert expected is not None  # validation_cases only returns files with the block
    summary = simulate(spec).summary()
    predicted = float(summary[expected.metric])
    # A figure counted under another FLOP convention scales with that convention's model
    # FLOPs (the spec allows a convention only for model_tflops_per_gpu and mfu).
    per_token = summary["model_flops_per_token"]
    predicted *= per_token[expected.flops_convention] / per_token["simtrain"]
    rel_error = predicted / expected.value - 1
    return ValidationRow(
        case=spec.name,
        metric=expected.metric,
        expected=expected.value,
        predicted=predicted,
        rel_error=rel_error,
        tolerance=expected.tolerance,
        within_tolerance=abs(rel_error) <= expected.tolerance,
        source=expected.source,
        note=expected.note,
    )


def run_validation(
    directory: Path, progress: Callable[[], None] | None = None
) -> list[ValidationRow]:
    """Validate every case in ``directory``; ``progress`` is called after each case."""
    rows = []
    for path in validation_cases(directory):
        rows.append(validate_case(path))
        if progress is not None:
            progress()
    return rows
