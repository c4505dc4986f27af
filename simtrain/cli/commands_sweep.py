"""Sweep and planning subcommands: ``simtrain sweep`` and ``simtrain plan``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.table import Table

from simtrain.cli.app import app, console, err_console, fail, show
from simtrain.cli.values import integer, number
from simtrain.limits import MAX_CONFIGS, MAX_DEVICES, MAX_DEVICES_WHY, check_limit
from simtrain.paths import image_file, make_dir, output_file, safe_file_name, store_file

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of tables.")]
ExecutorOption = Annotated[
    str, typer.Option("--executor", help="Where configurations run: local (processes) or ray.")
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        "--address", help="Ray cluster to join: auto, HOST:PORT or ray://HOST:PORT (with ray)."
    ),
]
WorkersOption = Annotated[
    int | None, typer.Option("--workers", min=1, help="Worker processes (default: all cores).")
]
PriceOption = Annotated[
    float | None,
    typer.Option(
        "--usd-per-gpu-hour", min=0, help="Price for the $ columns (default: catalog preset)."
    ),
]
ExhaustiveOption = Annotated[
    bool,
    typer.Option(
        "--exhaustive", help="Simulate every feasible configuration (no analytical pre-pass)."
    ),
]
SimulateTopOption = Annotated[
    int | None,
    typer.Option(
        "--simulate-top",
        min=1,
        help="Configurations to simulate after the analytical estimate (the best by it).",
    ),
]
JSON_ROW_KEYS: tuple[str, ...] = ("step_time_s", "mfu", "fits", "status")
"""Keys of each ``simtrain sweep --json`` row after the swept fields (issue 8)."""


def check_values(workers: int | None, top: int | None, usd_per_gpu_hour: float | None) -> None:
    """Ranges of the options shared by ``sweep`` and ``plan``."""
    integer(workers, "--workers", 1, 1024, "processes on one machine")
    integer(top, "--top", 1, 10_000, "a table longer than 10,000 rows is a file")
    number(usd_per_gpu_hour, "--usd-per-gpu-hour", 0, 1000, "100x the highest GPU price")


def require_a_valid_configuration(spec: Any, base: dict[str, Any], max_configs: int) -> None:
    """Refuse a sweep none of whose configurations is a valid experiment (a broken base).

    Stops at the first valid configuration, so a normal sweep pays for one validation.
    """
    from simtrain.api import simtrain_version
    from simtrain.errors import SpecError
    from simtrain.sweep.enumerate import candidates

    first_reason, total = "", 0
    for cand in candidates(spec, base, simtrain_version(), max_configs):
        if cand.status != "invalid":
            return
        first_reason, total = first_reason or cand.reason, total + 1
    raise SpecError(
        f"the sweep's configurations must include a valid experiment (got {total} invalid "
        f"ones; the first: {first_reason})"
    )


def _plain(value: Any) -> Any:
    """JSON-ready scalar: numpy numbers to Python, NaN to None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


_SHORT_NAMES = {
    "micro_batch_size": "mbs",
    "zero_stage": "zero",
    "recompute": "recomp",
    "pipeline_schedule": "sched",
    "global_batch_size": "gbs",
    "num_gpus": "gpus",
}


def _short(field: str) -> str:
    """Column header of a swept field: its last part, abbreviated where long."""
    name = field.rpartition(".")[2]
    return _SHORT_NAMES.get(name, name)


def _fmt(value: Any) -> str:
    """A swept value: integers with thousands separators, floats to 4 significant digits."""
    value = _plain(value)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)


def _fixed(value: Any, decimals: int) -> str:
    """A metric with a fixed number of decimals and thousands separators; '-' when missing."""
    value = _plain(value)
    return "-" if value is None else f"{value:,.{decimals}f}"


