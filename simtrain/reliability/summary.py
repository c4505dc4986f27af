"""From an experiment and one simulated step to whole-run reliability figures.

This is the layer's entry point for the CLI: :func:`run_params` turns an ``ExperimentSpec``
plus the step time and model-state size of ``simulate()`` into the plain numbers of
:class:`~simtrain.reliability.run.RunParams`; :func:`reliability_summary` (used by
``simtrain run``) and :func:`compare_policies` (``simtrain reliability``) run the Monte Carlo
and return JSON-ready dictionaries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from simtrain.catalog.prices import preset_price
from simtrain.errors import SpecError
from simtrain.limits import MAX_EVENTS, check_reliability
from simtrain.reliability.checkpoint import checkpoint_plan
from simtrain.reliability.closed_form import meta_expected_ettr
from simtrain.reliability.failures import job_mttf_s, job_sources
from simtrain.reliability.montecarlo import monte_carlo, summarize
from simtrain.reliability.policies import get_policy
from simtrain.reliability.recovery import recovery_plan
from simtrain.reliability.run import RunParams, StragglerSource
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.reliability import ReliabilitySpec, RestartRecoverySpec, WeibullInterArrival

_MAX_WALL_FACTOR = 20.0  # give up on a run at 20× its failure-free time (ETTR < 5 %)

JSON_KEYS = (
    "policy",
    "ettr_mean",
    "ettr_ci95",
    "wall_days_mean",
    "interruptions_mean",
    "interruptions_by_cause",
    "gpu_hours_lost_mean",
)
"""Keys of one policy in ``simtrain reliability --json`` (issue 6)."""


def run_params(
    spec: ExperimentSpec,
    reliability: ReliabilitySpec,
    step_time_s: float,
    model_state_bytes: float,
) -> RunParams:
    """Plain-number parameters of the whole-run model for an experiment.

    The run lasts ceil(total_tokens / tokens per step) steps, or until ``horizon_days``.

    Raises:
        SpecError: the run has neither a token target nor a horizon, or a bad step time.
    """
    if not step_time_s > 0:
        raise SpecError(f"'step_time_s' must be > 0 (got {step_time_s!r})")
    rel, clu, par = reliability, spec.cluster, spec.parallel
    horizon_s = rel.horizon_days * 86400.0 if rel.horizon_days else math.inf
    tokens_per_step = par.global_batch_size * spec.model.seq_length
    if spec.training.total_tokens > 0:
        total_work_s = math.ceil(spec.training.total_tokens / tokens_per_step) * step_time_s
    elif math.isfinite(horizon_s):
        total_work_s = horizon_s + step_time_s  # never reached: the horizon ends the run
    else:
        raise SpecError(
            "'training.total_tokens' must be > 0, or 'reliability.horizon_days' set, for a "
            "whole-run reliability simulation (got total_tokens=0 and no horizon)"
        )
    num_gpus, num_nodes = clu.num_gpus, clu.num_nodes
    sources = job_sources(rel, num_gpus, clu.gpus_per_node)
    ckpt_bytes = model_state_bytes * rel.checkpoint_fraction_of_model_state
    maint = rel.maintenance
    return RunParams(
        total_work_s=total_work_s,
        step_time_s=step_time_s,
        num_nodes=num_nodes,
        dp=par.dp or 1,
        sources=sources,
        checkpoint=checkpoint_plan(
            rel, ckpt_bytes, num_gpus, num_nodes, job_mttf_s(sources), step_time_s
        ),
        recovery=recovery_plan(rel, model_state_bytes, num_nodes),
        horizon_s=horizon_s,
        max_wall_s=_MAX_WALL_FACTOR * total_work_s,
        maintenance_interval_s=maint.interval_hours * 3600.0 if maint else math.inf,
        maintenance_downtime_s=maint.downtime_s if maint else 0.0,
        stragglers=tuple(
            StragglerSource(
                s.rate_per_gpu_hour * num_gpus / 3600.0,
                s.slowdown_factor,
                s.duration_s,
                s.inter_arrival.shape if isinstance(s.inter_arrival, WeibullInterArrival) else None,
            )
            for s in rel.stragglers
            if s.rate_per_gpu_hour > 0
        ),
    )


def policy_summary(
    spec: ExperimentSpec,
    reliability: ReliabilitySpec,
    step_time_s: float,
    model_state_bytes: float,
    num_runs: int,
    seed: int,
) -> dict[str, Any]:
    """Monte Carlo summary of one reliability variant, with cost and the closed form."""
    params = run_params(spec, reliability, step_time_s, model_state_bytes)
    summary = summarize(monte_carlo(params, num_runs, seed), spec.cluster.num_gpus)
    spares = (
        reliability.recovery.num_spare_nodes
        if isinstance(reliability.recovery, RestartRecoverySpec)
        else 0
    )
    billed_gpus = spec.cluster.num_gpus + spares * spec.cluster.gpus_per_node
    price = _gpu_hour_price(spec, reliability)
    ckpt, rec = params.checkpoint, params.recovery
    failures_per_s = sum(s.rate_per_s for s in params.sources)
    out = asdict(summary)
    out["ettr_ci95"] = list(summary.ettr_ci95)
    out.update(
        cost_usd_mean=None if price is None else summary.wall_days_mean * 24 * billed_gpus * price,
        lost_cost_usd_mean=None if price is None else summary.gpu_hours_lost_mean * price,
        billed_gpus=billed_gpus,
        checkpoint_interval_s=ckpt.interval_s,
        checkpoint_stall_s=ckpt.stall_s,
        mttf_hours=math.inf if failures_per_s == 0 else 1.0 / failures_per_s / 3600.0,
        ettr_closed_form=meta_expected_ettr(
            failures_per_s,
            rec.detection_s + rec.restart_s + ckpt.tiers[0].load_s,
            ckpt.interval_s,
            ckpt.stall_s,
        ),
        seed=seed,
    )
    return out


def require_reliability(spec: ExperimentSpec) -> ReliabilitySpec:
    """The experiment's ``reliability`` section, or a SpecError saying it is missing."""
    if spec.reliability is None:
        raise SpecError(
            f"'reliability' section is required for a whole-run simulation of {spec.name!r} "
            "(e.g. 'reliability: {failure_preset: llama3-405b}')"
        )
    return spec.reliability


