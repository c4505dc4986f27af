"""Network subcommands: ``simtrain topology`` and ``simtrain collective``.

``topology`` summarises (and for small clusters draws) the wired network of a cluster file;
``collective`` prints an nccl-tests-style table of one collective over a range of sizes,
timed with the flow-level model. A topology argument is a YAML file with a top-level
``cluster:`` section (a preset in ``topologies/`` or an experiment), or a preset's name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from simtrain.cli.app import app, console, fail
from simtrain.errors import SpecError
from simtrain.paths import data_dir

if TYPE_CHECKING:
    from simtrain.specs.cluster import ClusterSpec

MAX_DRAWN_NODES = 400
"""Largest graph (devices + switches) that ``--png`` draws legibly."""
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}
"""nccl-tests bus-bandwidth factors (collectives.md §6.2); other collectives use 1."""


def presets() -> list[str]:
    """Names of the shipped topology presets (``topologies/*.yaml``)."""
    return sorted(p.stem for p in data_dir("topologies").glob("*.yaml"))


def load_cluster(source: str) -> ClusterSpec:
    """ClusterSpec from a YAML file's ``cluster:`` section, or from a preset name.

    Raises:
        SpecError: no such file or preset, no cluster section, or an invalid cluster.
    """
    from pydantic import ValidationError

    from simtrain.specs.cluster import ClusterSpec
    from simtrain.specs.loader import format_validation_error, load_yaml_tree

    path = Path(source)
    if not path.exists() and path.suffix == "" and "/" not in source:
        if source not in presets():
            raise SpecError(
                f"'--topology' must be a YAML file or a preset (got {source!r}; "
                f"presets: {', '.join(presets())})"
            )
        path = data_dir("topologies") / f"{source}.yaml"
    data = load_yaml_tree(path)
    if not isinstance(data.get("cluster"), dict):
        raise SpecError(f"'{path}' must have a top-level 'cluster:' mapping")
    try:
        return ClusterSpec.model_validate(data["cluster"])
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, f"{path}: cluster")) from None


def parse_sizes(text: str) -> list[int]:
    """Sizes in bytes from ``1M:4G`` (doubling, as nccl-tests ``-f 2``) or one size ``64K``.

    Examples:
        >>> parse_sizes("1M:4M")
        [1048576, 2097152, 4194304]
    """
    parts = text.split(":")
    values = []
    for part in parts:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGTB]?)i?B?\s*", part, re.IGNORECASE)
        if not match:
            raise SpecError(
                f"'--sizes' must look like 1M:4G or 64K (units B, K, M, G, T; got {text!r})"
            )
        values.append(int(float(match.group(1)) * _UNITS[match.group(2).upper()]))
    if len(values) > 2 or values[0] <= 0 or values[-1] < values[0]:
        raise SpecError(f"'--sizes' must be MIN:MAX with 0 < MIN <= MAX (got {text!r})")
    sizes = [values[0]]
    while sizes[-1] * 2 <= values[-1]:
        sizes.append(sizes[-1] * 2)
    return sizes


def _human_bytes(size: float) -> str:
    for unit in ("T", "G", "M", "K"):
        if size >= _UNITS[unit]:
            return f"{size / _UNITS[unit]:g} {unit}iB"
    return f"{size:g} B"


@app.command()
def topology(
    file: Annotated[str, typer.Argument(help="Cluster YAML file (or a preset name).")],
    png: Annotated[
        Path | None, typer.Option("--png", help="Draw the topology into this PNG (small only).")
    ] = None,
) -> None:
    """Print the devices, switches, links and bisection bandwidth of a cluster's network.

    Example: simtrain topology topologies/dgx-h100-superpod.yaml
    """
    from simtrain.topology import build_topology

    cluster = load_cluster(file)
    topo = build_topology(cluster)
    from rich.table import Table

    table = Table(title=f"{file}: {topo.kind}", show_header=False)
    table.add_row("devices", f"{topo.num_devices} {cluster.accelerator} on {topo.num_nodes} nodes")
    for kind, count in topo.count_nodes().items():
        if kind != "device":
            table.add_row(f"{kind} switches", str(count))
    table.add_row("links", f"{topo.num_links} (directed)")
    for key, value in topo.details.items():
        table.add_row(key, value)
    table.add_row(
        "bisection", f"{topo.bisection_bandwidth_bytes_per_s / 1e12:.2f} TB/s per direction"
    )
    console.print(table)
    if png is not None:
        _draw(topo, png)
        console.print(f"wrote {png}")


def _draw(topo: object, png: Path) -> None:
    """Draw a small topology with devices at the bottom and switch tiers above."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    graph = topo.graph.to_undirected()  # type: ignore[attr-defined]
    if graph.number_of_nodes() > MAX_DRAWN_NODES:
        raise fail(
            f"'--png' draws topologies of at most {MAX_DRAWN_NODES} devices and switches "
            f"(got {graph.number_of_nodes()}); lower cluster.num_gpus"
        )
    tiers = {"device": 0, "nvswitch": 1, "pcie_switch": 1, "leaf": 2, "spine": 3, "core": 4}
    for node, data in graph.nodes(data=True):
        graph.nodes[node]["tier"] = tiers.get(data["kind"], 0)
    if topo.kind == "torus_3d":  # type: ignore[attr-defined]
        pos = nx.spring_layout(graph, seed=0)
    else:
        pos = nx.multipartite_layout(graph, subset_key="tier", align="horizontal")
    colors = [graph.nodes[n]["tier"] for n in graph.nodes]
    fig, ax = plt.subplots(figsize=(12, 6))
    nx.draw_networkx(
        graph,
        pos,
        ax=ax,
        node_size=30,
        with_labels=False,
        node_color=colors,
        width=0.3,
        cmap="viridis",
    )
    ax.set_axis_off()
    fig.savefig(png, dpi=150, bbox_inches="tight")
    plt.close(fig)


@app.command()
def collective(
    topology_file: Annotated[
        str, typer.Option("--topology", help="Cluster YAML file or preset name.")
    ],
    op: Annotated[
        str,
        typer.Option(
            "--op", help="all_reduce, all_gather, reduce_scatter, all_to_all, broadcast or reduce."
        ),
    ] = "all_reduce",
    ranks: Annotated[int, typer.Option("--ranks", help="Group size: ranks 0..N-1.")] = 8,
    algo: Annotated[
        str,
        typer.Option(
            "--algo",
            help="ring, tree, hierarchical, halving_doubling, direct, nvls, sharp, torus or auto.",
        ),
    ] = "auto",
    sizes: Annotated[
        str, typer.Option("--sizes", help="MIN:MAX (doubling) or one size, e.g. 1M:4G.")
    ] = "1M:1G",
    protocol: Annotated[
        str, typer.Option("--protocol", help="auto, simple, ll128, ll or none.")
    ] = "auto",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON to stdout instead of a table.")
    ] = False,
) -> None:
    """Time one collective over a range of sizes with the flow-level network model.

    Prints an nccl-tests-style table (size, time, algbw, busbw, algorithm).

    Example: simtrain collective --topology dgx-h100-superpod --ranks 8 --sizes 1M:4G
    """
    from simtrain.network.flow_model import FlowNetworkModel

    size_list = parse_sizes(sizes)
    cluster = load_cluster(topology_file)
    if ranks < 1 or ranks > cluster.num_gpus:
        raise SpecError(
            f"'--ranks' must be between 1 and the topology's {cluster.num_gpus} devices "
            f"(got {ranks})"
        )
    model = FlowNetworkModel.from_cluster(cluster, algorithm=algo, protocol=protocol)
    group = list(range(ranks))
    factor = BUSBW_FACTOR.get(op, lambda n: 1.0)(ranks)
    rows = []
    for size in size_list:
        timing = model.time_collective(op, group, size)
        algbw = size / timing.time_s / 1e9 if timing.time_s > 0 else 0.0
        rows.append(
            {
                "size_bytes": size,
                "time_s": timing.time_s,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * factor,
                "algo": timing.algorithm,
                "protocol": timing.protocol,
            }
        )
    if as_json:
        keys = ("size_bytes", "time_s", "algbw_gbps", "busbw_gbps", "algo")
        typer.echo(json.dumps([{k: row[k] for k in keys} for row in rows], indent=2))
        return
    from rich.table import Table

    table = Table(title=f"{op} on {ranks} ranks of {topology_file} (flow model)")
    for column in ("size", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algo", "protocol"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            _human_bytes(row["size_bytes"]),
            f"{row['time_s'] * 1e6:.1f}",
            f"{row['algbw_gbps']:.2f}",
            f"{row['busbw_gbps']:.2f}",
            row["algo"],
            row["protocol"],
        )
    console.print(table)
