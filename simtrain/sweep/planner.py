"""Capacity planning: how many GPUs, which parallel layout, how many days and dollars.

:func:`plan` turns "train model M on T tokens within D days on accelerator A" into a search
over cluster sizes and parallel layouts, then ranks whole-run plans:

1. *Cluster sizes.* A run needs ``6·P·T`` model FLOPs (P parameters). At an optimistic 60 %
   MFU and no failures the deadline needs at least ``n_lo = 6·P·T / (D·86400·0.6·peak)``
   GPUs; sizes of the form 2^k and 3·2^(k-1) from the one below ``n_lo`` up to ``4·n_lo``
   are tried (whole nodes once past one node), since beyond that a smaller cluster meets the
   deadline for less. ``max_gpus`` caps them; below ``n_lo`` the largest sizes it allows
   are tried, and the answer says how many GPUs the deadline needs.
2. *Layouts.* Every layout of :class:`~simtrain.sweep.space.LayoutSpace` (tp, pp with each
   schedule and its virtual stages, cp, ep, ZeRO 0-3, micro-batch size, recomputation) at
   the global batch nearest the target tokens per step (Llama 3 trained at 16M tokens).
3. *Two stages* (:mod:`simtrain.sweep.search`). Per size, the ``simulate_top`` best
   layouts by the analytical estimate (which agrees with the simulator) that fit in memory
   are found by branch and bound (:mod:`simtrain.sweep.plan_search`): layouts are
   estimated from the highest upper bound on their throughput down (the estimator's lower
   bound on step time), each that would enter the best so far is checked for memory, and
   the rest are skipped once their bound cannot beat the ``simulate_top``-th; the best is
   the size's plan. The sizes picked (cheapest, fastest) are then simulated: their candidates
   run on the engine and the best simulated one replaces the estimate, until the picks
   rest on simulations. ``exhaustive`` estimates every layout, checks its memory and
   simulates every one that fits, at every size.
4. *Whole run.* The plan's step time gives steps = T / tokens per step. Goodput comes from
   the reliability layer (a Monte Carlo of failures, checkpoints and restarts,
   :func:`simtrain.reliability.reliability_summary`) under a failure preset (Llama 3's rates
   by default), with hot spares as set (``spares``: a node count, a percentage of the job's
   nodes, or by default enough that a failed node finds one with 99.9 % probability,
   :func:`simtrain.reliability.spares.default_spare_nodes`): days = wall days of that
   simulation, cost = its GPU-hours, spares included, times the price.

The cheapest plan that meets the deadline (and budget), and the fastest within the budget,
are reported with the other sizes as alternatives; when none meets the deadline,
:attr:`PlanResult.advice` says what would.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simtrain.catalog import get_accelerator
from simtrain.errors import SpecError
from simtrain.paths import data_dir
from simtrain.reliability import reliability_summary
from simtrain.reliability.spares import spare_nodes
from simtrain.report.progress import Progress
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import load_yaml_tree
from simtrain.specs.model import ModelSpec
from simtrain.specs.reliability import ReliabilitySpec, RestartRecoverySpec
from simtrain.sweep.executors import (
    Executor,
    InlineExecutor,
    LocalExecutor,
    check_executor,
    get_executor,
)
from simtrain.sweep.plan_search import PlanProblem, forget_search, search_sizes
from simtrain.sweep.run import open_store, preset_usd_per_gpu_hour, simulate_configurations
from simtrain.sweep.space import LayoutSpace
from simtrain.workload.counts import count_parameters

SECONDS_PER_DAY = 86400.0
OPTIMISTIC_MFU = 0.6
"""MFU above any published large run (Llama 3 405B: 38-43 %), used only to bound the search."""
DEFAULT_SIMULATE_TOP = 2
"""Layouts simulated per cluster size: the best two by the estimate that fit in memory."""
_PARALLEL_KEYS = ("tp", "pp", "vpp", "dp", "cp", "ep", "sp", "pipeline_schedule", "recompute",
                  "zero_stage", "micro_batch_size", "global_batch_size")  # fmt: skip


@dataclass(frozen=True)
class PlanOption:
    """One cluster size with its best layout, and what the whole run takes.

    Attributes:
        num_gpus: GPUs of the cluster.
        parallel: the parallel layout (tp, pp, vpp, dp, cp, ep, schedule, ZeRO, recompute,
            micro and global batch).
        step_time_s: simulated step time.
        tokens_per_s: training throughput without failures.
        mfu: model FLOPs utilisation of a step.
        goodput: fraction of wall time that trains (reliability ETTR; 1 without failures).
        days: wall-clock days of the whole run, failures included.
        cost_usd: dollars of the whole run, spares included (None without a price).
        meets_deadline: days <= the deadline.
        within_budget: cost <= the budget (True without a budget).
        spare_nodes: hot spare nodes held (and billed) during the run.
        estimate_error: the estimator's step time against the simulation's, relative.
        simulated: the step time comes from the simulation (else from the estimate: sizes
            not picked are not simulated unless the plan is exhaustive).
        framework: the software stack (framework profile) of the layout.
    """

    num_gpus: int
    parallel: dict[str, Any]
    step_time_s: float
    tokens_per_s: float
    mfu: float
    goodput: float
    days: float
    cost_usd: float | None
    meets_deadline: bool
    within_budget: bool
    spare_nodes: int = 0
    estimate_error: float | None = None
    simulated: bool = False
    framework: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; the issue's keys (num_gpus, parallel, days, cost_usd) first."""
        return asdict(self)


