"""How many hot spare nodes a job keeps: a count, a fraction, or a default scaled to the job.

The default holds enough spares that, with 99.9 % probability, no failed node waits for one:
nodes fail (the failures that take a node away) at a job-wide rate λ and come back after
the repair time R, so the nodes under repair at any moment are Poisson with mean λ·R
(an M/G/∞ queue); the default is the 99.9th percentile of that count. 99.9 % is the
availability NCSA Delta sized its spares for (``docs/references/reliability.md`` §8.2). A
job on one node with a few failures a year keeps none; Llama 3's 2,048 nodes keep a few.
"""

from __future__ import annotations

import math

from simtrain.errors import SpecError
from simtrain.reliability.failures import job_sources
from simtrain.specs.reliability import ReliabilitySpec

SPARE_AVAILABILITY = 0.999
"""Probability that a failed node finds a spare (NCSA Delta's sizing target)."""


def default_spare_nodes(reliability: ReliabilitySpec, num_gpus: int, gpus_per_node: int) -> int:
    """Spare nodes of a job by default: the 99.9th percentile of nodes under repair at once.

    Examples:
        >>> rel = ReliabilitySpec(failure_preset="llama3-405b")
        >>> default_spare_nodes(rel, 8, 8), default_spare_nodes(rel, 16384, 8)
        (0, 4)
    """
    sources = job_sources(reliability, num_gpus, gpus_per_node)
    rate_per_s = sum(s.rate_per_s for s in sources if s.loses_node)
    mean = rate_per_s * reliability.repair_time_hours * 3600.0
    # smallest k with P(N <= k) >= target for N ~ Poisson(mean)
    term = cumulative = math.exp(-mean)
    k = 0
    while cumulative < SPARE_AVAILABILITY:
        k += 1
        term *= mean / k
        cumulative += term
    return k


def spare_nodes(
    setting: str | int | None, reliability: ReliabilitySpec, num_gpus: int, gpus_per_node: int
) -> int:
    """Spare nodes for a job from a user setting.

    Args:
        setting: a count of nodes (``4``, ``"4"``), a percentage of the job's nodes
            (``"2%"``, rounded up to whole nodes), or ``None``/``"auto"`` for
            :func:`default_spare_nodes`.
        reliability: failure rates and repair time (for the default).
        num_gpus: GPUs of the job.
        gpus_per_node: GPUs per node.

    Raises:
        SpecError: a setting that is neither a count, a percentage nor ``auto``.

    Examples:
        >>> rel = ReliabilitySpec(failure_preset="llama3-405b")
        >>> spare_nodes("2%", rel, 16384, 8), spare_nodes(3, rel, 64, 8)
        (41, 3)
    """
    if setting is None or setting == "auto":
        return default_spare_nodes(reliability, num_gpus, gpus_per_node)
    text = str(setting).strip()
    try:
        if text.endswith("%"):
            fraction = float(text[:-1]) / 100.0
            if not 0 <= fraction <= 1:
                raise ValueError
            return math.ceil(fraction * math.ceil(num_gpus / gpus_per_node) - 1e-9)
        count = int(text)
        if count < 0:
            raise ValueError
        return count
    except ValueError:
        raise SpecError(
            f"'--spares' must be a node count (4), a percentage of the job's nodes (2%) or "
            f"auto (got {setting!r})"
        ) from None