def top_table(result: Any, k: int) -> Table:
    """The k best simulated configurations by the sweep's metric."""
    from rich.table import Table

    sweep = result.sweep
    table = Table(title=f"top {k} of {sweep.name} by {sweep.metric}")
    fields = [*sweep.swept_fields, *(["dp"] if "dp" in result.table else [])]
    for name in ["#", *map(_short, fields), "step s", "tokens/s", "MFU", "GB", "$/Mtok"]:
        table.add_column(name, justify="right", no_wrap=True)
    for rank, (_, row) in enumerate(result.ranked().head(k).iterrows(), start=1):
        table.add_row(
            str(rank),
            *(_fmt(row[f]) for f in fields),
            _fixed(row["step_time_s"], 3),
            _fixed(row["tokens_per_s"], 0),
            f"{row['mfu']:.1%}",
            _fixed(row["peak_memory_bytes"] / 1e9, 1),
            _fixed(row["usd_per_million_tokens"], 2),
        )
    return table


def counts_line(result: Any) -> str:
    """Configurations enumerated, pruned, estimated and simulated; the store; wall time.

    Pruned configurations are never simulated: invalid degrees and constraints are judged
    while enumerating, out-of-memory by the analytical memory estimate. The others are timed
    by the analytical estimator, and the best of them simulated (all with --exhaustive).
    """
    c = result.counts
    pruned = c["invalid"] + c["constraint"] + c["oom"]
    estimated = c["estimated"] + c["simulated"]
    stage = f"{estimated:,} estimated analytically, " if c["estimated"] else ""
    return (
        f"{c['total']:,} configurations: {pruned:,} pruned without simulating "
        f"({c['invalid']:,} invalid, {c['constraint']:,} by constraints, {c['oom']:,} out of "
        f"memory by the estimate), {stage}{c['ok']:,} simulated, {c['error']:,} failed; "
        f"{c['evaluated']:,} simulated in this run, {c['from_store']:,} found in the store; "
        f"{result.wall_time_s:.1f} s\nstore: {result.store_path}"
        + "".join(f"\n{message}" for message in result.never_valid)
    )


def default_store(out: Path | None, sweep_name: str) -> Path:
    """Where results go without --store: beside --out, else .simtrain/ in the working directory.

    Examples:
        >>> default_store(Path("out/70b.csv"), "x").as_posix(), default_store(None, "x").as_posix()
        ('out/70b.sqlite', '.simtrain/x.sqlite')
    """
    if out is not None:
        return out.with_suffix(".sqlite")
    return Path(".simtrain") / f"{sweep_name}.sqlite"


def write_table(table: Any, out: Path) -> None:
    """Write the result table as CSV or Parquet, by the file suffix."""
    make_dir(out.parent, "--out")
    if out.suffix == ".csv":
        table.to_csv(out, index=False)
    elif out.suffix == ".parquet":
        try:
            table.to_parquet(out, index=False)
        except ImportError:
            raise fail("'--out' .parquet needs pyarrow: pip install 'simtrain[parquet]'") from None
    else:
        raise fail(f"'--out' must end in .csv or .parquet (got {out.name!r})")