@dataclass
class PlanResult:
    """Plans for every cluster size tried, the picks, and what the search did.

    Attributes:
        options: the best layout of each size, smallest cluster first.
        cheapest: the cheapest option meeting the deadline and budget (None if none does).
        fastest: the fastest option within the budget (None if none is).
        counts: layouts ``enumerated``, ``invalid`` (by the spec's rules), ``estimated``,
            ``bounded`` (skipped: their bound could not beat the best kept),
            ``memory_checked``, ``oom``, ``simulated`` (``from_store`` of them found in the
            store), ``error`` (could not be timed).
        usd_per_gpu_hour: the price used.
        advice: what would meet the deadline (or fit) when nothing tried does; "" otherwise.
        wall_time_s: seconds the plan took.
        stage_wall_s: seconds of each stage: ``estimate`` (memory checks included),
            ``whole_run``, ``simulate``.
        inputs: the arguments and derived bounds.
    """

    options: list[PlanOption]
    cheapest: PlanOption | None
    fastest: PlanOption | None
    counts: dict[str, int]
    usd_per_gpu_hour: float | None
    advice: str = ""
    wall_time_s: float = 0.0
    stage_wall_s: dict[str, float] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)

    @property
    def alternatives(self) -> list[PlanOption]:
        """Runner-ups: the other feasible options by cost, then the infeasible by days."""
        picked = {id(self.cheapest), id(self.fastest)}
        rest = [o for o in self.options if id(o) not in picked]
        return sorted(rest, key=lambda o: (not o.meets_deadline, o.cost_usd or 0.0, o.days))


def cluster_sizes(n_lo: float, gpus_per_node: int, max_gpus: int | None) -> list[int]:
    """Sizes 2^k and 3·2^(k-1), whole nodes past one node, from below ``n_lo`` to ``4·n_lo``.

    With ``max_gpus`` below that range, the (up to three) largest powers of two it allows.

    Examples:
        >>> cluster_sizes(12000, 8, None)
        [8192, 12288, 16384, 24576, 32768]
        >>> cluster_sizes(12000, 8, 16384)
        [8192, 12288, 16384]
        >>> cluster_sizes(0.5, 8, None)  # a toy model: one GPU is enough
        [1, 2]
        >>> cluster_sizes(234, 8, 16)  # the deadline needs more than allowed
        [4, 8, 16]
    """
    sizes = sorted({2**k for k in range(24)} | {3 * 2**k for k in range(23)})
    sizes = [s for s in sizes if s <= gpus_per_node or s % gpus_per_node == 0]
    below = [s for s in sizes if s < n_lo]
    start = below[-1] if below else sizes[0]
    upper = max(4 * n_lo, start)
    if max_gpus is not None:
        if max_gpus < start:
            return [s for s in sizes if s <= max_gpus and not s & (s - 1)][-3:]
        upper = min(upper, max_gpus)
    return [s for s in sizes if start <= s <= upper]


