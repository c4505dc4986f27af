"""``report.md``: the run report as GitHub-flavoured Markdown, rendered from ``report.json`` alone.

Sections: key metrics, where the step time goes, memory by category, cost / energy / carbon
(with the source of every assumption), reliability when present, the figures, and the fully
resolved experiment. Numbers are rounded to 4 significant digits so the file is stable and
diff-friendly (the golden test in ``tests/report`` depends on it); host timings such as the
simulation's wall time are left out for the same reason (they are in ``report.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from simtrain.report.provenance import provenance_line
from simtrain.report.terminal import fmt_number as _g
from simtrain.report.terminal import fmt_seconds
from simtrain.report.titles import spec_title

GB = 1e9


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": ":--", "r": "--:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _metrics(r: dict[str, Any]) -> list[str]:
    spec = r["spec"]
    par = spec["parallel"]
    step = r["step_time_s"]
    rows = [
        ("cluster", f"{r['num_gpus']:,} × {spec['cluster']['accelerator']}"),
        (
            "parallel",
            f"tp={par['tp']} pp={par['pp']} dp={par['dp']} cp={par['cp']} ep={par['ep']}"
            f" vpp={par['vpp']}, {par['pipeline_schedule']}, ZeRO {par['zero_stage']},"
            f" recompute {par['recompute']}",
        ),
        ("parameters", f"{_g(r['num_params'] / 1e9)} B"),
        ("tokens per step", f"{r['tokens_per_step']:,}"),
        ("step time", fmt_seconds(step)),
        ("tokens/s", _g(r["tokens_per_s"])),
        ("TFLOP/s per GPU (hardware, Megatron convention)", f"{r['tflops_per_gpu']:.1f}"),
        ("TFLOP/s per GPU (model)", f"{r['model_tflops_per_gpu']:.1f}"),
        ("MFU", f"{r['mfu']:.1%}"),
        ("HFU", f"{r['hfu']:.1%}"),
    ]
    return ["## Key metrics", "", *_table(["metric", "value"], rows)]


def _time(r: dict[str, Any]) -> list[str]:
    step = r["step_time_s"]
    states = [
        ("compute (busy)", r["compute_s"]),
        ("exposed communication", r["exposed_comm_s"]),
        ("exposed host (kernel issue)", r["exposed_host_s"]),
        ("pipeline bubble / idle", r["bubble_s"]),
    ]
    out = [
        "## Where the step time goes",
        "",
        "Mean over GPUs. The four states add up to the step time.",
        "",
        *_table(
            ["state", "time", "% of step"],
            [(k, fmt_seconds(v), f"{v / step:.1%}") for k, v in states],
        ),
        "Time by task category; communication may overlap compute, so these can exceed the step.",
        "",
        *_table(
            ["category", "time", "% of step"],
            [(k, fmt_seconds(v), f"{v / step:.1%}") for k, v in r["breakdown_s"].items()],
        ),
    ]
    return out


def _memory(r: dict[str, Any]) -> list[str]:
    mem = r["memory"]
    verdict = {"near_limit": "**near the limit, may not fit**", "oom": "**OUT OF MEMORY**"}.get(
        mem.get("verdict", ""), "fits" if mem["fits"] else "**OUT OF MEMORY**"
    )
    rows = [(k, _g(v / GB)) for k, v in mem["breakdown_bytes"].items()]
    rows += [
        ("**peak**", f"**{_g(mem['peak_bytes'] / GB)}**"),
        ("capacity", _g(mem["capacity_bytes"] / GB)),
    ]
    return [
        f"## Memory per GPU (peak, fullest rank): {verdict}",
        "",
        *_table(["category", "GB"], rows),
    ]


def _cost(r: dict[str, Any]) -> list[str]:
    cost = r.get("cost")
    if not cost:
        return []
    step, mtok, run = cost["per_step"], cost["per_million_tokens"], cost.get("run")
    header = ["", "per step", "per million tokens"] + (["whole run"] if run else [])

    def row(name: str, key: str, unit: str, scale: float = 1.0) -> list[str]:
        values = [step.get(key), mtok.get(key)] + ([run.get(key)] if run else [])
        return [name] + [_g(None if v is None else v * scale, unit) for v in values]

    rows = [
        row("GPU-hours", "gpu_hours", ""),
        row("cost (USD)", "usd", ""),
        row("energy at the facility (kWh)", "energy_kwh", ""),
        row("CO2e (kg)", "co2_kg", ""),
    ]
    price = cost["usd_per_gpu_hour"]
    out = [
        "## Cost, energy and carbon",
        "",
        f"Price: {_g(price)} USD per GPU-hour — {cost['price_source']}.",
        "",
        f"Goodput: {cost['goodput']:.3f} — {cost['goodput_source']}.",
        "",
        *_table(header, rows),
    ]
    if run:
        out += [
            f"Whole run: {_g(run['total_tokens'])} tokens in {run['num_steps']:,} steps, "
            f"{run['productive_days']:.4g} days of training, {run['wall_days']:.4g} days of wall "
            "time.",
            "",
        ]
    power = cost.get("power")
    if power:
        out += [
            f"Power: device cap {_g(power['device_cap_watts'])} W, mean over the step "
            f"{_g(power['device_mean_watts'])} W; host {_g(power['host_watts_per_node'])} W per "
            f"node; PUE {power['pue']:g}; grid {_g(power['grid_gco2_per_kwh'])} gCO2e/kWh; "
            f"facility draw {_g(power['facility_mean_kw'])} kW.",
            "",
            "<details><summary>Sources of the power assumptions</summary>",
            "",
            *[f"- `{k}`: {v}" for k, v in power["sources"].items()],
            "",
            "</details>",
            "",
        ]
    else:
        out += ["Energy not reported: no power figure is known for this accelerator.", ""]
    return out


def _reliability(r: dict[str, Any]) -> list[str]:
    rel = r.get("reliability")
    if not rel:
        return []
    rows = [
        ("ETTR (mean)", f"{rel['ettr_mean']:.3f}"),
        ("wall time (days, mean)", _g(rel["wall_days_mean"])),
        ("interruptions (mean)", _g(rel["interruptions_mean"])),
        ("GPU-hours lost (mean)", _g(rel["gpu_hours_lost_mean"])),
    ]
    return ["## Reliability (whole run, Monte Carlo)", "", *_table(["metric", "value"], rows)]


def render_markdown(report: dict[str, Any], figures: Sequence[str] = ()) -> str:
    """The Markdown report of a ``report.json`` dict.

    Args:
        report: the run report (``SimulationResult.summary()``, plus ``cost`` and
            ``reliability`` when present).
        figures: image files next to the report to embed, e.g. ``timeline.png``.
    """
    spec = report["spec"]
    lines = [f"# simtrain report: {report['name']}", "", f"**{spec_title(spec)}**", ""]
    lines += [
        f"Compute constants of {spec['cluster']['accelerator']}: "
        f"{provenance_line(spec['cluster']['accelerator'], report)}.",
        "",
    ]
    if spec.get("description"):
        lines += [f"> {spec['description'].strip()}", ""]
    lines += [f"simtrain {report['simtrain_version']}, seed {spec['seed']}.", ""]
    lines += (
        _metrics(report) + _time(report) + _memory(report) + _cost(report) + _reliability(report)
    )
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{name.rsplit('.', 1)[0]}]({name})\n" for name in figures]
    lines += [
        "## Resolved experiment",
        "",
        "<details><summary>Every field, defaults included (YAML)</summary>",
        "",
        "```yaml",
        yaml.safe_dump(spec, sort_keys=False).rstrip(),
        "```",
        "",
        "</details>",
        "",
    ]
    return "\n".join(lines)
