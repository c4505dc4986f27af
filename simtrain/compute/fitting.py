"""Small numerical helpers for fitting calibration constants (no SciPy needed).

Calibration fits have a handful of parameters and a cheap objective, so a derivative-free
Nelder-Mead simplex in a transformed space is enough; the transforms keep each parameter in
its physical range (efficiencies in (0, 1), lengths and costs non-negative). A fit of one
constant uses a golden-section search on its interval.

Examples:
    >>> x = nelder_mead(lambda p: (p[0] - 3.0) ** 2 + (p[1] + 1.0) ** 2, [0.0, 0.0])
    >>> [round(float(v), 3) for v in x]
    [3.0, -1.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def nelder_mead(
    objective: Callable[[np.ndarray], float],
    start: Sequence[float],
    step: float = 0.5,
    max_iter: int = 4000,
    tolerance: float = 1e-12,
) -> np.ndarray:
    """Minimise ``objective`` from ``start`` with the Nelder-Mead simplex method.

    The first simplex steps every coordinate by ``step`` (absolute: parameters are meant to
    live in a transformed space, logit or log, where one unit is a comparable change).
    """
    dim = len(start)
    simplex = [np.asarray(start, dtype=float)]
    for i in range(dim):
        point = simplex[0].copy()
        point[i] += step
        simplex.append(point)
    values = [objective(p) for p in simplex]
    for _ in range(max_iter):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) <= tolerance:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflected = centroid + (centroid - worst)
        f_reflected = objective(reflected)
        if f_reflected < values[0]:
            expanded = centroid + 2.0 * (centroid - worst)
            f_expanded = objective(expanded)
            if f_expanded < f_reflected:
                simplex[-1], values[-1] = expanded, f_expanded
            else:
                simplex[-1], values[-1] = reflected, f_reflected
        elif f_reflected < values[-2]:
            simplex[-1], values[-1] = reflected, f_reflected
        else:
            contracted = centroid + 0.5 * (worst - centroid)
            f_contracted = objective(contracted)
            if f_contracted < values[-1]:
                simplex[-1], values[-1] = contracted, f_contracted
            else:
                best = simplex[0]
                simplex = [best + 0.5 * (p - best) for p in simplex]
                values = [values[0], *(objective(p) for p in simplex[1:])]
    return simplex[int(np.argmin(values))]


def golden_section(
    loss: Callable[[float], float], low: float, high: float, tolerance: float
) -> float:
    """The point of lowest ``loss`` found on [low, high] by golden-section search.

    ``loss`` is taken as unimodal; the search stops once the bracket is narrower than
    ``tolerance``, and each point is evaluated once (fits print every evaluation).

    Examples:
        >>> round(golden_section(lambda x: (x - 0.7) ** 2, 0.0, 1.0, 1e-4), 3)
        0.7
    """
    cache: dict[float, float] = {}

    def value(x: float) -> float:
        if x not in cache:
            cache[x] = loss(x)
        return cache[x]

    ratio = (math.sqrt(5) - 1) / 2
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    while high - low > tolerance:
        if value(a) < value(b):
            high, b = b, a
            a = high - ratio * (high - low)
        else:
            low, a = a, b
            b = low + ratio * (high - low)
    return min(cache, key=cache.__getitem__)


def to_unit(x: float) -> float:
    """Map a real number to (0, 1) (logistic), for efficiencies."""
    return 1.0 / (1.0 + math.exp(-x))


def from_unit(p: float) -> float:
    """Inverse of :func:`to_unit`."""
    return math.log(p / (1.0 - p))


def rms_log_error(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Root mean square of log(predicted / measured)."""
    logs = np.log(np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float))
    return float(np.sqrt(np.mean(logs**2)))