def _section(name_or_path: str, folder: str, section: str) -> dict[str, Any]:
    """One section of a data file given by name (``workloads/<name>.yaml``) or by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = data_dir(folder) / f"{name_or_path}.yaml"
        if not path.exists():
            known = ", ".join(sorted(p.stem for p in data_dir(folder).glob("*.yaml")))
            option = "--model" if folder == "workloads" else "--topology"
            raise SpecError(
                f"'{option}' must name a preset or a YAML file (got "
                f"{name_or_path!r}; presets: {known})"
            )
    data = load_yaml_tree(path)
    if not isinstance(data.get(section), dict):
        raise SpecError(f"'{path}' must have a '{section}' section")
    return dict(data[section])


_WORKER_MODULES = ("simtrain.sweep.plan_search", "simtrain.sweep.evaluate")
"""What a plan's workers run: stage 1 (:func:`search_sizes`) and the simulations."""
_SIMULATION_MODULES = ("simtrain.sweep.evaluate",)
"""What the workers of a small plan run: the simulations."""
STAGE1_POOL_MIN_LAYOUTS = 10_000
"""Layouts from which stage 1 runs in the workers. Below, the driver searches them faster
than worker processes start (each imports simtrain and fills caches of its own: about two
seconds on two cores, the whole search of Llama 3 8B on up to 16 GPUs)."""


def _plan_executor(
    executor: str, num_workers: int | None, address: str | None, small: bool
) -> Executor:
    """Where a plan's stage 1 and simulations run (local workers start on ``start()``).

    A large search runs stage 1 in the workers, one task per size, then simulates its picks
    there. A small one (``small``: under :data:`STAGE1_POOL_MIN_LAYOUTS` layouts, or one
    size) searches in the driver, and its simulations share one worker fewer and the
    driver (warm, and otherwise waiting; on two cores, one worker importing while the
    driver searches takes no core from it). One process in all: everything in the driver.
    """
    if executor != "local":
        return get_executor(executor, num_workers, address)
    workers = num_workers or os.cpu_count() or 1
    if workers <= 1:
        return InlineExecutor()
    if small:
        return LocalExecutor(workers - 1, _SIMULATION_MODULES, with_caller=True)
    return LocalExecutor(workers, _WORKER_MODULES)


def _stage1(
    problem: PlanProblem,
    points: list[tuple[int, dict[str, Any]]],
    runner: Executor,
    top: int | None,
    version: str,
    display: Progress,
) -> dict[str, Any]:
    """The best layouts of every size (:func:`search_sizes`).

    In the executor's workers, one task per size (the largest first), when there are
    several and at least :data:`STAGE1_POOL_MIN_LAYOUTS` layouts; else here.
    """
    sizes = Counter(n for n, _ in points)
    advance = display.stage("estimating", len(points))
    base = {"problem": problem, "top": top, "version": version,
            "search": f"{os.getpid()}-{time.time_ns()}"}  # fmt: skip
    if runner.num_workers <= 1 or len(sizes) == 1 or len(points) < STAGE1_POOL_MIN_LAYOUTS:
        try:
            done = search_sizes({**base, "sizes": tuple(sizes)})
        finally:
            forget_search()  # the driver keeps no caches past the plan
        advance(len(points))
        return done
    merged: dict[str, Any] = {"kept": {}, "counts": Counter(), "min_peak": None}
    tasks = ((str(n), {**base, "sizes": (n,)}) for n, _ in sizes.most_common())
    for n, done in runner.map_unordered(search_sizes, tasks):
        if "kept" not in done:  # the worker died: the task's row says why
            raise SpecError(f"the estimate of {n} GPUs failed ({done.get('error', '?')})")
        merged["kept"].update(done["kept"])
        merged["counts"].update(done["counts"])
        peaks = [p for p in (merged["min_peak"], done["min_peak"]) if p is not None]
        merged["min_peak"] = min(peaks, default=None)
        advance(sizes[int(n)])
    return merged


