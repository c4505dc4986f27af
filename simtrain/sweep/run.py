"""The sweep driver: enumerate, prune, hand work to an executor, store each result, tabulate.

The driver is the only writer of the store. It streams pending configurations lazily to the
executor (so a sweep of millions never materialises its specs), writes every result the
moment it arrives, and finally assembles the table in enumeration order from the store and the
pruning verdicts, so an interrupted and resumed sweep gives exactly the table of an
uninterrupted one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from simtrain.api import simtrain_version
from simtrain.catalog.prices import preset_price
from simtrain.errors import SpecError
from simtrain.gcpause import cyclic_gc_paused
from simtrain.limits import MAX_CONFIGS
from simtrain.report.progress import Advance, Progress
from simtrain.report.progress import progress as progress_display
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.sweep import SweepSpec, base_mapping, load_sweep
from simtrain.sweep.enumerate import (
    Candidate,
    candidates,
    count_points,
    never_valid,
    sweep_groups,
)
from simtrain.sweep.evaluate import METRIC_COLUMNS, evaluate
from simtrain.sweep.executors import Executor, check_executor, get_executor
from simtrain.sweep.search import DEFAULT_SIMULATE_TOP, ESTIMATED, Stage1, best_by_group
from simtrain.sweep.store import ResultStore

STATUSES: tuple[str, ...] = ("ok", "estimated", "oom", "invalid", "constraint", "error")
"""Row statuses: simulated, estimated only (not among the best), pruned by memory / by the
spec's rules / by a constraint, failed."""


@dataclass
class SweepResult:
    """A finished (or resumed-to-completion) sweep.

    Attributes:
        sweep: the sweep spec.
        table: one row per configuration, in enumeration order: swept fields, the derived
            ``dp``, ``status``, ``error``, the metrics, cost columns and the store ``key``.
        counts: configurations by status, plus ``total``, ``simulated`` (chosen for the
            simulation: the best by the estimate, or every feasible one when exhaustive),
            ``from_store`` (found done) and ``evaluated`` (simulated now).
        wall_time_s: driver wall time.
        store_path: the SQLite store.
        never_valid: one message per swept value that no configuration accepted (a typo,
            or a value the base rules out), with the first reason
            (:func:`~simtrain.sweep.enumerate.never_valid`).
    """

    sweep: SweepSpec
    table: pd.DataFrame
    counts: dict[str, int] = field(default_factory=dict)
    wall_time_s: float = 0.0
    store_path: str = ":memory:"
    never_valid: list[str] = field(default_factory=list)

    def ranked(self) -> pd.DataFrame:
        """Simulated rows, best first by the sweep's metric."""
        done = self.table[self.table["status"] == "ok"]
        return done.sort_values(self.sweep.metric, ascending=self.sweep.ascending, kind="stable")


def run_sweep(
    sweep: SweepSpec,
    base: dict[str, Any],
    *,
    store: str | Path = ":memory:",
    executor: str = "local",
    num_workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | Progress = False,
    usd_per_gpu_hour: float | None = None,
    exhaustive: bool = False,
    simulate_top: int | None = None,
    max_configs: int = MAX_CONFIGS,
) -> SweepResult:
    """Run the sweep: estimate every configuration, simulate the best, tabulate all.

    By default the search has two stages (:mod:`simtrain.sweep.search`): every feasible
    configuration is estimated analytically in the driver, and the ``simulate_top`` best by
    the estimate are simulated; ``exhaustive`` simulates every feasible configuration
    instead. Simulated results are stored as they finish (estimates are recomputed, in
    seconds), so an interrupted sweep resumed with ``resume`` gives the same table.

    Args:
        sweep: the sweep spec.
        base: the base experiment mapping (:func:`~simtrain.specs.sweep.load_sweep`).
        store: SQLite file for results (``":memory:"`` keeps nothing after the call).
        executor: ``local`` (process pool) or ``ray``.
        num_workers: worker processes (local; default all cores) or Ray CPUs for a local Ray.
        address: Ray cluster address (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``).
        resume: skip configurations the store already holds.
        overwrite: empty a non-empty store first instead of refusing.
        progress: show progress bars with counts and ETA on the terminal (or draw into
            this display).
        usd_per_gpu_hour: price for the cost columns; default the accelerator's preset.
        exhaustive: simulate every feasible configuration (no analytical stage).
        simulate_top: configurations simulated after the estimate (default: the sweep's
            ``top_k``, at least :data:`~simtrain.sweep.search.DEFAULT_SIMULATE_TOP`).
        max_configs: refuse a sweep of more configurations (:mod:`simtrain.limits`).

    Raises:
        SpecError: bad sweep input, a non-empty store without resume/overwrite, Ray errors.
    """
    began = time.perf_counter()
    version = simtrain_version()
    # bad input raises here, before any I/O
    configurations = candidates(sweep, base, version, max_configs)
    total = count_points(sweep_groups(sweep, base))
    check_executor(executor, address)
    if simulate_top is not None and simulate_top < 1:
        raise SpecError(f"'--simulate-top' must be >= 1 (got {simulate_top})")
    top = simulate_top or max(sweep.top_k, DEFAULT_SIMULATE_TOP)
    results = open_store(store, resume, overwrite)
    seen: list[Candidate] = []
    counts: Counter[str] = Counter()
    estimates = Stage1()
    try:
        with _display(progress) as display:
            done = results.keys()
            if exhaustive:
                chosen = _every_pending(configurations, seen, display.stage("sweep", total))
            else:
                with cyclic_gc_paused():
                    chosen = _estimate_all(
                        sweep, configurations, seen, estimates, top,
                        display.stage("estimating", total),
                    )  # fmt: skip
            wanted = set(chosen)
            todo = {c.key: c.spec for c in seen if c.key in wanted and c.spec is not None}
            counts["from_store"] = sum(key in done for key in chosen)
            runner = get_executor(executor, num_workers, address)
            try:
                counts["evaluated"] = simulate_configurations(
                    todo, results, version, runner, display
                )
            finally:
                runner.close()
        stored = results.get_all()
        table = with_costs(_table(sweep, seen, stored, estimates.rows), seen, usd_per_gpu_hour)
    finally:
        results.close()
    counts.update(table["status"].value_counts().to_dict())
    summary = {"total": total, **{s: counts.get(s, 0) for s in STATUSES}}
    summary.update(from_store=counts["from_store"], evaluated=counts["evaluated"])
    summary["simulated"] = len(chosen)
    wall_s = time.perf_counter() - began
    return SweepResult(sweep, table, summary, wall_s, str(store), never_valid(seen))


