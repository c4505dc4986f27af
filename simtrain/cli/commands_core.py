"""Core subcommands: run, validate, trace, list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from simtrain.cli.app import app, console, fail, show

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Override a spec field, e.g. --set parallel.tp=8 (repeatable; values parsed as YAML).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of tables.")]


@app.command()
def run(
    experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
    overrides: SetOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Directory for report.json, report.md, PNGs and trace.json."),
    ] = None,
    as_json: JsonOption = False,
    full: Annotated[
        bool, typer.Option("--full", help="Simulate every rank (slower; for checking).")
    ] = False,
) -> None:
    """Simulate one training step of EXPERIMENT and report step time, MFU, communication and memory.

    Example: simtrain run experiments/quickstart.yaml --set parallel.tp=2 --out out/quick
    """
    from simtrain.api import load_experiment, simulate
    from simtrain.report.terminal import breakdown_table, cost_table, memory_table, summary_table

    spec = load_experiment(experiment, overrides or [])
    result = simulate(spec, full=full or None)
    report = result.summary()
    if spec.reliability is not None:
        from simtrain.reliability import reliability_summary

        report["reliability"] = reliability_summary(
            spec, result.step_time_s, result.model_state_bytes
        )
        from simtrain.metrics.cost import cost_summary

        ettr = report["reliability"]["ettr_mean"]
        report["cost"] = cost_summary(result, ettr, "reliability.ettr_mean (Monte Carlo)")
    if out is not None:
        from simtrain.report.files import write_report_files

        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        write_report_files(result, out, report)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    show(summary_table(report), breakdown_table(report), memory_table(report), cost_table(report))
    if out is not None:
        console.print(
            f"wrote {out}/: report.json, report.md, the PNGs and trace.json",
            markup=False,
            soft_wrap=True,  # a path is never broken across lines
        )


@app.command()
def validate(
    directory: Annotated[
        Path, typer.Argument(help="Folder of experiments with 'expected:' blocks.")
    ],
    as_json: JsonOption = False,
) -> None:
    """Run every experiment in DIRECTORY that has an 'expected:' block and compare with it.

    Exits non-zero when any case is outside its tolerance.
    """
    from simtrain.validation import run_validation

    if not directory.is_dir():
        raise fail(f"'{directory}' is not a directory")
    rows = run_validation(directory)
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


@app.command()
def trace(
    experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
    out: Annotated[Path, typer.Option("--out", help="Trace JSON file (directory for chakra).")],
    overrides: SetOption = None,
    full: Annotated[bool, typer.Option("--full", help="Include every rank.")] = False,
    fmt: Annotated[
        str, typer.Option("--format", help="simtrain (one JSON file) or chakra (.et per rank).")
    ] = "simtrain",
) -> None:
    """Write the operator-level program of EXPERIMENT (every simulated rank) as a trace."""
    from simtrain.api import check_hardware, load_experiment
    from simtrain.parallel.builder import build_program
    from simtrain.parallel.trace import program_to_dict

    spec = load_experiment(experiment, overrides or [])
    check_hardware(spec)
    program = build_program(spec, full=full or None)
    if fmt not in ("simtrain", "chakra"):
        raise fail(f"'--format' must be simtrain or chakra (got {fmt!r})")
    if fmt == "chakra":
        from simtrain.traceio.chakra_export import write_chakra

        files = write_chakra(program, out, spec.cluster.accelerator)
        console.print(
            f"wrote {out}/: {len(files)} Chakra rank files, {len(program.tasks)} tasks",
            markup=False,
            soft_wrap=True,
        )
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(program_to_dict(program, spec.model_dump(mode="json"))))
    ops = sum(len(t.ops) for t in program.tasks)
    console.print(
        f"wrote {out}: {len(program.tasks)} tasks, {ops} ops, {len(program.simulated_ranks)} ranks"
    )


LIST_KINDS = ("accelerators", "links", "frameworks", "workloads", "topologies")


@app.command(name="list")
def list_(
    what: Annotated[
        str,
        typer.Argument(help="One of: accelerators, links, frameworks, workloads, topologies."),
    ],
) -> None:
    """List built-in accelerators, links, framework profiles, workload files or topologies."""
    from simtrain.report.catalog_tables import catalog_tables

    if what not in LIST_KINDS:
        raise fail(f"'what' must be one of {', '.join(LIST_KINDS)} (got {what!r})")
    for table in catalog_tables(what):
        show(table)