def whole_run(
    spec: ExperimentSpec,
    step_time_s: float,
    price: float | None,
    failure_preset: str | None,
    num_runs: int,
    spares: str | int | None,
) -> tuple[float, float, float | None, int]:
    """Goodput, wall days, dollars and spare nodes of the whole run of one layout."""
    tokens = spec.training.total_tokens
    steps = math.ceil(tokens / (spec.parallel.global_batch_size * spec.model.seq_length))
    productive_days = steps * step_time_s / SECONDS_PER_DAY
    n, per_node = spec.cluster.num_gpus, spec.cluster.gpus_per_node
    rel = ReliabilitySpec(
        failure_preset=failure_preset, num_runs=num_runs, gpu_hour_price_usd=price or 0.0
    )
    held = spare_nodes(spares, rel, n, per_node)
    if failure_preset is None:
        billed = n + held * per_node
        cost = None if price is None else productive_days * 24.0 * billed * price
        return 1.0, productive_days, cost, held
    rel = rel.model_copy(update={"recovery": RestartRecoverySpec(num_spare_nodes=held)})
    state_bytes = 16.0 * count_parameters(spec.model).total  # mixed-precision Adam
    summary = reliability_summary(
        spec.model_copy(update={"reliability": rel}), step_time_s, state_bytes
    )
    days = float(summary["wall_days_mean"])
    cost = None if price is None else float(summary["cost_usd_mean"])
    return productive_days / days, days, cost, held


