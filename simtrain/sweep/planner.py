"""Capacity planning: how many GPUs, which parallel layout, how many days and dollars.

:func:`plan` turns "train model M on T tokens within D days on accelerator A" into a sweep
(the same machinery as ``simtrain sweep``) over cluster sizes and parallel layouts, then
ranks whole-run plans:

1. *Cluster sizes.* A run needs ``6·P·T`` model FLOPs (P parameters). At an optimistic 60 %
   MFU and no failures the deadline needs at least ``n_lo = 6·P·T / (D·86400·0.6·peak)``
   GPUs; sizes of the form 2^k and 3·2^(k-1) (whole nodes) from the one below ``n_lo`` up to
   ``4·n_lo`` (or ``max_gpus``) are tried, since beyond that a smaller cluster meets the
   deadline for less.
2. *Layouts.* Tensor parallelism fills a node (the practice of Megatron-LM and Llama 3, whose
   TP all-reduces need NVLink); pipeline degrees 1 to 16, the 1F1B and interleaved
   schedules, and every recompute mode; ZeRO-1, micro-batch 1. The global batch is the
   multiple of DP nearest the target tokens per step (Llama 3 trained at 16M tokens).
3. *Whole run.* The fastest simulated layout of each size gives the step time; steps = T /
   tokens per step. Goodput comes from the reliability layer (a Monte Carlo of failures,
   checkpoints and restarts, :func:`simtrain.reliability.reliability_summary`) under a
   failure preset (Llama 3's rates by default): days = wall days of that simulation, cost =
   its GPU-hours (spares included) times the price.

The cheapest plan that meets the deadline (and budget), and the fastest within the budget,
are reported with the other sizes as alternatives.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simtrain.catalog import get_accelerator
from simtrain.errors import SpecError
from simtrain.paths import data_dir
from simtrain.reliability import reliability_summary
from simtrain.specs.loader import experiment_from_dict, load_yaml_tree
from simtrain.specs.reliability import ReliabilitySpec
from simtrain.specs.sweep import SweepSpec, with_fields
from simtrain.sweep.run import SweepResult, preset_usd_per_gpu_hour, run_sweep
from simtrain.workload.counts import count_parameters

SECONDS_PER_DAY = 86400.0
OPTIMISTIC_MFU = 0.6
"""MFU above any published large run (Llama 3 405B: 38-43 %), used only to bound the search."""
PIPELINE_DEGREES: tuple[int, ...] = (1, 2, 4, 8, 16)
SCHEDULES: tuple[tuple[str, int], ...] = (("1f1b", 1), ("interleaved", 2), ("interleaved", 4))


@dataclass(frozen=True)
class PlanOption:
    """One cluster size with its best layout, and what the whole run takes.

    Attributes:
        num_gpus: GPUs of the cluster.
        parallel: the parallel layout (tp, pp, vpp, dp, schedule, recompute, batch).
        step_time_s: simulated step time.
        tokens_per_s: training throughput without failures.
        mfu: model FLOPs utilisation of a step.
        goodput: fraction of wall time that trains (reliability ETTR; 1 without failures).
        days: wall-clock days of the whole run, failures included.
        cost_usd: dollars of the whole run (None without a price).
        meets_deadline: days <= the deadline.
        within_budget: cost <= the budget (True without a budget).
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; the issue's keys (num_gpus, parallel, days, cost_usd) first."""
        return asdict(self)


@dataclass
class PlanResult:
    """Plans for every cluster size tried, and the picks.

    Attributes:
        options: the best layout of each size, smallest cluster first.
        cheapest: the cheapest option meeting the deadline and budget (None if none does).
        fastest: the fastest option within the budget (None if none is).
        sweep: the underlying sweep over sizes and layouts.
        usd_per_gpu_hour: the price used.
    """

    options: list[PlanOption]
    cheapest: PlanOption | None
    fastest: PlanOption | None
    sweep: SweepResult
    usd_per_gpu_hour: float | None
    inputs: dict[str, Any] = field(default_factory=dict)

    @property
    def alternatives(self) -> list[PlanOption]:
        """Runner-ups: the other feasible options by cost, then the infeasible by days."""
        picked = {id(self.cheapest), id(self.fastest)}
        rest = [o for o in self.options if id(o) not in picked]
        return sorted(rest, key=lambda o: (not o.meets_deadline, o.cost_usd or 0.0, o.days))