@app.command(short_help="Estimate, simulate and rank a sweep's configurations.")
def sweep(
    sweep_file: Annotated[Path, typer.Argument(metavar="SWEEP_FILE", help="Sweep YAML file.")],
    executor: ExecutorOption = "local",
    address: AddressOption = None,
    workers: WorkersOption = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="FILE",
            help="SQLite result store (default: beside --out as <out>.sqlite, else "
            ".simtrain/<sweep name>.sqlite in the working directory).",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Skip configurations the store already holds.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Empty a non-empty store and start over.")
    ] = False,
    out: Annotated[
        str | None,
        typer.Option("--out", metavar="FILE", help="Write every row to results.csv or .parquet."),
    ] = None,
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot",
            metavar="FILE",
            help="Save the Pareto-front plot (PNG/SVG/PDF; default: beside --out as "
            "<out>-pareto.png).",
        ),
    ] = None,
    top: Annotated[
        int | None, typer.Option("--top", min=1, help="Rows of the ranked table (default: top_k).")
    ] = None,
    usd_per_gpu_hour: PriceOption = None,
    exhaustive: ExhaustiveOption = False,
    simulate_top: SimulateTopOption = None,
    as_json: JsonOption = False,
    max_configs: Annotated[
        int,
        typer.Option(
            "--max-configs",
            help=f"Refuse a sweep of more configurations than this (default {MAX_CONFIGS:,}).",
        ),
    ] = MAX_CONFIGS,
) -> None:
    """Estimate every feasible configuration of SWEEP_FILE, simulate the best, rank them.

    Every configuration that passes the spec's rules, the constraints and the memory check
    is timed by the analytical estimator (which agrees with the simulator); the best by the
    estimate are simulated (--simulate-top, default the sweep's top_k, at least 8), or all
    with --exhaustive. Simulated results are stored as each finishes; after a Ctrl-C or a
    crash, rerun with --resume to continue. Example:
    simtrain sweep experiments/sweeps/llama3-70b-1024.yaml --out out/70b.csv
    (writes out/70b.csv, the store out/70b.sqlite and the plot out/70b-pareto.png)
    """
    from simtrain.report.progress import stderr_is_terminal
    from simtrain.specs.sweep import load_sweep
    from simtrain.sweep import run_sweep
    from simtrain.sweep.pareto import plot_pareto

    check_values(workers, top, usd_per_gpu_hour)
    check_limit(max_configs, "--max-configs")
    if out is not None:
        out = output_file(out, "--out", ("csv", "parquet"))
    if plot is not None:
        plot = image_file(plot, "--plot")
    if store is not None:
        store = store_file(store, "--store")
    spec, base = load_sweep(sweep_file)
    require_a_valid_configuration(spec, base, max_configs)
    store_path = store or store_file(default_store(out, safe_file_name(spec.name)), "--store")
    if plot is None and out is not None:
        plot = out.with_name(f"{out.stem}-pareto.png")
    try:
        result = run_sweep(
            spec,
            base,
            store=store_path,
            executor=executor,
            num_workers=workers,
            address=address,
            resume=resume,
            overwrite=overwrite,
            progress=stderr_is_terminal(),
            usd_per_gpu_hour=usd_per_gpu_hour,
            exhaustive=exhaustive,
            simulate_top=simulate_top,
            max_configs=max_configs,
        )
    except KeyboardInterrupt:
        raise fail(
            f"interrupted; finished simulations are saved in {store_path} "
            "(rerun with --resume to continue)",
            130,
        ) from None
    if out is not None:
        write_table(result.table, out)
    no_plot = None
    if (
        plot is not None
        and plot_pareto(result.table, plot, title=f"{spec.name}: Pareto fronts") is None
    ):
        no_plot = (
            f"no Pareto plot: every simulated configuration has the same GPU count, memory "
            f"headroom and price (nothing to trade off), so {plot} was not written"
        )
        plot = None
    if as_json:
        rows = [
            {
                **{f: _plain(r[f]) for f in spec.swept_fields},
                **{k: _plain(r[k]) for k in JSON_ROW_KEYS},
            }
            for _, r in result.table.iterrows()
        ]
        typer.echo(json.dumps(rows, indent=1))
        err_console.print(counts_line(result), markup=False)
        return
    console.print(counts_line(result), markup=False, highlight=False)
    show(top_table(result, top or spec.top_k))
    written = [str(p) for p in (out, plot) if p is not None]
    if written:
        console.print(f"wrote {', '.join(written)}", markup=False, soft_wrap=True)
    if no_plot:
        console.print(no_plot, markup=False)


PLAN_JSON_KEYS: tuple[str, ...] = ("num_gpus", "parallel", "days", "cost_usd")
"""Keys of ``simtrain plan --json`` (issue 8); alternatives carry the same keys."""


def _plan_json(option: Any) -> dict[str, Any] | None:
    if option is None:
        return None
    full = option.to_dict()
    return {**{k: full[k] for k in PLAN_JSON_KEYS}, **full}


def _schedule(p: dict[str, Any]) -> str:
    """Short schedule name: 1f1b, i2 (interleaved, 2 virtual stages), zb-h1, dualpipe."""
    if p["pp"] == 1:
        return "-"
    return f"i{p['vpp']}" if p["pipeline_schedule"] == "interleaved" else p["pipeline_schedule"]


