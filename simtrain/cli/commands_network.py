"""Network subcommands: ``simtrain topology`` and ``simtrain collective``.

``topology`` summarises (and for small clusters draws) the wired network of a cluster file;
``collective`` prints an nccl-tests-style table of one collective over a range of sizes,
timed with the default closed-form model or the flow-level model. A topology argument is a
YAML file with a top-level ``cluster:`` section (a preset in ``topologies/`` or an
experiment), or a preset's name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from simtrain.cli.app import app, console, show
from simtrain.cli.commands_core import MaxElementsOption
from simtrain.cli.values import integer
from simtrain.errors import SpecError
from simtrain.limits import MAX_TOPOLOGY_ELEMENTS, check_limit, check_topology
from simtrain.paths import data_dir, image_file

if TYPE_CHECKING:
    from rich.table import Table

    from simtrain.specs.cluster import ClusterSpec

_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
MAX_SIZE_BYTES = 2**40
"""Largest ``--sizes`` value: 1 TiB."""
COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")
"""Collectives ``--op`` accepts."""
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}
"""nccl-tests bus-bandwidth factors (docs/references/collectives.md §6.2); others use 1."""


def presets() -> list[str]:
    """Names of the shipped topology presets (``topologies/*.yaml``)."""
    return sorted(p.stem for p in data_dir("topologies").glob("*.yaml"))


def load_cluster(source: str) -> ClusterSpec:
    """ClusterSpec from a YAML file's ``cluster:`` section, or from a preset name.

    Raises:
        SpecError: no such file or preset, no cluster section, or an invalid cluster.
    """
    from pydantic import ValidationError

    from simtrain.catalog import cluster_links
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
        cluster = ClusterSpec.model_validate(data["cluster"])
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, f"{path}: cluster", ClusterSpec)) from None
    cluster_links(cluster)
    return cluster


def parse_sizes(text: str) -> list[int]:
    """Sizes in bytes from ``1M:4G`` (doubling, as nccl-tests ``-f 2``) or one size ``64K``.

    Examples:
        >>> parse_sizes("1M:4M")
        [1048576, 2097152, 4194304]
    """
    parts = text.split(":")
    values = []
    for part in parts:
        match = re.fullmatch(r"\s*(\d{1,15}(?:\.\d{1,15})?)\s*([KMGTB]?)i?B?\s*", part, re.I)
        if not match:
            raise SpecError(
                f"'--sizes' must look like 1M:4G or 64K (units B, K, M, G, T; got {text[:40]!r})"
            )
        values.append(int(float(match.group(1)) * _UNITS[match.group(2).upper()]))
    if len(values) > 2 or values[0] <= 0 or values[-1] < values[0] or values[-1] > MAX_SIZE_BYTES:
        raise SpecError(
            f"'--sizes' must be MIN:MAX with 0 < MIN <= MAX <= 1T, 1 TiB being 1,000x the "
            f"largest collective of a training step (got {text[:40]!r})"
        )
    sizes = [values[0]]
    while sizes[-1] * 2 <= values[-1]:
        sizes.append(sizes[-1] * 2)
    return sizes


def _human_bytes(size: float) -> str:
    for unit in ("T", "G", "M", "K"):
        if size >= _UNITS[unit]:
            return f"{size / _UNITS[unit]:g} {unit}iB"
    return f"{size:g} B"


@app.command(short_help="Describe a cluster's network (bisection, links).")
def topology(
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="Cluster YAML file (or a preset name).")
    ],
    png: Annotated[
        str | None,
        typer.Option(
            "--png",
            metavar="FILE",
            help="Draw the network into this PNG: tiers labelled, link classes by colour and "
            "width; large clusters are drawn aggregated.",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Seed of the ECMP hash that picks flow paths.")
    ] = 0,
    max_topology_elements: MaxElementsOption = MAX_TOPOLOGY_ELEMENTS,
) -> None:
    """Print the devices, switches, links and bisection bandwidth of a cluster's network.

    On a Clos it also measures the bisection a permutation across the cut achieves with
    hashed ECMP routing and with adaptive routing (flow model).

    Example: simtrain topology topologies/dgx-h100-superpod.yaml --png net.png
    """
    from simtrain.network.bisection import bisection_report
    from simtrain.topology import build_topology

    integer(seed, "--seed", 0, 2**63 - 1, "a signed 64-bit integer")
    check_limit(max_topology_elements, "--max-topology-elements")
    image = image_file(png, "--png") if png is not None else None
    cluster = load_cluster(file)
    check_topology(cluster, max_topology_elements)
    topo = build_topology(cluster, seed)
    if image is not None:  # drawn first: a bad path fails before any table is printed
        from simtrain.report.topology_plot import topology_figure

        title = (
            f"{Path(file).stem}: {topo.kind.replace('_', ' ')}, "
            f"{topo.num_devices:,} × {cluster.accelerator}"
        )
        topology_figure(topo, title).savefig(image, dpi=130)
    table = topology_table(file, cluster.accelerator, topo)
    report = bisection_report(cluster, seed)
    if report is not None:
        for name, achieved, share in (
            (f"ECMP hashing, seed {seed}", report.ecmp_bytes_per_s, report.ecmp_share),
            ("adaptive routing", report.adaptive_bytes_per_s, report.adaptive_share),
        ):
            table.add_row(
                f"achieved, {name}", f"{achieved / 1e12:,.2f} TB/s ({share:.0%} of nominal)"
            )
    show(table)
    if png is not None:
        console.print(f"wrote {png}", markup=False, soft_wrap=True)


_COUNTED_IN_DETAILS = {"leaves", "spines", "cores"}
"""Builder facts that repeat the switch counts of the table's own rows."""


def topology_table(file: str, accelerator: str, topo: Any) -> Table:
    """Devices, switches by tier, links, builder facts and bisection of a topology."""
    from rich.table import Table

    table = Table(title=f"{file}: {topo.kind}", show_header=False)
    table.add_row("devices", f"{topo.num_devices:,} {accelerator} on {topo.num_nodes:,} nodes")
    names = {
        "nvswitch": "NVSwitch fabrics (one per node)",
        "pcie_switch": "PCIe fabrics (one per node)",
    }
    names["group_switch"] = "dragonfly switches"
    for kind in ("nvswitch", "pcie_switch", "leaf", "group_switch", "spine", "core"):
        count = topo.count_nodes().get(kind)
        if count:
            table.add_row(names.get(kind, f"{kind} switches"), f"{count:,}")
    table.add_row("links", f"{topo.num_links:,} (directed)")
    for key, value in topo.details.items():
        if key not in _COUNTED_IN_DETAILS:
            table.add_row(key, value)
    table.add_row(
        "bisection", f"{topo.bisection_bandwidth_bytes_per_s / 1e12:,.2f} TB/s per direction"
    )
    return table


@app.command(short_help="Time one collective over message sizes (nccl-tests).")
def collective(
    topology_file: Annotated[
        str, typer.Option("--topology", metavar="FILE", help="Cluster YAML file or preset name.")
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
            help="ring, tree, nvls, nvls_tree, sharp, torus, hierarchical, halving_doubling, "
            "direct or auto.",
        ),
    ] = "auto",
    sizes: Annotated[
        str, typer.Option("--sizes", help="MIN:MAX (doubling) or one size, e.g. 1M:4G.")
    ] = "1M:1G",
    protocol: Annotated[
        str, typer.Option("--protocol", help="auto, simple, ll128, ll or none.")
    ] = "auto",
    network: Annotated[
        str,
        typer.Option(
            "--network",
            help="nccl (closed form, the default of simtrain run) or flow (flows on the links).",
        ),
    ] = "nccl",
    routing: Annotated[
        str | None,
        typer.Option(
            "--routing",
            help="On a Clos: ecmp (hashed paths: the flow model routes every flow by its "
            "hash, nccl charges the expected collision loss) or adaptive (least-loaded "
            "paths); default: the file's cluster.topology.clos_routing.",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Seed of the ECMP hash (flow model).")
    ] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON to stdout instead of a table.")
    ] = False,
    max_topology_elements: MaxElementsOption = MAX_TOPOLOGY_ELEMENTS,
) -> None:
    """Time one collective over a range of sizes with a network model.

    Prints an nccl-tests-style table (size, time, algbw, busbw, algorithm, protocol).

    Example: simtrain collective --topology dgx-h100-superpod --ranks 8 --sizes 1M:4G
    """
    from simtrain.network.flow_model import FlowNetworkModel
    from simtrain.network.nccl import NcclNetwork

    size_list = parse_sizes(sizes)
    integer(seed, "--seed", 0, 2**63 - 1, "a signed 64-bit integer")
    check_limit(max_topology_elements, "--max-topology-elements")
    if op not in COLLECTIVE_OPS:
        raise SpecError(f"'--op' must be one of {', '.join(COLLECTIVE_OPS)} (got {op[:40]!r})")
    cluster = load_cluster(topology_file)
    if ranks < 1 or ranks > cluster.num_gpus:
        raise SpecError(
            f"'--ranks' must be between 1 and the topology's {cluster.num_gpus} devices "
            f"(got {ranks})"
        )
    check_topology(cluster, max_topology_elements)
    if network not in ("nccl", "flow"):
        raise SpecError(f"'--network' must be one of nccl, flow (got {network[:40]!r})")
    if routing is not None:
        if routing not in ("ecmp", "adaptive"):
            raise SpecError(f"'--routing' must be one of ecmp, adaptive (got {routing!r})")
        spec = cluster.topology.model_copy(update={"clos_routing": routing})
        cluster = cluster.model_copy(update={"topology": spec})
    group = list(range(ranks))
    factor = BUSBW_FACTOR.get(op, lambda n: 1.0)(ranks)
    rows = []
    try:
        if network == "flow":
            model = FlowNetworkModel.from_cluster(cluster, algo, protocol, seed=seed)
        else:
            model = NcclNetwork.from_cluster(cluster, algorithm=algo, protocol=protocol)
        timings = [model.time_collective(op, group, size) for size in size_list]
    except SpecError as exc:  # name the flags the user typed, not the API's arguments
        message = str(exc).replace("'algo'", "'--algo'").replace("'protocol'", "'--protocol'")
        raise SpecError(message) from None
    for size, timing in zip(size_list, timings, strict=True):
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
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"{op} on {ranks} ranks of {topology_file} ({network} model)")
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
    show(table)