def plan(
    model: str,
    total_tokens: float,
    deadline_days: float,
    accelerator: str,
    *,
    budget_usd: float | None = None,
    max_gpus: int | None = None,
    topology: str | None = None,
    usd_per_gpu_hour: float | None = None,
    batch_tokens: float = 16 * 2**20,
    failure_preset: str | None = "llama3-405b",
    num_runs: int = 20,
    spares: str | int | None = None,
    store: str = ":memory:",
    executor: str = "local",
    num_workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    progress: Progress | None = None,
    exhaustive: bool = False,
    simulate_top: int = DEFAULT_SIMULATE_TOP,
    space: LayoutSpace | None = None,
) -> PlanResult:
    """Search cluster sizes and layouts for the cheapest and the fastest whole-run plans.

    Args:
        model: a workload preset name (``llama3-405b``) or a YAML file with a ``model``.
        total_tokens: tokens of the run.
        deadline_days: wall-clock days allowed, failures included.
        accelerator: catalog accelerator name.
        budget_usd: dollars allowed (None: no limit).
        max_gpus: largest cluster to consider (None: 4x the optimistic lower bound).
        topology: a topology preset name or YAML file (its ``cluster`` section, resized).
        usd_per_gpu_hour: price; default the accelerator's dated catalog preset.
        batch_tokens: target tokens per optimizer step.
        failure_preset: reliability failure preset, or None for a failure-free run.
        num_runs: Monte Carlo runs of the reliability simulation per option.
        spares: hot spare nodes: a count, a percentage of the job's nodes (``"2%"``), or
            None for the default scaled to the job (see the module docstring).
        store: SQLite store of the simulated layouts (``":memory:"`` keeps nothing).
        executor: ``local`` or ``ray``.
        num_workers: worker processes.
        address: Ray cluster address.
        resume: reuse the simulations the store already holds.
        progress: where to draw progress bars (None: nowhere).
        exhaustive: simulate every layout that fits instead of the best by the estimate.
        simulate_top: layouts simulated per cluster size after the estimate.
        space: the layouts to search (default :class:`LayoutSpace`).

    Raises:
        SpecError: unknown model, accelerator or topology; bad numbers.
    """
    began = time.perf_counter()
    for name, value in (("--tokens", total_tokens), ("--deadline-days", deadline_days)):
        if not value > 0:
            raise SpecError(f"'{name}' must be > 0 (got {value})")
    if simulate_top < 1:
        raise SpecError(f"'--simulate-top' must be >= 1 (got {simulate_top})")
    acc = get_accelerator(accelerator, "--accelerator")
    model_data = _section(model, "workloads", "model")
    cluster = _section(topology, "topologies", "cluster") if topology else {}
    cluster["accelerator"] = acc.name
    per_node = int(cluster.get("gpus_per_node", 8))
    model_spec = ModelSpec.model_validate(model_data)
    num_params = count_parameters(model_spec).total
    spare_nodes(spares, ReliabilitySpec(), per_node, per_node)  # a bad setting fails now
    peak = acc.peak_flops["bf16"]
    n_lo = 6 * num_params * total_tokens / (deadline_days * SECONDS_PER_DAY * OPTIMISTIC_MFU * peak)
    sizes = cluster_sizes(n_lo, per_node, max_gpus)
    problem = PlanProblem(model_data, cluster, tuple(sizes), batch_tokens, total_tokens,
                       space or LayoutSpace())  # fmt: skip
    layouts = problem.layouts()
    display = progress or Progress()
    from simtrain.api import simtrain_version

    version = simtrain_version()
    counts = dict.fromkeys(("enumerated", "invalid", "estimated", "bounded", "memory_checked",
                            "oom", "simulated", "from_store", "error"), 0)  # fmt: skip
    points = list(problem.points())
    counts["enumerated"] = len(points)
    check_executor(executor, address)
    small = len(sizes) == 1 or len(points) < STAGE1_POOL_MIN_LAYOUTS
    runner = _plan_executor(executor, num_workers, address, small)
    clock = [time.perf_counter()]
    stage_wall_s: dict[str, float] = {}

    def lap(name: str) -> None:
        now = time.perf_counter()
        stage_wall_s[name], clock[0] = now - clock[0], now

    try:
        runner.start()  # the workers import simtrain while the driver enumerates and searches
        found = _stage1(problem, points, runner, None if exhaustive else simulate_top, version,
                        display)  # fmt: skip
        for name, value in found["counts"].items():
            counts[name] += value
        lap("estimate")
        rows: dict[str, dict[str, Any]] = {}
        chosen: dict[str, ExperimentSpec] = {}
        per_size: dict[int, list[str]] = {}
        for n in sizes:
            per_size[n] = []
            for key, index, row in found["kept"].get(n, []):
                per_size[n].append(key)
                chosen[key] = layouts.spec(n, points[index][1])
                rows[key] = row
        price = (
            usd_per_gpu_hour if usd_per_gpu_hour is not None else preset_usd_per_gpu_hour(acc.name)
        )

        def option(n: int, key: str, row: dict[str, Any], simulated: bool) -> PlanOption:
            spec = chosen[key]
            step = float(row["step_time_s"])
            goodput, days, cost, held = whole_run(
                spec, step, price, failure_preset, num_runs, spares
            )
            estimated = rows[key].get("estimate_step_time_s")
            return PlanOption(
                num_gpus=n,
                parallel={k: getattr(spec.parallel, k) for k in _PARALLEL_KEYS},
                step_time_s=step,
                tokens_per_s=float(row["tokens_per_s"]),
                mfu=float(row["mfu"]),
                goodput=goodput,
                days=days,
                cost_usd=cost,
                meets_deadline=days <= deadline_days,
                within_budget=budget_usd is None or (cost is not None and cost <= budget_usd),
                spare_nodes=held,
                estimate_error=None if estimated is None else estimated / step - 1.0,
                simulated=simulated,
                framework=spec.training.framework,
            )

        # Each size's plan by the estimate; then the sizes picked are simulated (all with
        # exhaustive), their plans replaced by the best simulated layout, until the picks
        # rest on simulations.
        options = {n: option(n, per_size[n][0], rows[per_size[n][0]], False)
                   for n in sizes if per_size[n]}  # fmt: skip
        lap("whole_run")
        results = open_store(store, resume, overwrite=not resume)
        try:
            counts["from_store"] = len(set(chosen) & results.keys())
            simulated_sizes: set[int] = set()
            failures: list[str] = []
            while True:
                picks = _picks(list(options.values()))
                todo = set(options) if exhaustive else {o.num_gpus for o in picks if o}
                todo -= simulated_sizes
                if not todo:
                    break
                batch = {k: chosen[k] for n in sorted(todo) for k in per_size[n]}
                simulate_configurations(batch, results, version, runner, display)
                stored = results.get_all()
                for n in todo:
                    done = [(stored[k], k) for k in per_size[n]
                            if stored.get(k, {}).get("status") == "ok"]  # fmt: skip
                    if done:
                        row, key = max(done, key=lambda rk: rk[0]["tokens_per_s"])
                        options[n] = option(n, key, row, True)
                    else:  # every candidate failed to simulate: no plan at this size
                        options.pop(n, None)
                        failures += [stored.get(k, {}).get("error", "") for k in per_size[n]]
                simulated_sizes |= todo
                counts["simulated"] += len(batch)
            lap("simulate")
        finally:
            results.close()
    finally:
        runner.close()
    options = [options[n] for n in sizes if n in options]
    cheapest, fastest = _picks(options)
    result = PlanResult(
        options=options,
        cheapest=cheapest,
        fastest=fastest,
        counts=counts,
        usd_per_gpu_hour=price,
        inputs={"model": model, "total_tokens": total_tokens, "deadline_days": deadline_days,
                "accelerator": acc.name, "budget_usd": budget_usd, "max_gpus": max_gpus,
                "topology": topology, "failure_preset": failure_preset, "spares": spares,
                "num_params": num_params, "optimistic_min_gpus": n_lo, "sizes": sizes,
                "batch_tokens": batch_tokens},
    )  # fmt: skip
    result.advice = advice(result, found["min_peak"], failures)
    result.stage_wall_s = stage_wall_s
    result.wall_time_s = time.perf_counter() - began
    return result


