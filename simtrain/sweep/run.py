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
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from simtrain.api import simtrain_version
from simtrain.catalog.prices import preset_price
from simtrain.errors import SpecError
from simtrain.limits import MAX_CONFIGS
from simtrain.specs.sweep import SweepSpec, base_mapping, load_sweep
from simtrain.sweep.enumerate import Candidate, candidates, count_points, sweep_groups
from simtrain.sweep.evaluate import METRIC_COLUMNS, evaluate
from simtrain.sweep.executors import check_executor, get_executor
from simtrain.sweep.store import ResultStore

STATUSES: tuple[str, ...] = ("ok", "oom", "invalid", "constraint", "error")
"""Row statuses: simulated, pruned by memory / by the spec's rules / by a constraint, failed."""


@dataclass
class SweepResult:
    """A finished (or resumed-to-completion) sweep.

    Attributes:
        sweep: the sweep spec.
        table: one row per configuration, in enumeration order: swept fields, the derived
            ``dp``, ``status``, ``error``, the metrics, cost columns and the store ``key``.
        counts: configurations by status, plus ``total``, ``from_store`` (found done) and
            ``evaluated`` (run now).
        wall_time_s: driver wall time.
        store_path: the SQLite store.
    """

    sweep: SweepSpec
    table: pd.DataFrame
    counts: dict[str, int] = field(default_factory=dict)
    wall_time_s: float = 0.0
    store_path: str = ":memory:"

    def ranked(self) -> pd.DataFrame:
        """Simulated rows, best first by the sweep's metric."""
        done = self.table[self.table["status"] == "ok"]
        return done.sort_values(self.sweep.metric, ascending=self.sweep.ascending, kind="stable")


def _progress(enabled: bool) -> Progress | nullcontext[None]:
    if not enabled:
        return nullcontext()
    return Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        transient=True,
    )


def _advance(bar: Progress | None, task: Any) -> None:
    if bar is not None:
        bar.advance(task)


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
    progress: bool = False,
    usd_per_gpu_hour: float | None = None,
    max_configs: int = MAX_CONFIGS,
) -> SweepResult:
    """Run every configuration of ``sweep`` not already in the store, and tabulate all.

    Args:
        sweep: the sweep spec.
        base: the base experiment mapping (:func:`~simtrain.specs.sweep.load_sweep`).
        store: SQLite file for results (``":memory:"`` keeps nothing after the call).
        executor: ``local`` (process pool) or ``ray``.
        num_workers: worker processes (local; default all cores) or Ray CPUs for a local Ray.
        address: Ray cluster address (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``).
        resume: skip configurations the store already holds.
        overwrite: empty a non-empty store first instead of refusing.
        progress: show a progress bar with ETA on the terminal.
        usd_per_gpu_hour: price for the cost columns; default the accelerator's preset.
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
    results = open_store(store, resume, overwrite)
    try:
        seen: list[Candidate] = []
        counts: Counter[str] = Counter()
        with _progress(progress) as bar:
            task = bar.add_task("sweep", total=total) if bar is not None else None
            done = results.keys()
            queued: set[str] = set()
            payloads: dict[str, dict[str, Any]] = {}

            def pending() -> Iterator[tuple[str, dict[str, Any]]]:
                for cand in configurations:
                    seen.append(cand)
                    if cand.spec is None or cand.key is None or cand.status != "pending":
                        _advance(bar, task)
                    elif cand.key in done or cand.key in queued:
                        counts["from_store"] += cand.key in done
                        _advance(bar, task)
                    else:
                        queued.add(cand.key)
                        payloads[cand.key] = cand.spec.model_dump(mode="json")
                        yield cand.key, payloads[cand.key]

            runner = get_executor(executor, num_workers, address)
            try:
                for key, row in runner.map_unordered(evaluate, pending()):
                    results.put(key, version, row, payloads.pop(key))
                    counts["evaluated"] += 1
                    _advance(bar, task)
            finally:
                runner.close()
        table = with_costs(_table(sweep, seen, results.get_all()), seen, usd_per_gpu_hour)
    finally:
        results.close()
    counts.update(table["status"].value_counts().to_dict())
    summary = {"total": total, **{s: counts.get(s, 0) for s in STATUSES}}
    summary.update(from_store=counts["from_store"], evaluated=counts["evaluated"])
    return SweepResult(sweep, table, summary, time.perf_counter() - began, str(store))


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
    sweep: SweepSpec, seen: list[Candidate], rows: dict[str, dict[str, Any]]
) -> pd.DataFrame:
    """Rows in enumeration order: swept fields, verdict, metrics and the store key."""
    empty = dict.fromkeys(METRIC_COLUMNS)
    records = []
    for cand in seen:
        stored = rows.get(cand.key or "") if cand.status == "pending" else None
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
             "wall_time_s": (stored or {}).get("wall_time_s"), "key": cand.key}
        )  # fmt: skip
    derived = [] if "parallel.dp" in sweep.swept_fields else ["dp"]
    columns = [*sweep.swept_fields, *derived, "status", "error", *METRIC_COLUMNS, "wall_time_s",
               "key"]  # fmt: skip
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
