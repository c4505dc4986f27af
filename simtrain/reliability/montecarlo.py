"""Monte Carlo repetitions of the whole-run model and their summary with 95 % intervals."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from simtrain.reliability.run import RunParams, RunResult, simulate_run

_Z95 = 1.959964  # two-sided 95 % quantile of the normal distribution


def monte_carlo(params: RunParams, num_runs: int, seed: int) -> list[RunResult]:
    """Simulate ``num_runs`` independent runs from one generator seeded with ``seed``.

    Each run gets its own child stream (``Generator.spawn``), so run i sees the same failures
    whatever the policy: policies compared with one seed use common random numbers.
    """
    rng = np.random.default_rng(seed)
    return [simulate_run(params, child) for child in rng.spawn(num_runs)]


def mean_ci95(values: list[float]) -> tuple[float, tuple[float, float]]:
    """Mean and normal-approximation 95 % confidence interval of the mean.

    Examples:
        >>> mean_ci95([1.0, 1.0])
        (1.0, (1.0, 1.0))
    """
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, (mean, mean)
    half = _Z95 * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return mean, (mean - half, mean + half)


@dataclass(frozen=True)
class RunSummary:
    """Averages over Monte Carlo runs of one policy."""

    num_runs: int
    ettr_mean: float
    ettr_ci95: tuple[float, float]
    wall_days_mean: float
    interruptions_mean: float
    interruptions_by_cause: dict[str, float]
    planned_interruptions_mean: float
    gpu_hours_lost_mean: float
    gpu_hours_lost_by_cause: dict[str, float]
    checkpoint_overhead_fraction: float
    """Mean share of wall time spent stalled on checkpoints."""
    finished_fraction: float
    """Share of runs that reached their target (the others gave up, see ``max_wall_s``)."""


def summarize(results: list[RunResult], num_gpus: int) -> RunSummary:
    """Average ``results``; GPU-hours lost count every GPU of the job for each lost second."""
    n = len(results)
    ettr_mean, ettr_ci = mean_ci95([r.ettr for r in results])
    causes: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    for r in results:
        causes.update(r.interruptions)
        lost.update({k: v for k, v in r.lost_s.items() if v > 0})
    gpu_hours = {k: v * num_gpus / 3600.0 / n for k, v in sorted(lost.items())}
    return RunSummary(
        num_runs=n,
        ettr_mean=ettr_mean,
        ettr_ci95=ettr_ci,
        wall_days_mean=float(np.mean([r.wall_s for r in results])) / 86400.0,
        interruptions_mean=sum(causes.values()) / n,
        interruptions_by_cause={k: v / n for k, v in sorted(causes.items())},
        planned_interruptions_mean=float(np.mean([r.planned_interruptions for r in results])),
        gpu_hours_lost_mean=sum(gpu_hours.values()),
        gpu_hours_lost_by_cause=gpu_hours,
        checkpoint_overhead_fraction=float(
            np.mean([r.lost_s["checkpoint"] / r.wall_s if r.wall_s else 0.0 for r in results])
        ),
        finished_fraction=sum(r.finished for r in results) / n,
    )
