"""Terminal rendering of a run report (rich tables), from the JSON summary alone."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from simtrain.report.provenance import provenance_short
from simtrain.report.titles import spec_title

GB = 1e9


def fmt_seconds(seconds: float) -> str:
    """Seconds with a unit that keeps 3-4 significant digits.

    Examples:
        >>> fmt_seconds(0.0123), fmt_seconds(2.5), fmt_seconds(4.2e-5)
        ('12.30 ms', '2.500 s', '42.0 µs')
    """
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def fmt_number(value: float | None, unit: str = "") -> str:
    """Four significant digits, thousands grouped, or a dash for a missing value.

    Examples:
        >>> fmt_number(1234567.0, " $"), fmt_number(39410.3), fmt_number(2.5e16), fmt_number(None)
        ('1,235,000 $', '39,410', '2.5e+16', '–')
    """
    if value is None:
        return "–"
    if 1e4 <= abs(value) < 1e15:
        digits = len(str(int(abs(value)))) - 4
        return f"{round(value, -digits):,.0f}{unit}"
    return f"{value:.4g}{unit}"


def summary_table(report: dict[str, Any]) -> Table:
    """Key metrics of one simulated step."""
    table = Table(
        title=f"simtrain run: {report['name']}\n{spec_title(report['spec'])}",
        show_header=False,
        title_justify="left",
    )
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    step = report["step_time_s"]
    rows = [
        ("step time", fmt_seconds(step)),
        ("tokens/s", f"{report['tokens_per_s']:,.0f}"),
        ("TFLOP/s per GPU (hardware, Megatron convention)", f"{report['tflops_per_gpu']:.1f}"),
        ("TFLOP/s per GPU (model)", f"{report['model_tflops_per_gpu']:.1f}"),
        ("MFU", f"{report['mfu']:.1%}"),
        ("HFU", f"{report['hfu']:.1%}"),
        (
            "compute (busy)",
            f"{fmt_seconds(report['compute_s'])}  ({report['compute_s'] / step:.1%})",
        ),
        (
            "exposed communication",
            f"{fmt_seconds(report['exposed_comm_s'])}  ({report['exposed_comm_s'] / step:.1%})",
        ),
        (
            "exposed host (kernel issue)",
            f"{fmt_seconds(report['exposed_host_s'])}  ({report['exposed_host_s'] / step:.1%})",
        ),
        (
            "pipeline bubble / idle",
            f"{fmt_seconds(report['bubble_s'])}  ({report['bubble_fraction']:.1%})",
        ),
        ("GPUs", f"{report['num_gpus']:,}"),
        ("compute constants", provenance_short(report["spec"]["cluster"]["accelerator"], report)),
        ("parameters", f"{report['num_params'] / 1e9:.2f} B"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def breakdown_table(report: dict[str, Any]) -> Table:
    """Time per category per rank; communication overlaps compute, so rows exceed the step."""
    table = Table(
        title="time by category (mean per GPU; communication may overlap compute)",
        title_justify="left",
    )
    table.add_column("category")
    table.add_column("time", justify="right")
    table.add_column("% of step", justify="right")
    exposed = report.get("exposed_comm_by_category_s", {})
    if exposed:
        table.add_column("exposed", justify="right")
    for category, seconds in report["breakdown_s"].items():
        row = [category, fmt_seconds(seconds), f"{seconds / report['step_time_s']:.1%}"]
        if exposed:
            row.append(fmt_seconds(exposed[category]) if category in exposed else "")
        table.add_row(*row)
    return table


VERDICTS = {"fits": "fits", "near_limit": "NEAR LIMIT, may not fit", "oom": "OUT OF MEMORY"}


def memory_table(report: dict[str, Any]) -> Table:
    """Peak memory of the fullest GPU by category, against capacity."""
    mem = report["memory"]
    verdict = VERDICTS.get(mem.get("verdict", ""), "fits" if mem["fits"] else "OUT OF MEMORY")
    if mem.get("verdict") == "near_limit":
        verdict += f" (within ±{mem['near_limit_bytes'] / GB:.1f} GB of capacity)"
    table = Table(title=f"memory per GPU (peak, fullest rank): {verdict}", title_justify="left")
    table.add_column("category")
    table.add_column("GB", justify="right")
    for category, size in mem["breakdown_bytes"].items():
        table.add_row(category, f"{size / GB:.2f}")
    table.add_row("peak", f"{mem['peak_bytes'] / GB:.2f}", style="bold")
    table.add_row("capacity", f"{mem['capacity_bytes'] / GB:.2f}")
    return table


def cost_table(report: dict[str, Any]) -> Table:
    """Dollars, energy and CO2 per step, per million tokens and for the whole run."""
    cost = report["cost"]
    price = cost["usd_per_gpu_hour"]
    if price is not None:
        title = f"cost, energy, carbon at ${price:g}/GPU-hour"
    else:  # say why the USD row is empty and how to fill it
        title = f"cost, energy, carbon; USD: {cost.get('price_source', 'no price')}"
    table = Table(title=title, title_justify="left")
    columns = [("per step", cost["per_step"]), ("per M tokens", cost["per_million_tokens"])]
    if cost["run"]:
        columns.append((f"run ({cost['run']['wall_days']:.1f} days)", cost["run"]))
    table.add_column("")
    for name, _ in columns:
        table.add_column(name, justify="right")
    for label, key in (
        ("GPU-hours", "gpu_hours"),
        ("USD", "usd"),
        ("energy (kWh)", "energy_kwh"),
        ("CO2e (kg)", "co2_kg"),
    ):
        values = [part.get(key) for _, part in columns]
        table.add_row(label, *(fmt_number(v) for v in values))
    return table
