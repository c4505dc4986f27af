"""Core subcommands: run, validate, trace, list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from simtrain.cli.app import app, console, fail, show
from simtrain.limits import MAX_EVENTS, MAX_TASKS, MAX_TOPOLOGY_ELEMENTS, check_limit
from simtrain.paths import inside, make_dir, output_dir, output_file

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Override a spec field, e.g. --set parallel.tp=8 (repeatable; values parsed as YAML).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of tables.")]
MaxTasksOption = Annotated[
    int,
    typer.Option(
        "--max-tasks",
        help=f"Refuse a step estimated above this many tasks (default {MAX_TASKS:,}).",
    ),
]
MaxElementsOption = Annotated[
    int,
    typer.Option(
        "--max-topology-elements",
        help="Refuse a network estimated above this many devices, switches and links "
        f"(default {MAX_TOPOLOGY_ELEMENTS:,}).",
    ),
]
MaxEventsOption = Annotated[
    int,
    typer.Option(
        "--max-events",
        help="Refuse a reliability study estimated above this many events "
        f"(default {MAX_EVENTS:,}).",
    ),
]


@app.command(short_help="Simulate one training step of an experiment.")
def run(
    experiment: Annotated[Path, typer.Argument(metavar="EXPERIMENT", help="Experiment YAML file.")],
    overrides: SetOption = None,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Directory for report.json, report.md, PNGs and trace.json.",
        ),
    ] = None,
    as_json: JsonOption = False,
    full: Annotated[
        bool, typer.Option("--full", help="Simulate every rank (slower; for checking).")
    ] = False,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat",
            min=1,
            max=10_000,
            help="Replay N steps, each with its own seeded draw of rank speeds "
            "(simulation.variability), and report the step time's mean, p50, p99 and std.",
        ),
    ] = 1,
    max_tasks: MaxTasksOption = MAX_TASKS,
    max_topology_elements: MaxElementsOption = MAX_TOPOLOGY_ELEMENTS,
    max_events: MaxEventsOption = MAX_EVENTS,
) -> None:
    """Simulate one training step of EXPERIMENT and report step time, MFU, communication and memory.

    Example: simtrain run experiments/quickstart.yaml --set parallel.tp=4 --out out/quick
    """
    from simtrain.api import load_experiment, simulate
    from simtrain.report.terminal import breakdown_table, cost_table, memory_table, summary_table

    check_limit(max_tasks, "--max-tasks")
    check_limit(max_topology_elements, "--max-topology-elements")
    check_limit(max_events, "--max-events")
    if out is not None:
        out = output_dir(out, "--out")
    spec = load_experiment(experiment, overrides or [])
    result = simulate(
        spec,
        full=full or None,
        repeat=repeat,
        max_tasks=max_tasks,
        max_topology_elements=max_topology_elements,
    )
    report = result.summary()
    if spec.reliability is not None:
        from simtrain.reliability import reliability_summary

        report["reliability"] = reliability_summary(
            spec, result.step_time_s, result.model_state_bytes, max_events=max_events
        )
        from simtrain.metrics.cost import cost_summary

        ettr = report["reliability"]["ettr_mean"]
        report["cost"] = cost_summary(result, ettr, "reliability.ettr_mean (Monte Carlo)")
    if out is not None:
        from simtrain.report.files import write_report_files

        make_dir(out, "--out")
        inside(out, "report.json", "--out").write_text(json.dumps(report, indent=2) + "\n")
        write_report_files(result, out, report)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    show(summary_table(report), breakdown_table(report), memory_table(report), cost_table(report))
    if "step_time_s_mean" in report:
        console.print(
            f"step time over {report['step_time_repeats']} steps: mean "
            f"{report['step_time_s_mean']:.4g} s, p50 {report['step_time_s_p50']:.4g} s, "
            f"p99 {report['step_time_s_p99']:.4g} s, std {report['step_time_s_std']:.3g} s",
            markup=False,
            soft_wrap=True,
        )
    if out is not None:
        console.print(
            f"wrote {out}/: report.json, report.md, the PNGs and trace.json",
            markup=False,
            soft_wrap=True,  # a path is never broken across lines
        )


@app.command(short_help="Compare experiments with their published figures.")
def validate(
    directory: Annotated[
        Path,
        typer.Argument(metavar="DIRECTORY", help="Folder of experiments with 'expected:' blocks."),
    ],
    as_json: JsonOption = False,
) -> None:
    """Run every experiment in DIRECTORY that has an 'expected:' block and compare with it.

    Exits non-zero when any case is outside its tolerance.
    """
    from simtrain.report.progress import progress, stderr_is_terminal
    from simtrain.validation import run_validation, validation_cases

    if not directory.is_dir():
        raise fail(f"'{directory}' is not a directory")
    with progress(stderr_is_terminal()) as display:
        advance = display.stage("validating", len(validation_cases(directory)))
        rows = run_validation(directory, advance)
    if not rows:
        raise fail(f"no experiment with an 'expected:' block in '{directory}'")
    if as_json:
        typer.echo(json.dumps([row.to_dict() for row in rows], indent=2))
    else:
        from rich.table import Table

        table = Table(title=f"validation: {directory}", title_justify="left")
        for column in ("case", "metric", "published", "predicted", "error", "tolerance", "ok"):
            if column in ("case", "metric"):
                table.add_column(column, overflow="fold")
            else:
                table.add_column(column, justify="right", no_wrap=True)
        for row in rows:
            table.add_row(
                row.case,
                row.metric,
                f"{row.expected:.4g}",
                f"{row.predicted:.4g}",
                f"{row.rel_error:+.1%}",
                f"±{row.tolerance:.0%}",
                "yes" if row.within_tolerance else "NO",
            )
        show(table)
        bad = sum(not r.within_tolerance for r in rows)
        console.print(f"{len(rows) - bad} of {len(rows)} within tolerance")
    if any(not row.within_tolerance for row in rows):
        raise typer.Exit(1)


@app.command(short_help="Write an experiment's operator-level program.")
def trace(
    experiment: Annotated[Path, typer.Argument(metavar="EXPERIMENT", help="Experiment YAML file.")],
    out: Annotated[
        str, typer.Option("--out", metavar="PATH", help="Trace JSON file (directory for chakra).")
    ],
    overrides: SetOption = None,
    full: Annotated[bool, typer.Option("--full", help="Include every rank.")] = False,
    fmt: Annotated[
        str, typer.Option("--format", help="simtrain (one JSON file) or chakra (.et per rank).")
    ] = "simtrain",
    max_tasks: MaxTasksOption = MAX_TASKS,
) -> None:
    """Write the operator-level program of EXPERIMENT (every simulated rank) as a trace."""
    from simtrain.api import check_hardware, load_experiment
    from simtrain.limits import check_tasks
    from simtrain.parallel.builder import build_program
    from simtrain.parallel.trace import program_to_dict

    if fmt not in ("simtrain", "chakra"):
        raise fail(f"'--format' must be simtrain or chakra (got {fmt!r})")
    check_limit(max_tasks, "--max-tasks")
    out = output_dir(out, "--out") if fmt == "chakra" else output_file(out, "--out", ("json",))
    spec = load_experiment(experiment, overrides or [])
    check_hardware(spec)
    check_tasks(spec, full or None, max_tasks)
    program = build_program(spec, full=full or None)
    if fmt == "chakra":
        from simtrain.traceio.chakra_export import write_chakra

        files = write_chakra(program, out, spec.cluster.accelerator)
        console.print(
            f"wrote {out}/: {len(files)} Chakra rank files, {len(program.tasks)} tasks",
            markup=False,
            soft_wrap=True,
        )
        return
    make_dir(out.parent, "--out")
    out.write_text(json.dumps(program_to_dict(program, spec.model_dump(mode="json"))))
    ops = sum(len(t.ops) for t in program.tasks)
    console.print(
        f"wrote {out}: {len(program.tasks)} tasks, {ops} ops, {len(program.simulated_ranks)} ranks"
    )


LIST_KINDS = ("accelerators", "links", "frameworks", "workloads", "topologies")


@app.command(name="list", short_help="List the hardware catalog, stacks, workloads, topologies.")
def list_(
    what: Annotated[
        str,
        typer.Argument(
            metavar="WHAT", help="One of: accelerators, links, frameworks, workloads, topologies."
        ),
    ],
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME",
            help="With frameworks: one profile's fields and their sources only "
            "(without it, every profile's).",
        ),
    ] = None,
) -> None:
    """List built-in accelerators, links, framework profiles, workload files or topologies.

    Example: simtrain list frameworks torchtitan-2025
    """
    from simtrain.report.catalog_tables import catalog_tables

    if what not in LIST_KINDS:
        raise fail(f"'WHAT' must be one of {', '.join(LIST_KINDS)} (got {what!r})")
    if name is not None and what != "frameworks":
        raise fail(f"'NAME' must be left out with {what} (got {name!r}): it names a framework")
    for table in catalog_tables(what, name):
        show(table)
