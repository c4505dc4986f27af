"""``simtrain reliability``: compare checkpoint/recovery policies over a whole training run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.table import Table

from simtrain.cli.app import app, fail, show
from simtrain.cli.commands_core import MaxEventsOption
from simtrain.cli.values import integer
from simtrain.limits import MAX_EVENTS, check_limit

MAX_POLICIES = 64
"""Most policies compared at once (there are eight; repeats are allowed)."""

DEFAULT_POLICIES = (
    "spec,sync-hourly,sync-young-daly,snapshot,in-memory,elastic,live-migration,redundant"
)


@app.command(short_help="Compare checkpoint/recovery policies over a whole run.")
def reliability(
    experiment: Annotated[Path, typer.Argument(metavar="EXPERIMENT", help="Experiment YAML file.")],
    policies: Annotated[
        str,
        typer.Option(
            "--policies",
            help="Comma-separated policy names ('spec' is the experiment's own section).",
        ),
    ] = DEFAULT_POLICIES,
    runs: Annotated[
        int | None,
        typer.Option("--runs", help="Monte Carlo runs per policy (default: reliability.num_runs)."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Random seed (default: the experiment's seed).")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Override a spec field, e.g. --set reliability.num_runs=20 (repeatable).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list, one object per policy.")
    ] = False,
    max_events: MaxEventsOption = MAX_EVENTS,
) -> None:
    """Simulate EXPERIMENT's whole run under several checkpoint/recovery policies.

    Reports ETTR with its 95 % interval, wall-clock days, interruptions, GPU-hours lost and
    cost. Example: simtrain reliability experiments/reliability/llama3-405b.yaml --runs 20
    """
    from simtrain.api import simulate
    from simtrain.reliability import JSON_KEYS, compare_policies, get_policy
    from simtrain.reliability.summary import require_reliability
    from simtrain.report.progress import progress, stderr_is_terminal
    from simtrain.specs.loader import load_experiment

    names = [name.strip() for name in policies.split(",") if name.strip()]
    if not names or len(names) > MAX_POLICIES:
        raise fail(
            f"'--policies' must name 1 to {MAX_POLICIES} policies (got {len(names)} in "
            f"{policies[:60]!r})"
        )
    for name in names:
        get_policy(name)  # unknown names fail before the (slower) step simulation
    integer(runs, "--runs", 1, 1 << 20, "a million runs pin ETTR to 0.1%")
    integer(seed, "--seed", 0, 2**63 - 1, "a signed 64-bit integer")
    check_limit(max_events, "--max-events")
    spec = load_experiment(experiment, overrides or [])
    num_runs = runs or require_reliability(spec).num_runs
    with progress(stderr_is_terminal()) as display:
        step = display.stage("simulating a step", 1)
        result = simulate(spec)
        step()
        rows = compare_policies(
            spec,
            result.step_time_s,
            result.model_state_bytes,
            names,
            num_runs,
            spec.seed if seed is None else seed,
            max_events=max_events,
            progress=display.stage(f"policies x {num_runs} runs", len(names)),
        )
    if as_json:
        typer.echo(json.dumps([{k: row[k] for k in JSON_KEYS} for row in rows], indent=2))
        return
    show(policy_table(rows, f"{spec.name}: step {result.step_time_s:.2f} s"))


def policy_table(rows: list[dict], title: str) -> Table:
    """Terminal table of a policy comparison."""
    from rich.table import Table

    table = Table(title=title)
    for column in (
        "policy",
        "ETTR (95% CI)",
        "wall days",
        "interruptions",
        "GPU-h lost",
        "cost $M",
        "lost $M",
        "ckpt every s",
    ):
        if column == "policy":
            table.add_column(column, no_wrap=True)
        else:
            table.add_column(column, justify="right")
    for row in rows:
        lo, hi = row["ettr_ci95"]
        table.add_row(
            row["policy"],
            f"{row['ettr_mean']:.3f} [{lo:.3f}, {hi:.3f}]",
            f"{row['wall_days_mean']:.1f}",
            f"{row['interruptions_mean']:.0f}",
            f"{row['gpu_hours_lost_mean']:,.0f}",
            f"{row['cost_usd_mean'] / 1e6:.2f}",
            f"{row['lost_cost_usd_mean'] / 1e6:.2f}",
            f"{row['checkpoint_interval_s']:.0f}",
        )
    return table