def _picks(options: list[PlanOption]) -> tuple[PlanOption | None, PlanOption | None]:
    """The cheapest option meeting the deadline and budget, and the fastest within budget."""
    feasible = [o for o in options if o.meets_deadline and o.within_budget]
    affordable = [o for o in options if o.within_budget]
    return (
        min(feasible, key=lambda o: (o.cost_usd or 0.0, o.num_gpus), default=None),
        min(affordable, key=lambda o: o.days, default=None),
    )


def advice(result: PlanResult, smallest_peak: float | None, failures: list[str]) -> str:
    """What would work when no plan meets the deadline, or nothing fits; "" otherwise.

    The GPUs a deadline needs are read off the fastest option tried: at its throughput per
    GPU (which only falls as clusters grow) the run needs at least
    ``GPUs × days / deadline`` of them at the same batch.
    """
    inputs = result.inputs
    deadline, sizes = inputs["deadline_days"], inputs["sizes"]
    if not result.options and failures:
        return f"the best layouts by the estimate could not be simulated ({failures[0]})"
    if not result.options:
        smallest = (
            f"; the smallest peak found is {smallest_peak / 1e9:.0f} GB" if smallest_peak else ""
        )
        tried = f"{sizes[0]:,}-{sizes[-1]:,}" if len(sizes) > 1 else f"{sizes[0]:,}"
        return (
            f"no layout fits in memory on {tried} GPUs{smallest}; more GPUs (--max-gpus) "
            "shard the model further"
        )
    if result.cheapest is not None:
        return ""
    best = min(result.options, key=lambda o: o.days)
    if best.meets_deadline:  # the deadline is met, only not within the budget
        return (
            f"the plans that meet the {deadline:g}-day deadline cost more than the budget; "
            f"the cheapest of them costs {format_usd(min_cost(result))}"
        )
    needed = math.ceil(best.num_gpus * best.days / deadline)
    return (
        f"needs >= {needed:,} GPUs to finish in {deadline:g} days at this batch "
        f"({inputs['batch_tokens'] / 2**20:.3g}M tokens per step): the fastest plan tried, "
        f"{best.num_gpus:,} GPUs, takes {format_days(best.days)} days"
        + ("" if inputs["max_gpus"] is None else f" (raise --max-gpus to {needed:,} or more)")
    )


def min_cost(result: PlanResult) -> float | None:
    """Cost of the cheapest option that meets the deadline (budget ignored)."""
    costs = [o.cost_usd for o in result.options if o.meets_deadline and o.cost_usd is not None]
    return min(costs, default=None)


def format_days(days: float) -> str:
    """Days with three significant figures, whole days past 100.

    Examples:
        >>> format_days(12.345), format_days(1300.4)
        ('12.3', '1,300')
    """
    return f"{days:,.0f}" if days >= 100 else f"{days:.3g}"


def format_usd(value: float | None) -> str:
    """Dollars with three significant figures and a unit: $1.23M, $45.6k, $789."""
    if value is None:
        return "no price"
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"${value / scale:.3g}{unit}"
    return f"${value:.3g}"
