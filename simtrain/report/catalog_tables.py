"""Tables for ``simtrain list``: the hardware catalog and the data folders."""

from __future__ import annotations

from rich.table import Table

from simtrain.catalog import ACCELERATORS, LINKS
from simtrain.paths import data_dir

TERA, GB = 1e12, 1e9


def accelerators_table() -> Table:
    """Every catalog accelerator with its dense peaks, memory, power and fabrics."""
    table = Table(title="accelerators (dense peak; one MI250X GCD is one device)")
    for col in (
        "name",
        "bf16 TF/s",
        "fp8 TF/s",
        "HBM GiB",
        "HBM TB/s",
        "TDP W",
        "SMs/CUs",
        "scale-up",
        "scale-out",
    ):
        table.add_column(col, no_wrap=True)
    for a in ACCELERATORS.values():
        fp8 = a.peak_flops.get("fp8")
        table.add_row(
            a.name,
            f"{a.peak_flops['bf16'] / TERA:g}",
            f"{fp8 / TERA:g}" if fp8 else "-",
            f"{a.hbm_capacity_bytes / 2**30:.1f}",
            f"{a.hbm_bandwidth_bytes_per_s / 1e12:.2f}",
            f"{a.tdp_watts:g}" if a.tdp_watts else "-",
            str(a.num_compute_units),
            a.scale_up_link,
            a.scale_out_link,
        )
    return table


def links_table() -> Table:
    """Every catalog link with line rate, measured efficiency and latency."""
    table = Table(title="links (bandwidth per direction: per device for scale-up, per NIC)")
    for col in ("name", "kind", "GB/s", "efficiency", "effective GB/s", "latency µs"):
        table.add_column(col, no_wrap=True)
    for link in LINKS.values():
        table.add_row(
            link.name,
            link.kind,
            f"{link.bandwidth_bytes_per_s / GB:g}",
            f"{link.efficiency:.3f}",
            f"{link.effective_bandwidth_bytes_per_s / GB:.1f}",
            f"{link.latency_s * 1e6:.1f}",
        )
    return table


def sources_table(entries: dict) -> Table:
    """Where each catalog entry's figures come from."""
    table = Table(title="sources", show_header=False)
    table.add_column("name", no_wrap=True)
    table.add_column("source", overflow="fold")
    for name, entry in entries.items():
        table.add_row(name, entry.source)
    return table


def files_table(folder: str, section: str) -> Table:
    """YAML files of a data folder with the headline fields of their ``section``."""
    from simtrain.specs.loader import read_yaml  # validates experiments: load on use

    table = Table(title=f"{folder}/")
    table.add_column("file", no_wrap=True)
    table.add_column("name", no_wrap=True)
    table.add_column("summary")
    for path in sorted(data_dir(folder).glob("*.yaml")):
        data = read_yaml(path).get(section, {})
        if section == "model":
            summary = (
                f"{data.get('num_layers')} layers, hidden {data.get('hidden_size')}, "
                f"{data.get('num_heads')} heads, seq {data.get('seq_length')}"
                + (f", {data['num_experts']} experts" if data.get("num_experts") else "")
            )
        else:
            topo = data.get("topology", {})
            summary = (
                f"{data.get('accelerator')} x {data.get('num_gpus')}, "
                f"{topo.get('kind', 'fat_tree')}"
            )
        table.add_row(path.name, str(data.get("name", path.stem)), summary)
    return table


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or "none"
    if isinstance(value, float) and value >= 1e6:
        return f"{value:.3g}"
    return str(value)


REFERENCE = "docs/references/frameworks.md "


def frameworks_tables(only: str | None = None) -> list[Table]:
    """One summary of every framework profile, then each profile field by field with sources.

    ``only`` names one profile: its field table alone (an unknown name is a one-line error
    that lists the known ones).
    """
    from simtrain.catalog.frameworks import framework_names, get_framework
    from simtrain.specs.framework import DEFAULT_FRAMEWORK, profile_field_names

    if only is not None:
        get_framework(only, "NAME")
    names = framework_names() if only is None else [only]
    summary = Table(title=f"frameworks (training.framework; default {DEFAULT_FRAMEWORK})")
    for col in ("name", "mode", "attention", "ZeRO", "ZeRO-3 gathers", "DP overlap"):
        summary.add_column(col, no_wrap=True)
    for name in names:
        p = get_framework(name)
        summary.add_row(
            name,
            p.execution_mode,
            p.attention_kernel,
            _shown(p.zero_stages),
            p.sharding.gather_granularity,
            "yes" if p.overlaps.dp_grad_reduce else "no",
        )
    tables = [summary] if only is None else []
    for name in names:
        p = get_framework(name)
        table = Table(
            title=f"{name}: every field and its source (§ = {REFERENCE}§)",
            title_justify="left",
            caption=p.description,
            caption_justify="left",
        )
        table.add_column("field", no_wrap=True)
        table.add_column("value", overflow="fold")
        table.add_column("source", overflow="fold")
        for field in profile_field_names():
            src = p.sources[field]
            source = src.source.replace(f"{REFERENCE}§", "§")
            table.add_row(field, _shown(p.field_value(field)), f"{src.provenance}: {source}")
        tables.append(table)
    return tables


def catalog_tables(what: str, name: str | None = None) -> list[Table]:
    """The tables for ``simtrain list WHAT [NAME]`` (``NAME``: one framework profile)."""
    if what == "frameworks":
        return frameworks_tables(name)
    if what == "accelerators":
        return [accelerators_table(), sources_table(ACCELERATORS)]
    if what == "links":
        return [links_table(), sources_table(LINKS)]
    if what == "workloads":
        return [files_table("workloads", "model")]
    return [files_table("topologies", "cluster")]