def simulate_configurations(
    specs: dict[str, ExperimentSpec],
    results: ResultStore,
    version: str,
    runner: Executor,
    display: Progress,
) -> int:
    """Simulate every configuration the store does not hold yet; store each as it finishes.

    Returns how many were simulated now. Used by sweeps and by the planner (the caller
    closes ``runner``).
    """
    done = results.keys()
    todo = [key for key in specs if key not in done]
    advance = display.stage("simulating", len(todo))
    payloads = ((key, specs[key].model_dump(mode="json")) for key in todo)
    count = 0
    for key, row in runner.map_unordered(evaluate, payloads):
        results.put(key, version, row, specs[key].model_dump(mode="json"))
        count += 1
        advance()
    return count


def _display(progress: bool | Progress) -> Any:
    """The progress display to draw into: the caller's, a new one, or none."""
    if isinstance(progress, Progress):
        return nullcontext(progress)
    return progress_display(bool(progress))


def _every_pending(
    configurations: Iterable[Candidate], seen: list[Candidate], advance: Advance
) -> list[str]:
    """Exhaustive mode: every pending configuration's key, in enumeration order."""
    keys: dict[str, None] = {}
    for cand in configurations:
        seen.append(cand)
        advance()
        if cand.status == "pending" and cand.key is not None:
            keys[cand.key] = None
    return list(keys)


def _estimate_all(
    sweep: SweepSpec,
    configurations: Iterable[Candidate],
    seen: list[Candidate],
    estimates: Stage1,
    top: int,
    advance: Advance,
) -> list[str]:
    """Stage 1: memory verdict and estimate of every pending configuration; the best keys."""
    scored: list[tuple[str, str, float]] = []
    for cand in configurations:
        seen.append(cand)
        advance()
        if cand.status != "pending" or cand.key is None or cand.spec is None:
            continue
        fresh = cand.key not in estimates.rows
        row = estimates.evaluate(cand.key, cand.spec)
        if fresh and row["status"] == ESTIMATED:
            scored.append(("all", cand.key, float(row[sweep.metric])))
    return best_by_group(scored, top, sweep.ascending).get("all", [])


def open_store(store: str | Path, resume: bool, overwrite: bool) -> ResultStore:
    """Open the store; a non-empty one needs ``resume`` (continue) or ``overwrite`` (empty it).

    Raises:
        SpecError: the store holds results and neither flag is set.
    """
    results = ResultStore(store)
    if len(results) and not (resume or overwrite):
        held = len(results)
        results.close()
        raise SpecError(
            f"'--store' {store} already holds {held} results "
            "(pass --resume to continue that sweep, or --overwrite to start over)"
        )
    if overwrite and not resume:
        results.clear()
    elif resume:
        try:
            results.get_all()  # unreadable rows are an error now, not after the sweep has run
        except SpecError:
            results.close()
            raise
    return results