def reliability_summary(
    spec: ExperimentSpec,
    step_time_s: float,
    model_state_bytes: float,
    *,
    max_events: int = MAX_EVENTS,
) -> dict[str, Any]:
    """Whole-run reliability of an experiment under its own ``reliability`` section.

    Meant for ``simtrain run``: ``step_time_s`` and ``model_state_bytes`` come from
    ``simulate()``; the seed is ``spec.seed`` and the number of runs
    ``spec.reliability.num_runs``.

    Raises:
        SpecError: the experiment has no ``reliability`` section, or no run length, or the
            study is estimated above ``max_events`` events (:mod:`simtrain.limits`).
    """
    rel = require_reliability(spec)
    check_reliability(
        run_params(spec, rel, step_time_s, model_state_bytes), rel.num_runs, 1, max_events
    )
    out = policy_summary(
        spec,
        rel,
        step_time_s,
        model_state_bytes,
        spec.reliability.num_runs,
        spec.seed,
    )
    return {"policy": "spec", **out}


def compare_policies(
    spec: ExperimentSpec,
    step_time_s: float,
    model_state_bytes: float,
    policies: Sequence[str],
    num_runs: int,
    seed: int,
    *,
    max_events: int = MAX_EVENTS,
    progress: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Summaries of the named policies side by side, all with the same seed.

    ``progress`` is called after each policy (a progress bar's advance).

    Raises:
        SpecError: the experiment has no ``reliability`` section (it holds the failure
            rates), or an unknown policy name (listing the known ones), or the study is
            estimated above ``max_events`` events (:mod:`simtrain.limits`).
    """
    base = require_reliability(spec)
    factories = [(name, get_policy(name)) for name in policies]
    params = run_params(spec, base, step_time_s, model_state_bytes)
    check_reliability(params, num_runs, len(factories), max_events)
    rows = []
    for name, f in factories:
        summary = policy_summary(spec, f(base), step_time_s, model_state_bytes, num_runs, seed)
        rows.append({"policy": name, **summary})
        if progress is not None:
            progress()
    return rows


def _gpu_hour_price(spec: ExperimentSpec, reliability: ReliabilitySpec) -> float | None:
    """The spec's GPU-hour price, else the accelerator's preset, else None (no cost)."""
    if reliability.gpu_hour_price_usd is not None:
        return reliability.gpu_hour_price_usd
    try:
        return preset_price(spec.cluster.accelerator).usd_per_gpu_hour
    except SpecError:
        return None
