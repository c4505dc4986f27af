"""Rank speed factors for one step: the spread of speeds and fail-slow stragglers.

Every compute task of a rank is multiplied by the rank's factor for the step (the network is
unaffected). A factor is lognormal with mean 1 and coefficient of variation
``rank_speed_cv``; with probability ``straggler_probability`` the rank is a straggler and its
factor is multiplied by ``straggler_slowdown``.

Under symmetry reduction a simulated rank stands for W ranks (``Program.weights``) that all
synchronise with it (tensor-parallel collectives every layer, the data-parallel reduction at
the end of the step), so it must run at the pace of the slowest of them: its factor is drawn
as the maximum of W factors, exactly, by inverting the distribution of the maximum (if U is
uniform, F⁻¹(U^(1/W)) is distributed as the largest of W draws; ``docs/references/
variability.md`` §2). In full mode every rank has W = 1 and draws its own factor, so both
modes see the same slowest rank in distribution.

All draws come, in rank order, from the one ``numpy.random.Generator`` seeded by the
experiment's ``seed``: the same seed gives the same factors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist

import numpy as np

from simtrain.specs.variability import VariabilitySpec

_NORMAL = NormalDist()
_BELOW_ONE = math.nextafter(1.0, 0.0)


def max_lognormal(count: int, sigma: float, u: float) -> float:
    """The ``u``-quantile of the largest of ``count`` mean-one lognormal draws (0 if none).

    Examples:
        >>> max_lognormal(1, 0.0, 0.3), max_lognormal(0, 0.1, 0.3)
        (1.0, 0.0)
        >>> round(max_lognormal(1, 0.1, 0.5), 4)  # the median of one draw: exp(-sigma^2 / 2)
        0.995
    """
    if count == 0:
        return 0.0
    if sigma == 0:
        return 1.0
    quantile = min(math.exp(math.log(u) / count), _BELOW_ONE)
    return math.exp(-sigma * sigma / 2 + sigma * _NORMAL.inv_cdf(quantile))


def speed_factors(
    weights: Mapping[int, int], spec: VariabilitySpec, rng: np.random.Generator
) -> dict[int, float]:
    """Compute-time factor of every simulated rank for one step (module docstring).

    Each rank consumes the same three draws whatever they yield (a straggler count and two
    uniforms), so factors of one rank do not depend on another's branch.
    """
    sigma = math.sqrt(math.log1p(spec.rank_speed_cv**2))
    factors = {}
    for rank in sorted(weights):
        count = weights[rank]
        slow = int(rng.binomial(count, spec.straggler_probability))
        u_fast, u_slow = 1.0 - rng.random(2)
        fast = max_lognormal(count - slow, sigma, float(u_fast))
        slowest = spec.straggler_slowdown * max_lognormal(slow, sigma, float(u_slow))
        factors[rank] = max(fast, slowest)
    return factors


def median_slowest_factor(num_ranks: int, spec: VariabilitySpec) -> float:
    """The median factor of the slowest of ``num_ranks`` ranks: the pace of a step they share.

    Each rank's factor is lognormal (mean 1, ``rank_speed_cv``), times ``straggler_slowdown``
    with probability ``straggler_probability``; the slowest of N independent ranks is at or
    below x with probability F(x)^N, so its median solves F(x) = 0.5^(1/N) (the analytical
    estimator paces a step by it, where the engine draws one step's factors).

    Examples:
        >>> from simtrain.specs.variability import VariabilitySpec
        >>> round(median_slowest_factor(64, VariabilitySpec(rank_speed_cv=0.02)), 4)
        1.0468
    """
    if not spec.active or num_ranks <= 0:
        return 1.0
    p, slowdown = spec.straggler_probability, spec.straggler_slowdown
    target = 0.5 ** (1 / num_ranks)
    sigma = math.sqrt(math.log1p(spec.rank_speed_cv**2))
    if sigma == 0:
        return 1.0 if 1 - p >= target else slowdown

    def below(log_x: float) -> float:  # probability one rank's factor is at most exp(log_x)
        fast = _NORMAL.cdf((log_x + sigma * sigma / 2) / sigma)
        slow = _NORMAL.cdf((log_x - math.log(slowdown) + sigma * sigma / 2) / sigma)
        return (1 - p) * fast + p * slow

    low, high = -10 * sigma, math.log(slowdown) + 10 * sigma
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if below(mid) < target else (low, mid)
    return math.exp((low + high) / 2)