def _table(
    sweep: SweepSpec,
    seen: list[Candidate],
    rows: dict[str, dict[str, Any]],
    estimated: dict[str, dict[str, Any]],
) -> pd.DataFrame:
    """Rows in enumeration order: swept fields, verdict, metrics and the store key.

    A simulated configuration shows the simulation's metrics, an estimated one the
    estimate's (status ``estimated``); ``estimate_step_time_s`` is the estimate of both.
    """
    empty = dict.fromkeys(METRIC_COLUMNS)
    records = []
    for cand in seen:
        estimate = estimated.get(cand.key or "", {}) if cand.status == "pending" else {}
        stored = rows.get(cand.key or "") if cand.status == "pending" else None
        stored = stored or (estimate or None)
        verdict = (
            {"status": cand.status, "error": cand.reason}
            if stored is None
            else {"status": stored["status"], "error": stored.get("error", "")}
        )
        metrics = {k: (stored or {}).get(k) for k in METRIC_COLUMNS} if stored else empty
        if stored is None and cand.spec is not None:
            metrics = {**empty, "num_gpus": cand.spec.cluster.num_gpus}
        dp = cand.spec.parallel.dp if cand.spec is not None else None
        records.append(
            {"dp": dp, **cand.point, **verdict, **metrics,
             "estimate_step_time_s": estimate.get("estimate_step_time_s"),
             "wall_time_s": (stored or {}).get("wall_time_s"), "key": cand.key}
        )  # fmt: skip
    derived = [] if "parallel.dp" in sweep.swept_fields else ["dp"]
    columns = [*sweep.swept_fields, *derived, "status", "error", *METRIC_COLUMNS,
               "estimate_step_time_s", "wall_time_s", "key"]  # fmt: skip
    return pd.DataFrame.from_records(records, columns=columns)


def with_costs(
    table: pd.DataFrame, seen: list[Candidate], usd_per_gpu_hour: float | None
) -> pd.DataFrame:
    """Add ``usd_per_gpu_hour``, ``usd_per_hour`` and ``usd_per_million_tokens`` columns.

    The price is ``usd_per_gpu_hour`` when given, else the accelerator's dated preset
    (:func:`simtrain.catalog.prices.preset_price`); None where neither exists.
    """
    prices: dict[str, float | None] = {}
    for cand in seen:
        name = cand.spec.cluster.accelerator if cand.spec is not None else ""
        if name not in prices:
            prices[name] = (
                usd_per_gpu_hour if usd_per_gpu_hour is not None else preset_usd_per_gpu_hour(name)
            )
    table = table.copy()
    table["usd_per_gpu_hour"] = [
        prices[c.spec.cluster.accelerator if c.spec is not None else ""] for c in seen
    ]
    price = pd.to_numeric(table["usd_per_gpu_hour"], errors="coerce")
    gpus = pd.to_numeric(table["num_gpus"], errors="coerce")
    table["usd_per_hour"] = price * gpus
    tokens = pd.to_numeric(table["tokens_per_s"], errors="coerce")
    table["usd_per_million_tokens"] = table["usd_per_hour"] / 3600.0 / tokens * 1e6
    return table


def preset_usd_per_gpu_hour(accelerator: str) -> float | None:
    """The accelerator's dated catalog price, or None when the catalog has none."""
    if not accelerator:
        return None
    try:
        return preset_price(accelerator).usd_per_gpu_hour
    except SpecError:  # no dated price for this accelerator: no dollar columns
        return None


def sweep(
    spec: SweepSpec | str | Path,
    *,
    base: dict[str, Any] | None = None,
    store: str | Path = ":memory:",
    executor: str = "local",
    num_workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
) -> pd.DataFrame:
    """Run a sweep and return its table (one row per configuration, in enumeration order).

    Args:
        spec: a sweep YAML path, or a :class:`SweepSpec` (then ``base`` is its base
            experiment mapping, or the spec's inline ``base``).
        base: base experiment mapping for a SweepSpec whose ``base`` is a path.
        store: SQLite file for results; ``":memory:"`` keeps nothing.
        executor: ``local`` or ``ray``.
        num_workers: worker processes (default: all cores).
        address: Ray cluster address.
        resume: skip configurations the store already holds.

    Returns:
        The table; ``table.attrs["counts"]`` holds the configurations by status.

    Examples:
        >>> import simtrain
        >>> table = simtrain.sweep("experiments/sweeps/llama3-70b-1024.yaml")  # doctest: +SKIP
        >>> table[table.status == "ok"].sort_values("mfu").tail(1)  # doctest: +SKIP
    """
    if isinstance(spec, SweepSpec):
        if base is None:
            if not isinstance(spec.base, dict):
                raise SpecError("'base' must be given for a SweepSpec whose base is a file path")
            base = base_mapping(spec, Path.cwd())
        sweep_spec = spec
    else:
        sweep_spec, base = load_sweep(spec)
    result = run_sweep(
        sweep_spec,
        base,
        store=store,
        executor=executor,
        num_workers=num_workers,
        address=address,
        resume=resume,
    )
    result.table.attrs["counts"] = result.counts
    return result.table
