"""``simtrain schedule``: replay a pipeline schedule with abstract stage times, for teaching.

Builds the schedule's action lists, replays them on the engine with fixed F/B/W durations and
prints the bubble fraction, step time and peak in-flight microbatches per stage (or JSON), and
optionally draws a Gantt chart (stages as rows, F/B/W coloured, labelled with microbatches).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.table import Table

from simtrain.cli.app import app, console, show
from simtrain.cli.values import integer, number
from simtrain.errors import SpecError
from simtrain.limits import MAX_LAYERS, MAX_SCHEDULE_TASKS, check_limit
from simtrain.parallel.program import Program
from simtrain.parallel.schedule_timing import (
    ScheduleMetrics,
    StageTimes,
    schedule_metrics,
    schedule_program,
)
from simtrain.parallel.schedules import SCHEDULES, build_schedule, format_grid
from simtrain.paths import image_file

# API argument names as the user typed them on the command line
_FLAGS = {
    "'num_microbatches'": "'--microbatches'",
    "'pp'": "'--pp'",
    "'vpp'": "'--vpp'",
    "'forward_s'": "'--t-f'",
    "'backward_s'": "'--t-b'",
    "'weight_s'": "'--t-w'",
    "'p2p_s'": "'--t-p2p'",
    "'schedule'": "'--schedule'",
}


def _closed_form(name: str, pp: int, m: int, vpp: int) -> tuple[str, float] | None:
    """Textbook bubble fraction of a schedule at equal stage times, where one exists."""
    if name in ("gpipe", "1f1b") or (name == "interleaved" and vpp == 1):
        return "(p-1)/(m+p-1)", (pp - 1) / (m + pp - 1)
    if name == "interleaved":
        return "(p-1)/(v·m+p-1)", (pp - 1) / (vpp * m + pp - 1)
    return None


def _draw_gantt(
    program: Program, start_s: Sequence[float], end_s: Sequence[float], title: str, path: Path
) -> None:
    """Save a Gantt chart of the replay: one row per stage, bars coloured by F/B/W."""
    from simtrain.report.gantt import gantt_figure

    ranks = program.simulated_ranks
    num_stages = 1 + max(t.stage for t in program.tasks)
    plain = all(t.stage == t.rank for t in program.tasks)
    labels = [f"{'stage' if plain else 'rank'} {r}" for r in ranks]
    fig = gantt_figure(
        program, start_s, end_s, ranks, labels, title, time_unit=None,
        chunks_per_rank=max(1, num_stages // len(ranks)),
    )  # fmt: skip
    fig.savefig(path, dpi=150)


def _table(metrics: ScheduleMetrics, program: Program) -> Table:
    from rich.table import Table

    table = Table(title="per stage")
    for column in ("stage", "busy", "idle", "bubble", "peak in-flight"):
        table.add_column(column, justify="right")
    step = metrics.step_time_s
    for r, idle, peak in zip(
        program.simulated_ranks,
        metrics.bubble_time_s,
        metrics.peak_inflight_microbatches,
        strict=True,
    ):
        table.add_row(str(r), f"{step - idle:g}", f"{idle:g}", f"{idle / step:.2%}", f"{peak:g}")
    return table


@app.command(short_help="Replay a pipeline schedule with abstract stage times.")
def schedule(
    name: Annotated[str, typer.Option("--schedule", help=f"Schedule: {', '.join(SCHEDULES)}.")],
    pp: Annotated[int, typer.Option("--pp", help="Pipeline stages (ranks).")],
    microbatches: Annotated[int, typer.Option("--microbatches", help="Microbatches per step.")],
    vpp: Annotated[
        int, typer.Option("--vpp", help="Model chunks per rank (interleaved only).")
    ] = 1,
    t_f: Annotated[
        float,
        typer.Option(
            "--t-f", help="Forward time of one stage (any unit; the step is in the same)."
        ),
    ] = 1.0,
    t_b: Annotated[
        float, typer.Option("--t-b", help="Full backward time of one stage (B + W).")
    ] = 2.0,
    t_w: Annotated[
        float, typer.Option("--t-w", help="Weight-gradient part of the backward (split W).")
    ] = 1.0,
    t_p2p: Annotated[
        float, typer.Option("--t-p2p", help="Transfer time between stages (0 = free).")
    ] = 0.0,
    out: Annotated[
        str | None,
        typer.Option("--out", metavar="FILE", help="Write the Gantt chart to this image file."),
    ] = None,
    grid: Annotated[bool, typer.Option("--grid", help="Also print the step × stage grid.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    max_tasks: Annotated[
        int,
        typer.Option(
            "--max-tasks",
            help=f"Refuse a schedule above this many F/B/W tasks (default {MAX_SCHEDULE_TASKS:,}).",
        ),
    ] = MAX_SCHEDULE_TASKS,
) -> None:
    """Replay a pipeline schedule with abstract stage times: bubble, step time, memory.

    Example: simtrain schedule --schedule interleaved --pp 4 --microbatches 8 --vpp 2 --out s.png
    """
    from simtrain.engine import run_program

    integer(pp, "--pp", 1, MAX_LAYERS, "a stage needs a layer")
    integer(microbatches, "--microbatches", 1, 1 << 24, "as parallel.global_batch_size")
    integer(vpp, "--vpp", 1, MAX_LAYERS, "a model chunk needs a layer")
    for flag, value in (("--t-f", t_f), ("--t-b", t_b), ("--t-w", t_w), ("--t-p2p", t_p2p)):
        number(value, flag, 0, 1e9, "abstract time units; 1e9 is beyond any ratio of interest")
    check_limit(max_tasks, "--max-tasks")
    tasks = 3 * pp * vpp * microbatches
    if tasks > max_tasks:
        raise SpecError(
            f"the schedule's tasks must be at most {max_tasks:,} (got {tasks:,}: 3 x {pp:,} "
            f"stages x {vpp:,} chunks x {microbatches:,} microbatches); raise the limit with "
            f"--max-tasks {tasks}"
        )
    if out is not None:
        out = image_file(out, "--out")
    try:
        actions = build_schedule(name, pp, microbatches, vpp)
        times = StageTimes(forward_s=t_f, backward_s=t_b, weight_s=t_w, p2p_s=t_p2p)
    except SpecError as exc:
        message = str(exc)
        for api, flag in _FLAGS.items():
            message = message.replace(api, flag)
        raise SpecError(message) from None
    program = schedule_program(actions, times)
    result = run_program(program)
    metrics = schedule_metrics(program, result.start_s, result.end_s)
    closed = _closed_form(name, pp, microbatches, vpp)
    title = (
        f"{name}  p={pp} m={microbatches}"
        + (f" v={vpp}" if vpp > 1 else "")
        + f"  step {metrics.step_time_s:g}  bubble {metrics.bubble_fraction:.1%}"
    )
    if out is not None:
        _draw_gantt(program, result.start_s, result.end_s, title, out)
    if as_json:
        report = {
            "schedule": name,
            "pp": pp,
            "microbatches": microbatches,
            "vpp": vpp,
            "t_f": t_f,
            "t_b": t_b,
            "t_w": t_w,
            "t_p2p": t_p2p,
            "bubble_fraction": metrics.bubble_fraction,
            "step_time": metrics.step_time_s,
            "bubble_time": list(metrics.bubble_time_s),
            "peak_inflight_microbatches": [
                int(x) if float(x).is_integer() else x for x in metrics.peak_inflight_microbatches
            ],
        }
        typer.echo(json.dumps(report, indent=2))
        return
    if grid:
        console.print(format_grid(actions), markup=False, highlight=False)
    show(_table(metrics, program))
    summary = title
    if closed is not None:
        summary += f"  (closed form {closed[0]} = {closed[1]:.1%})"
    console.print(summary, markup=False, highlight=False)
    if out is not None:
        console.print(
            f"Gantt chart written to {out}", markup=False, highlight=False, soft_wrap=True
        )
