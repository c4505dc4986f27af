"""simtrain.reliability layer (see DESIGN.md): failures, checkpoints and recovery over a run.

Entry points: :func:`reliability_summary` (``simtrain run`` with a ``reliability`` section),
:func:`compare_policies` (``simtrain reliability``), and the plain-number core
:func:`simulate_run` / :func:`monte_carlo` with the closed forms it is tested against.
"""

from __future__ import annotations

from simtrain.reliability.closed_form import (
    daly_interval_s,
    meta_expected_ettr,
    mttf_hours,
    young_interval_s,
)
from simtrain.reliability.montecarlo import monte_carlo, summarize
from simtrain.reliability.policies import POLICIES, get_policy
from simtrain.reliability.run import RunParams, RunResult, simulate_run
from simtrain.reliability.summary import (
    JSON_KEYS,
    compare_policies,
    reliability_summary,
    run_params,
)

__all__ = [
    "JSON_KEYS",
    "POLICIES",
    "RunParams",
    "RunResult",
    "compare_policies",
    "daly_interval_s",
    "get_policy",
    "meta_expected_ettr",
    "monte_carlo",
    "mttf_hours",
    "reliability_summary",
    "run_params",
    "simulate_run",
    "summarize",
    "young_interval_s",
]
