"""Measured scaling series: simtrain's throughput per GPU falls at least as much as measured.

The series are those of ``experiments/calibration/scaling.py`` that keep the per-GPU work
fixed while the GPU count grows (LLM Foundry H100 FSDP 128 -> 512; FORGE on Frontier MI250X),
so a perfectly scaling job keeps its throughput per GPU. Issue 15 asks that simtrain lose at
least the measured share. Each series is compared at every GPU count by its throughput
relative to the smallest count (free of the compute calibration's absolute error), with a
tolerance of half a point for the seeded rank speeds and the sources' rounding.

Only FORGE-S meets it today (MPT-13B does at 512 GPUs since Hopper's persistent GEMMs are
modelled, not at 256). The others are strict expected failures that name the gap
(README "Scaling"): when a modelled mechanism closes one, its test starts passing, fails as
an unexpected pass, and the series moves to ``CLAIMED`` (and the README table is updated).
Megatron-LM 2021 (the model grows with the GPUs) and Llama 3 (one point) are not weak-scaling
series and are left out. The LLM Foundry rows are read from the reference data (outside the
repository); without it the module is skipped.
"""

from __future__ import annotations

import itertools
from functools import cache

import pytest

from experiments.calibration.reference import has_reference
from experiments.calibration.scaling import Point, series_points, simulated
from experiments.calibration.stacks import SOURCE_FILE

if not has_reference(SOURCE_FILE):
    pytest.skip("no shared/reference data beside this checkout", allow_module_level=True)

TOLERANCE = 0.005
"""Half a point of throughput relative to the smallest count (seeded spread, rounding)."""
REPEAT = 8
"""Seeded steps per point, as ``scaling.py`` reports them."""

CLAIMED = ("FORGE MI250X forge-s",)
"""Series whose measured decline simtrain reproduces (within ``TOLERANCE``)."""
GAPS = {
    "llm-foundry H100 mpt-1b": "falls 6.8 points where 9.7 are measured",
    "llm-foundry H100 mpt-3b": "falls 5.6 points where 7.5 are measured",
    "llm-foundry H100 mpt-7b": "falls 3.7 points where 7.7 are measured",
    "llm-foundry H100 mpt-13b": "falls 0.9 points at 256 GPUs where 1.8 are measured",
    "llm-foundry H100 mpt-30b": "falls 2.4 points where 3.8 are measured (fit series)",
    "llm-foundry H100 mpt-70b": "falls 2.2 points where 4.8 are measured (fit series)",
    "FORGE MI250X forge-m": "falls 3.9 points where 30.3 are measured",
    "FORGE MI250X forge-l": "falls 0.4 points where 6.5 are measured",
    "FORGE MI250X gpt-175b": "falls 0.7 points where 6.3 are measured",
}
"""Series simtrain does not yet reproduce, with the gap at the largest count."""


@cache
def weak_scaling_series() -> dict[str, tuple[Point, ...]]:
    """Points of every fixed-per-GPU-work series, by series, in GPU order."""
    points = [p for p in series_points() if p.series.startswith(("llm-foundry", "FORGE"))]
    return {s: tuple(g) for s, g in itertools.groupby(points, key=lambda p: p.series)}


@cache
def scaling(series: str) -> tuple[tuple[int, float, float], ...]:
    """(GPUs, measured, simulated) throughput per GPU relative to the smallest count."""
    points = weak_scaling_series()[series]
    sims = [simulated(p, None, REPEAT) for p in points]
    return tuple(
        (p.gpus, p.measured / points[0].measured, sim / sims[0])
        for p, sim in zip(points, sims, strict=True)
    )


def test_every_series_is_claimed_or_has_a_named_gap():
    assert sorted(weak_scaling_series()) == sorted((*CLAIMED, *GAPS))


@pytest.mark.parametrize(
    "series",
    [
        *CLAIMED,
        *(
            pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=gap))
            for s, gap in GAPS.items()
        ),
    ],
)
def test_throughput_per_gpu_falls_at_least_as_much_as_measured(series):
    for gpus, measured, sim in scaling(series):
        assert sim <= measured + TOLERANCE, (
            f"{series} at {gpus} GPUs keeps {sim:.3f} of its throughput per GPU; "
            f"measured {measured:.3f}"
        )


@pytest.mark.parametrize("series", [*CLAIMED, *GAPS])
def test_simulated_throughput_per_gpu_falls_with_every_step_in_gpu_count(series):
    sims = [sim for _, _, sim in scaling(series)]
    assert all(b < a for a, b in itertools.pairwise(sims)), sims