def cluster_sizes(n_lo: float, gpus_per_node: int, max_gpus: int | None) -> list[int]:
    """Sizes 2^k and 3·2^(k-1) in whole nodes, from the one below ``n_lo`` to ``4·n_lo``.

    Examples:
        >>> cluster_sizes(12000, 8, None)
        [8192, 12288, 16384, 24576, 32768]
        >>> cluster_sizes(12000, 8, 16384)
        [8192, 12288, 16384]
        >>> cluster_sizes(0.5, 8, None)  # a toy model: one node
        [8]
    """
    sizes = sorted({2**k for k in range(24)} | {3 * 2**k for k in range(23)})
    sizes = [s for s in sizes if s % gpus_per_node == 0]
    below = [s for s in sizes if s < n_lo]
    start = below[-1] if below else sizes[0]
    upper = max_gpus if max_gpus is not None else max(4 * n_lo, start)
    return [s for s in sizes if start <= s <= upper]


def layout_sweep(
    model: dict[str, Any], base: dict[str, Any], sizes: list[int], batch_tokens: float
) -> SweepSpec:
    """The sweep of the plan: a zip of (GPUs, pp, batch) times schedules and recompute modes."""
    tp = base["cluster"].get("gpus_per_node", 8)
    seq = model["seq_length"]
    rows = []
    for n in sizes:
        for pp in PIPELINE_DEGREES:
            dp = n // (tp * pp)
            if dp < 1 or n % (tp * pp):
                continue
            rows.append((n, pp, max(1, round(batch_tokens / seq / dp)) * dp))
    if not rows:
        raise SpecError(f"'--max-gpus' leaves no cluster size with tp={tp} (got sizes {sizes})")
    sizes_col, pp_col, batch_col = (list(c) for c in zip(*rows, strict=True))
    return SweepSpec(
        name="plan",
        base=base,
        axes={"parallel.recompute": ["none", "selective", "full"]},
        zip=[
            {
                "cluster.num_gpus": sizes_col,
                "parallel.pp": pp_col,
                "parallel.global_batch_size": batch_col,
            },
            {
                "parallel.pipeline_schedule": [s for s, _ in SCHEDULES],
                "parallel.vpp": [v for _, v in SCHEDULES],
            },
        ],
        constraints=["parallel.vpp == 1 or parallel.pp > 1"],
        metric="tokens_per_s",
    )


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


