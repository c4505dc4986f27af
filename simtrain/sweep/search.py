"""The two-stage search: estimate every configuration analytically, simulate the best.

Stage 1 runs in the driver: every configuration that passes the spec's rules and the sweep's
constraints gets its memory verdict (:func:`simtrain.memory.estimate_memory`; out of memory
is pruned) and its analytical step time (:class:`simtrain.estimator.Estimator`, about a
millisecond each). Stage 2 hands the best of them by the estimate, ``simulate_top`` per
group (a sweep is one group; the planner groups by cluster size), to the executor for the
discrete-event simulation, and the table ranks what was simulated by the simulation.

Because the estimator combines the engine's own pieces and agrees with it on step time
(``tests/estimator``), the best configuration by the estimate is the best by the
simulation; simulating a few runners-up too keeps the answer right when a new engine
mechanism opens a small gap before the estimator learns it. ``exhaustive`` searches keep
simulating everything (:mod:`simtrain.sweep.run`).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from simtrain.catalog import get_accelerator
from simtrain.estimator import Estimator, StepEstimate
from simtrain.metrics.flops import step_flops
from simtrain.specs.experiment import ExperimentSpec
from simtrain.sweep.evaluate import METRIC_COLUMNS, memory_columns

ESTIMATED = "estimated"
"""Status of a configuration estimated analytically and not simulated."""
DEFAULT_SIMULATE_TOP = 8
"""Configurations simulated per group by default: the best few by the estimate."""


def estimate_metrics(spec: ExperimentSpec, estimate: StepEstimate) -> dict[str, Any]:
    """The sweep-table metrics of an analytical estimate (the report's definitions).

    Tokens per second, MFU, HFU and TFLOP/s per GPU follow ``SimulationResult.summary``:
    model (and hardware) FLOPs of the step over step time, GPUs and the dense peak.
    """
    step = estimate.step_time_s
    flops = step_flops(spec)
    gpus = spec.cluster.num_gpus
    peak = get_accelerator(spec.cluster.accelerator).peak_flops[spec.training.dtype]
    return {
        "step_time_s": step,
        "tokens_per_s": spec.parallel.global_batch_size * spec.model.seq_length / step,
        "mfu": flops.model / (step * gpus * peak),
        "hfu": flops.hardware / (step * gpus * peak),
        "tflops_per_gpu": flops.hardware / step / gpus / 1e12,
        "bubble_fraction": estimate.bubble_fraction,
        "exposed_comm_s": estimate.exposed_comm_s,
    }


@dataclass
class Stage1:
    """Memory verdicts and estimates of the configurations of one search (stage 1).

    Attributes:
        estimator: the estimator (its caches are shared by every configuration).
        rows: store key -> the row of each configuration evaluated so far.
    """

    estimator: Estimator = field(default_factory=Estimator)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    _capacity: dict[str, float] = field(default_factory=dict)

    def evaluate(
        self, key: str, spec: ExperimentSpec, estimate: StepEstimate | None = None
    ) -> dict[str, Any]:
        """The row of one configuration: ``oom`` (pruned), ``estimated`` or ``error``.

        Like the simulation task (:func:`simtrain.sweep.evaluate.evaluate`), a configuration
        that cannot be timed is an ``error`` row with the message, never an exception.
        ``estimate``: the configuration's estimate when the caller has it already.
        """
        row = self.rows.get(key)
        if row is not None:
            return row
        row = dict.fromkeys(METRIC_COLUMNS)
        row["estimate_step_time_s"] = None
        try:
            name = spec.cluster.accelerator
            capacity = self._capacity.get(name)
            if capacity is None:
                capacity = self._capacity[name] = get_accelerator(name).hbm_capacity_bytes
            columns, reason = memory_columns(spec, capacity)
            row.update(columns)
            if reason:
                row.update(status="oom", error=reason)
            else:
                estimate = estimate or self.estimator.estimate(spec)
                row.update(estimate_metrics(spec, estimate))
                row.update(status=ESTIMATED, error="", estimate_step_time_s=estimate.step_time_s)
        except Exception as exc:  # recorded, and the search goes on
            row.update(status="error", error=" ".join(f"{type(exc).__name__}: {exc}".split()))
        self.rows[key] = row
        return row


def best_by_group(
    items: Iterable[tuple[Hashable, str, float]], top: int, ascending: bool
) -> dict[Hashable, list[str]]:
    """The ``top`` keys of each group by score, best first (ties: first seen first).

    Args:
        items: (group, key, score) of every estimated configuration.
        top: keys kept per group.
        ascending: a smaller score is better.

    Examples:
        >>> best_by_group([("a", "k1", 3.0), ("a", "k2", 5.0), ("b", "k3", 1.0)], 1, False)
        {'a': ['k2'], 'b': ['k3']}
    """
    groups: dict[Hashable, list[tuple[float, int, str]]] = {}
    for order, (group, key, score) in enumerate(items):
        groups.setdefault(group, []).append((score if ascending else -score, order, key))
    return {
        group: [k for _, _, k in heapq.nsmallest(top, entries)] for group, entries in groups.items()
    }
