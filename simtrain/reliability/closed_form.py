"""Closed forms of the reliability layer: MTTF, Meta's expected ETTR, Young/Daly intervals.

They are the theory the whole-run simulation is tested against, and give the checkpoint
interval of the ``young_daly`` setting. Formulas from docs/references/reliability.md §8.1 and §8.3.
"""

from __future__ import annotations

import math


def mttf_hours(num_nodes: int, rate_per_node_day: float) -> float:
    """Mean time to failure of a job on ``num_nodes`` nodes: (N_nodes · r_f)⁻¹ in hours.

    Meta's model (Kokolis et al. 2024) treats the nodes as a series system.

    Examples:
        >>> round(mttf_hours(2048, 6.50e-3), 2)  # RSC-1 rate, 16,384 GPUs
        1.8
    """
    return 24.0 / (num_nodes * rate_per_node_day)


def meta_expected_ettr(
    failures_per_s: float, restart_s: float, interval_s: float, checkpoint_stall_s: float
) -> float:
    """Meta's approximation E[ETTR] ≈ (1 − N·r·(u₀ + Δt/2)) / (1 + w/Δt).

    Args:
        failures_per_s: job failure rate N_nodes · r_f, per second.
        restart_s: u₀, the time from a failure to training again (detection, restart, load).
        interval_s: Δt, training time between checkpoints.
        checkpoint_stall_s: w, time training stalls per checkpoint.

    Valid while failures are rare against the interval and restart (N·r·(u₀ + Δt) ≪ 1); the paper
    states ≈5 % accuracy against Monte Carlo. Clamped at 0.

    Examples:
        >>> round(meta_expected_ettr(1 / 36000, 600, 1800, 60), 4)
        0.9274
    """
    productive = 1.0 - failures_per_s * (restart_s + interval_s / 2.0)
    return max(0.0, productive / (1.0 + checkpoint_stall_s / interval_s))


def young_interval_s(checkpoint_stall_s: float, mtbf_s: float) -> float:
    """Young's (1974) optimal checkpoint interval sqrt(2 · δ · M).

    Equal to Meta's Δt* = sqrt(2 · w / (N_nodes · r_f)) with M = 1 / (N_nodes · r_f).

    Examples:
        >>> round(young_interval_s(60, 10800), 1)
        1138.4
    """
    return math.sqrt(2.0 * checkpoint_stall_s * mtbf_s)


def daly_interval_s(checkpoint_stall_s: float, mtbf_s: float) -> float:
    """Daly's (2006) first-order optimal interval sqrt(2 · δ · M) − δ, at least δ.

    Examples:
        >>> round(daly_interval_s(60, 10800), 1)
        1078.4
    """
    return max(
        checkpoint_stall_s, young_interval_s(checkpoint_stall_s, mtbf_s) - checkpoint_stall_s
    )
