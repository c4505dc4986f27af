"""VariabilitySpec: how ranks' speeds vary within a step (spread and fail-slow stragglers).

A synchronous step waits for its slowest rank, so the spread of rank speeds costs more as
the job grows (the expected maximum of N draws grows like sqrt(2 ln N) standard deviations).
The facts behind the defaults are in ``docs/references/variability.md``.
"""

from __future__ import annotations

from simtrain.specs.base import Spec, bounded

GREYHOUND_FAIL_SLOW_TIME_SHARE = 0.02
"""Share of time a job runs with a compute fail-slow (GREYHOUND, variability.md §1.1)."""
GREYHOUND_CLUSTER_GPUS = 10_000
"""GPUs of the cluster GREYHOUND observed ("more than 10,000", variability.md §1.1)."""


RANK_SPEED_CV = 0.02
"""Fitted by ``PYTHONPATH=. python experiments/calibration/scaling.py --fit`` (2026-12-01) on
the normalised LLM Foundry H100 70B and 30B series, 128 -> 512 GPUs, over a grid bounded by
Llama 3's documented 1-2 % throughput variation; the fit reached the bound (the series fall
more with scale than any documented spread of rank speeds explains). Held out: the other
LLM Foundry series, Megatron-LM 2021 weak scaling and Llama 3 405B."""


class VariabilitySpec(Spec):
    """Per-rank speed variation within one step; drawn from the experiment's seed."""

    rank_speed_cv: float = bounded(
        RANK_SPEED_CV, ge=0.0, le=0.5, why="a 50% spread of rank speeds is a broken cluster"
    )
    """Coefficient of variation of a rank's compute time in one step: every compute task of
    the rank is multiplied by one lognormal factor of mean 1 drawn per rank and step.
    Default: fitted on the scaling of LLM Foundry's 70B and 30B series (128 to 512 H100), at
    the bound of the documented 1-2 % spread (docs/references/variability.md §1.2;
    ``experiments/calibration/scaling.py --fit``)."""
    straggler_probability: float = bounded(
        1 - (1 - GREYHOUND_FAIL_SLOW_TIME_SHARE) ** (1 / GREYHOUND_CLUSTER_GPUS),
        ge=0.0,
        le=1.0,
        why="a probability",
    )
    """Probability that a rank is a fail-slow straggler in a step. Default: GREYHOUND's
    compute fail-slows, present under 2 % of the time on a cluster of about 10,000 GPUs:
    1 - 0.98^(1/10,000) = 2.0e-6 per GPU and step (docs/references/variability.md §1.1)."""
    straggler_slowdown: float = bounded(
        1.34, ge=1.0, le=10.0, why="a rank 10x slower has failed, not slowed"
    )
    """Factor on a straggler's compute time. Default: GREYHOUND's 1.34x job-completion delay
    under a fail-slow, a lower bound of the slowdown while slow (variability.md §1.1)."""

    @property
    def active(self) -> bool:
        """Whether any rank can run at other than its nominal speed."""
        return self.rank_speed_cv > 0 or (
            self.straggler_probability > 0 and self.straggler_slowdown > 1
        )
