"""The whole-run simulation against Meta's E[ETTR] and the Young/Daly optimum."""

import math

import numpy as np
import pytest
from reliability_helpers import restart_params

from simtrain.reliability import meta_expected_ettr, monte_carlo, young_interval_s

DAY_S = 86400.0

# (nodes, failures per node-day r_f, checkpoint interval Δt s, stall w s, restart u₀ s).
# r_f: RSC-1 6.50e-3 and RSC-2 2.34e-3 per node-day (docs/references/reliability.md §8.1).
GRID = [
    (nodes, rate, interval, stall, restart)
    for nodes in (128, 512, 2048)
    for rate in (2.34e-3, 6.50e-3)
    for interval in (600.0, 1800.0, 3600.0)
    for stall, restart in ((10.0, 300.0), (60.0, 900.0))
]


def _valid(nodes: int, rate: float, interval: float, restart: float) -> bool:
    """Meta's form is first order in N·r: keep cases where a failure is rare per cycle."""
    failures_per_s = nodes * rate / DAY_S
    return failures_per_s * (restart + interval) <= 0.25


VALID = [case for case in GRID if _valid(case[0], case[1], case[2], case[4])]


def test_grid_covers_small_and_large_jobs():
    assert {case[0] for case in VALID} == {128, 512, 2048}
    assert len(VALID) >= 20


@pytest.mark.parametrize(("nodes", "rate", "interval", "stall", "restart"), VALID)
def test_simulated_ettr_matches_meta_closed_form(nodes, rate, interval, stall, restart):
    failures_per_s = nodes * rate / DAY_S
    # long enough for ≈400 failures in total, so the Monte Carlo error is well below 0.02
    total_work_s = 100.0 / failures_per_s
    params = restart_params(failures_per_s, interval, stall, restart, total_work_s)
    simulated = np.mean([r.ettr for r in monte_carlo(params, num_runs=4, seed=1)])
    expected = meta_expected_ettr(failures_per_s, restart, interval, stall)
    assert simulated == pytest.approx(expected, abs=0.02)


def test_ettr_maximising_interval_is_young_daly():
    mtbf_s, stall_s, restart_s = 3 * 3600.0, 20.0, 120.0
    young = young_interval_s(stall_s, mtbf_s)  # sqrt(2 · 20 · 10800) = 657 s
    intervals = young * np.geomspace(0.4, 2.5, 9)
    ettr = []
    for interval in intervals:
        params = restart_params(1 / mtbf_s, interval, stall_s, restart_s, 1500 * mtbf_s)
        # same seed for every interval: common random numbers make the curve smooth
        ettr.append(monte_carlo(params, num_runs=1, seed=7)[0].ettr)
    # vertex of a parabola through ETTR against log(interval)
    a, b, _ = np.polyfit(np.log(intervals), ettr, 2)
    best = math.exp(-b / (2 * a))
    assert a < 0
    assert best == pytest.approx(young, rel=0.10)
    # Daly's first-order correction (−δ) and the restart term put the exact optimum ≈4 % below
    assert best < young