def plan_table(result: Any) -> Table:
    """Every cluster size tried with its best layout and whole-run figures."""
    from rich.table import Table

    from simtrain.sweep.planner import format_days, format_usd

    stacks = len({o.framework for o in result.options}) > 1
    table = Table(title="plans: best layout of each cluster size")
    for name in ["GPUs", *(["stack"] if stacks else []), "tp", "pp", "sched", "cp", "dp",
                 "zero", "mbs", "recomp", "MFU", "goodput", "days", "cost", "pick"]:  # fmt: skip
        table.add_column(name, justify="right")
    for o in result.options:
        p = o.parallel
        picks = [n for n, pick in (("cheapest", result.cheapest), ("fastest", result.fastest))
                 if pick is o]  # fmt: skip
        table.add_row(
            f"{o.num_gpus:,}", *([o.framework] if stacks else []), str(p["tp"]), str(p["pp"]),
            _schedule(p), str(p["cp"]), str(p["dp"]), str(p["zero_stage"]),
            str(p["micro_batch_size"]), p["recompute"],
            f"{o.mfu:.1%}" + ("" if o.simulated else "*"), f"{o.goodput:.1%}",
            format_days(o.days) + ("" if o.meets_deadline else " (late)"),
            format_usd(o.cost_usd), ", ".join(picks),
        )  # fmt: skip
    return table


def plan_counts_line(result: Any) -> str:
    """One line: layouts enumerated, pruned, estimated and simulated; wall time."""
    c = result.counts
    return (
        f"searched {c['enumerated']:,} layouts on {len(result.inputs['sizes'])} cluster "
        f"size{'s' if len(result.inputs['sizes']) > 1 else ''}: "
        f"{c['invalid']:,} invalid, {c['estimated']:,} estimated analytically "
        f"({c['bounded']:,} more skipped by a bound), "
        f"{c['memory_checked']:,} checked for memory ({c['oom']:,} out of memory), "
        f"{c['simulated']:,} simulated ({c['from_store']:,} from the store); "
        f"{result.wall_time_s:.1f} s"
    )


