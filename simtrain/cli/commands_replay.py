"""``simtrain replay``: run measured or exported per-rank traces on a simulated cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from simtrain.cli.app import app, fail, show
from simtrain.cli.commands_core import SetOption
from simtrain.limits import check_limit
from simtrain.traceio.limits import MAX_NODES_PER_RANK


@app.command(short_help="Replay Chakra or PyTorch profiler traces on a cluster.")
def replay(
    trace_dir: Annotated[
        Path,
        typer.Argument(
            metavar="TRACE_DIR", help="Folder of per-rank Chakra (.et/.json) or Kineto traces."
        ),
    ],
    experiment: Annotated[
        Path | None,
        typer.Option("--experiment", metavar="EXPERIMENT", help="Use this experiment's cluster."),
    ] = None,
    overrides: SetOption = None,
    topology: Annotated[
        str | None, typer.Option("--topology", metavar="FILE", help="Cluster YAML file or preset.")
    ] = None,
    accelerator: Annotated[
        str | None, typer.Option("--accelerator", help="Accelerator (with --topology).")
    ] = None,
    retarget: Annotated[
        bool,
        typer.Option(
            "--retarget",
            help="Re-time measured compute for the cluster's accelerator (compute model where "
            "shapes are known, else scaled by the ratio of peak FLOP/s).",
        ),
    ] = False,
    source_accelerator: Annotated[
        str | None,
        typer.Option("--source-accelerator", help="Accelerator the trace was recorded on."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    max_trace_nodes: Annotated[
        int,
        typer.Option(
            "--max-trace-nodes",
            help=f"Refuse a rank file of more nodes or events (default {MAX_NODES_PER_RANK:,}).",
        ),
    ] = MAX_NODES_PER_RANK,
) -> None:
    """Replay the traces in TRACE_DIR on a cluster and report step time like 'simtrain run'.

    Example: simtrain replay out/chakra --experiment experiments/quickstart.yaml --json
    """
    from simtrain.report.progress import progress, stderr_is_terminal
    from simtrain.report.terminal import fmt_seconds
    from simtrain.traceio.run import replay_directory

    check_limit(max_trace_nodes, "--max-trace-nodes")
    if (experiment is None) == (topology is None):
        raise fail("give either --experiment EXP or --topology FILE --accelerator A")
    if topology is not None and accelerator is None:
        raise fail("--topology needs --accelerator (e.g. --accelerator H100-SXM)")
    if experiment is None and overrides:
        raise fail("--set overrides the experiment's spec; it needs --experiment")
    if experiment is not None and accelerator is not None:
        raise fail("--accelerator goes with --topology; an experiment names its accelerator")
    target = (
        _experiment_target(experiment, overrides or [])
        if experiment is not None
        else _topology_target(topology or "", accelerator or "")
    )
    with progress(stderr_is_terminal()) as display:
        done = display.stage("reading and replaying traces", None)
        report = replay_directory(trace_dir, target, retarget, source_accelerator, max_trace_nodes)
        done()
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"replay: {trace_dir}", title_justify="left", show_header=False)
    info = report["replay"]
    rows = [
        ("format", info["format"]),
        ("ranks in trace", f"{info['num_rank_files']} files, world size {report['num_gpus']}"),
        ("accelerator", info["accelerator"]),
        ("step time", fmt_seconds(report["step_time_s"])),
        ("compute (mean rank)", fmt_seconds(report["compute_s"])),
        ("exposed communication", fmt_seconds(report["exposed_comm_s"])),
        ("bubble", f"{report['bubble_fraction']:.1%}"),
        ("MFU", f"{report['mfu']:.1%}"),
    ]
    if "retarget" in info:
        note = info["retarget"]
        rows.append(
            (
                "retarget",
                note.get("note")
                or f"{note['num_reestimated']:,} re-estimated by the compute model, "
                f"{note['num_scaled']:,} scaled by {note['scale']:.3g} (peak FLOP/s ratio)",
            )
        )
    for key, value in rows:
        table.add_row(key, str(value))
    show(table)


def _experiment_target(experiment: Path, overrides: list[str]) -> Any:
    """The ReplayTarget of an experiment file: its cluster, dtype and network model."""
    from simtrain.api import (
        check_hardware,
        compute_model_for,
        load_experiment,
        network_model_for,
    )
    from simtrain.catalog import get_accelerator
    from simtrain.traceio.run import ReplayTarget

    spec = load_experiment(experiment, overrides)
    check_hardware(spec)
    return ReplayTarget(
        name=spec.name,
        accelerator=get_accelerator(spec.cluster.accelerator),
        dtype=spec.training.dtype,
        num_gpus=spec.cluster.num_gpus,
        network=network_model_for(spec),
        tokens_per_step=spec.parallel.global_batch_size * spec.model.seq_length,
        spec=spec.model_dump(mode="json"),
        compute=compute_model_for(spec),
    )


def _topology_target(topology: str, accelerator: str) -> Any:
    """The ReplayTarget of a cluster file (or preset) with ``accelerator``, alpha-beta network."""
    from simtrain.catalog import get_accelerator
    from simtrain.cli.commands_network import load_cluster
    from simtrain.network.alpha_beta import AlphaBetaNetwork
    from simtrain.traceio.run import ReplayTarget

    acc = get_accelerator(accelerator)
    cluster = load_cluster(topology)
    cluster = type(cluster).model_validate({**cluster.model_dump(), "accelerator": acc.name})
    return ReplayTarget(
        name=Path(topology).stem,
        accelerator=acc,
        dtype="bf16" if "bf16" in acc.peak_flops else next(iter(acc.peak_flops)),
        num_gpus=cluster.num_gpus,
        network=AlphaBetaNetwork.from_cluster(cluster),
    )