def whole_run(
    spec_data: dict[str, Any],
    row: Any,
    price: float | None,
    failure_preset: str | None,
    num_runs: int,
) -> tuple[float, float, float | None]:
    """Goodput, wall days and dollars of the whole run of one simulated layout."""
    spec = experiment_from_dict(spec_data)
    tokens = spec.training.total_tokens
    steps = math.ceil(tokens / (spec.parallel.global_batch_size * spec.model.seq_length))
    productive_days = steps * float(row["step_time_s"]) / SECONDS_PER_DAY
    n = spec.cluster.num_gpus
    if failure_preset is None:
        cost = None if price is None else productive_days * 24.0 * n * price
        return 1.0, productive_days, cost
    rel = ReliabilitySpec(
        failure_preset=failure_preset, num_runs=num_runs, gpu_hour_price_usd=price or 0.0
    )
    state_bytes = 16.0 * count_parameters(spec.model).total  # mixed-precision Adam
    summary = reliability_summary(
        spec.model_copy(update={"reliability": rel}), float(row["step_time_s"]), state_bytes
    )
    days = float(summary["wall_days_mean"])
    cost = None if price is None else float(summary["cost_usd_mean"])
    return productive_days / days, days, cost


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
    store: str = ":memory:",
    executor: str = "local",
    num_workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    progress: bool = False,
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
        store: SQLite store of the underlying sweep.
        executor: ``local`` or ``ray``.
        num_workers: worker processes.
        address: Ray cluster address.
        resume: reuse the layouts the store already holds.
        progress: show a progress bar.

    Raises:
        SpecError: unknown model, accelerator or topology; bad numbers.
    """
    for name, value in (("--tokens", total_tokens), ("--deadline-days", deadline_days)):
        if not value > 0:
            raise SpecError(f"'{name}' must be > 0 (got {value})")
    acc = get_accelerator(accelerator, "--accelerator")
    model_data = _section(model, "workloads", "model")
    cluster = _section(topology, "topologies", "cluster") if topology else {}
    cluster.update(accelerator=acc.name, num_gpus=cluster.get("gpus_per_node", 8))
    tp = cluster.get("gpus_per_node", 8)
    base = {
        "name": f"plan-{model_data.get('name', 'model')}",
        "model": model_data,
        "parallel": {"tp": tp, "sp": True, "micro_batch_size": 1, "zero_stage": 1,
                     "global_batch_size": 1},
        "cluster": cluster,
        "training": {"dtype": "bf16", "total_tokens": float(total_tokens)},
    }  # fmt: skip
    num_params = count_parameters(experiment_from_dict(base).model).total
    n_lo = (
        6
        * num_params
        * total_tokens
        / (deadline_days * SECONDS_PER_DAY * OPTIMISTIC_MFU * acc.peak_flops["bf16"])
    )
    sizes = cluster_sizes(n_lo, tp, max_gpus)
    result = run_sweep(
        layout_sweep(model_data, base, sizes, batch_tokens),
        base,
        store=store,
        executor=executor,
        num_workers=num_workers,
        address=address,
        resume=resume,
        overwrite=not resume,
        progress=progress,
        usd_per_gpu_hour=usd_per_gpu_hour,
    )
    price = usd_per_gpu_hour if usd_per_gpu_hour is not None else preset_usd_per_gpu_hour(acc.name)
    options = []
    done = result.table[result.table["status"] == "ok"]
    for n, group in done.groupby("cluster.num_gpus", sort=True):
        best = group.sort_values("tokens_per_s", ascending=False, kind="stable").iloc[0]
        point = {f: best[f] for f in result.sweep.swept_fields}
        spec_data = with_fields(base, {k: _plain(v) for k, v in point.items()})
        goodput, days, cost = whole_run(spec_data, best, price, failure_preset, num_runs)
        spec = experiment_from_dict(spec_data)
        p = spec.parallel
        options.append(
            PlanOption(
                num_gpus=int(n),
                parallel={"tp": p.tp, "pp": p.pp, "vpp": p.vpp, "dp": p.dp, "sp": p.sp,
                          "pipeline_schedule": p.pipeline_schedule, "recompute": p.recompute,
                          "zero_stage": p.zero_stage, "micro_batch_size": p.micro_batch_size,
                          "global_batch_size": p.global_batch_size},
                step_time_s=float(best["step_time_s"]),
                tokens_per_s=float(best["tokens_per_s"]),
                mfu=float(best["mfu"]),
                goodput=goodput,
                days=days,
                cost_usd=cost,
                meets_deadline=days <= deadline_days,
                within_budget=budget_usd is None or (cost is not None and cost <= budget_usd),
            )
        )  # fmt: skip
    feasible = [o for o in options if o.meets_deadline and o.within_budget]
    affordable = [o for o in options if o.within_budget]
    return PlanResult(
        options=options,
        cheapest=min(feasible, key=lambda o: (o.cost_usd or 0.0, o.num_gpus), default=None),
        fastest=min(affordable, key=lambda o: o.days, default=None),
        sweep=result,
        usd_per_gpu_hour=price,
        inputs={"model": model, "total_tokens": total_tokens, "deadline_days": deadline_days,
                "accelerator": acc.name, "budget_usd": budget_usd, "max_gpus": max_gpus,
                "topology": topology, "failure_preset": failure_preset,
                "num_params": num_params, "optimistic_min_gpus": n_lo},
    )  # fmt: skip


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