@app.command(short_help="Cheapest cluster and layout for a model by a deadline.")
def plan(
    model: Annotated[str, typer.Option("--model", help="Workload preset or YAML with 'model'.")],
    tokens: Annotated[float, typer.Option("--tokens", help="Training tokens, e.g. 15.6e12.")],
    deadline_days: Annotated[
        float, typer.Option("--deadline-days", help="Wall-clock days allowed (failures included).")
    ],
    accelerator: Annotated[str, typer.Option("--accelerator", help="Catalog accelerator.")],
    budget_usd: Annotated[
        float | None, typer.Option("--budget-usd", help="Dollars allowed (default: no limit).")
    ] = None,
    max_gpus: Annotated[
        int | None, typer.Option("--max-gpus", min=1, help="Largest cluster to consider.")
    ] = None,
    topology: Annotated[
        str | None,
        typer.Option("--topology", metavar="FILE", help="Topology preset or YAML with 'cluster'."),
    ] = None,
    usd_per_gpu_hour: PriceOption = None,
    batch_tokens: Annotated[
        float, typer.Option("--batch-tokens", help="Target tokens per optimizer step.")
    ] = 16 * 2**20,
    no_failures: Annotated[
        bool, typer.Option("--no-failures", help="Plan a failure-free run (goodput 1).")
    ] = False,
    executor: ExecutorOption = "local",
    address: AddressOption = None,
    workers: WorkersOption = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="FILE",
            help="SQLite store of the simulated layouts (emptied unless --resume).",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Reuse the simulations the store already holds.")
    ] = False,
    spares: Annotated[
        str,
        typer.Option(
            "--spares",
            help="Hot spare nodes held and billed: a count (4), a percentage of the job's "
            "nodes (2%), or auto: enough that a failed node finds one 99.9% of the time.",
        ),
    ] = "auto",
    exhaustive: ExhaustiveOption = False,
    simulate_top: Annotated[
        int,
        typer.Option(
            "--simulate-top",
            min=1,
            help="Layouts simulated per cluster size: the best by the analytical estimate.",
        ),
    ] = 2,
    frameworks: Annotated[
        str | None,
        typer.Option(
            "--frameworks",
            help="Software stacks to search, comma-separated, or all (default: megatron-core, "
            "the default profile); see simtrain list frameworks.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Find the cheapest cluster and layout that trains MODEL on TOKENS within the deadline.

    Every layout (tp, pp and schedule, cp, ep, ZeRO/FSDP, micro-batch, recompute) of each
    cluster size is timed by the analytical estimator; the best that fit in memory are
    simulated. Also shows the fastest plan within the budget and the other sizes. Example:
    simtrain plan --model llama3-405b --tokens 15.6e12 --deadline-days 60
    --accelerator H100-SXM
    """
    from simtrain.report.progress import progress, stderr_is_terminal
    from simtrain.sweep.planner import plan as make_plan
    from simtrain.sweep.space import LayoutSpace, frameworks_to_search

    stacks = frameworks_to_search(frameworks)

    number(tokens, "--tokens", 0, 1e16, "600x the largest published run", above=True)
    number(deadline_days, "--deadline-days", 0, 1e4, "about 27 years", above=True)
    number(budget_usd, "--budget-usd", 0, 1e13, "ten trillion dollars")
    integer(max_gpus, "--max-gpus", 1, MAX_DEVICES, MAX_DEVICES_WHY)
    number(batch_tokens, "--batch-tokens", 0, 2**40, "a trillion tokens per step", above=True)
    check_values(workers, None, usd_per_gpu_hour)
    if store is not None:
        store = store_file(store, "--store")
    try:
        with progress(stderr_is_terminal()) as display:
            result = make_plan(
                model,
                tokens,
                deadline_days,
                accelerator,
                budget_usd=budget_usd,
                max_gpus=max_gpus,
                topology=topology,
                usd_per_gpu_hour=usd_per_gpu_hour,
                batch_tokens=batch_tokens,
                failure_preset=None if no_failures else "llama3-405b",
                executor=executor,
                num_workers=workers,
                address=address,
                store=str(store) if store is not None else ":memory:",
                resume=resume,
                progress=display,
                spares=spares,
                exhaustive=exhaustive,
                simulate_top=simulate_top,
                space=LayoutSpace(frameworks=stacks),
            )
    except KeyboardInterrupt:
        hint = f" (rerun with --store {store} --resume to continue)" if store else ""
        raise fail(f"interrupted{hint}", 130) from None
    if not result.options:
        raise fail(result.advice, 1)
    chosen = result.cheapest or result.fastest
    if as_json:
        out = _plan_json(chosen) or {}
        out.update(
            fastest_within_budget=_plan_json(result.fastest),
            alternatives=[_plan_json(o) for o in result.alternatives],
            usd_per_gpu_hour=result.usd_per_gpu_hour,
            search={
                **result.counts,
                "wall_time_s": result.wall_time_s,
                "stage_wall_s": result.stage_wall_s,
            },
            advice=result.advice,
        )
        typer.echo(json.dumps(out, indent=1))
    else:
        from simtrain.sweep.planner import format_days, format_usd

        console.print(plan_counts_line(result), markup=False, highlight=False)
        show(plan_table(result))
        if not all(o.simulated for o in result.options):
            console.print(
                "* estimated analytically; the picks are simulated (--exhaustive simulates "
                "every size)",
                markup=False,
                highlight=False,
            )
        for label, o in (("cheapest meeting the deadline", result.cheapest),
                         ("fastest within the budget", result.fastest)):  # fmt: skip
            if o is not None:
                p = o.parallel
                console.print(
                    f"{label}: {o.num_gpus:,} GPUs ({o.framework}), tp={p['tp']} pp={p['pp']} "
                    f"vpp={p['vpp']} "
                    f"cp={p['cp']} dp={p['dp']} zero={p['zero_stage']} "
                    f"mbs={p['micro_batch_size']} recompute={p['recompute']}, "
                    f"{format_days(o.days)} days, {format_usd(o.cost_usd)} "
                    f"({o.spare_nodes} spare nodes)",
                    markup=False,
                )
    if result.cheapest is None:
        within = " within the budget" if budget_usd is not None else ""
        reason = f": {result.advice}" if result.advice else ""
        raise fail(f"no plan meets the {deadline_days:g}-day deadline{within}{reason}", 1)
