"""Tables of a result for notebooks: pandas frames (units in column names) and an HTML summary.

- :func:`result_frame`: one row of headline metrics per result, so a sweep is
  ``pd.concat([r.to_frame() for r in results])``;
- :func:`events_frame`: one row per task (rank, stream, label, start/end in seconds, ...), for
  filtering and plotting a step in pandas;
- :func:`result_html`: what a result shows as the last expression of a notebook cell.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from simtrain.metrics.result import SimulationResult

GB = 1e9


def result_row(result: SimulationResult, report: dict[str, Any] | None = None) -> dict[str, Any]:
    """Headline metrics of a result as one flat dict (keys carry units)."""
    r = report or result.summary()
    p = result.spec.parallel
    cost = r.get("cost") or {}
    per_step = cost.get("per_step") or {}
    per_mtok = cost.get("per_million_tokens") or {}
    run = cost.get("run") or {}
    return {
        "name": r["name"],
        "accelerator": result.spec.cluster.accelerator,
        "num_gpus": r["num_gpus"],
        "tp": p.tp,
        "pp": p.pp,
        "dp": p.dp,
        "cp": p.cp,
        "ep": p.ep,
        "vpp": p.vpp,
        "zero_stage": p.zero_stage,
        "recompute": p.recompute,
        "pipeline_schedule": p.pipeline_schedule,
        "num_microbatches": p.num_microbatches,
        "global_batch_size": p.global_batch_size,
        "num_params": r["num_params"],
        "step_time_s": r["step_time_s"],
        "tokens_per_s": r["tokens_per_s"],
        "mfu": r["mfu"],
        "hfu": r["hfu"],
        "tflops_per_gpu": r["tflops_per_gpu"],
        "compute_s": r["compute_s"],
        "exposed_comm_s": r["exposed_comm_s"],
        "exposed_host_s": r["exposed_host_s"],
        "bubble_s": r["bubble_s"],
        "bubble_fraction": r["bubble_fraction"],
        "peak_memory_gb": r["memory"]["peak_bytes"] / GB,
        "capacity_gb": r["memory"]["capacity_bytes"] / GB,
        "fits": r["memory"]["fits"],
        "usd_per_gpu_hour": cost.get("usd_per_gpu_hour"),
        "usd_per_step": per_step.get("usd"),
        "usd_per_million_tokens": per_mtok.get("usd"),
        "kwh_per_million_tokens": per_mtok.get("energy_kwh"),
        "run_wall_days": run.get("wall_days"),
        "run_gpu_hours": run.get("gpu_hours"),
        "run_usd": run.get("usd"),
        "run_energy_mwh": None if run.get("energy_kwh") is None else run["energy_kwh"] / 1e3,
        "run_co2_t": None if run.get("co2_kg") is None else run["co2_kg"] / 1e3,
    }


def result_frame(result: SimulationResult) -> pd.DataFrame:
    """One-row DataFrame of headline metrics (see :func:`result_row`)."""
    return pd.DataFrame([result_row(result)])


def events_frame(result: SimulationResult) -> pd.DataFrame:
    """One row per task of the step: who ran what, when, for how long.

    Communication tasks also carry the algorithm and protocol the network model chose.
    """
    tasks = result.program.tasks
    start, end = result.start_s, result.end_s
    choices = result.comm_choices or [("", "")] * len(tasks)
    return pd.DataFrame(
        {
            "rank": [t.rank for t in tasks],
            "stream": [t.stream for t in tasks],
            "label": [t.label for t in tasks],
            "category": [t.category for t in tasks],
            "stage": [t.stage for t in tasks],
            "microbatch": [t.microbatch for t in tasks],
            "start_s": start,
            "end_s": end,
            "duration_s": end - start,
            "group_size": [len(t.group) for t in tasks],
            "collective_key": [t.collective_key for t in tasks],
            "num_ops": [len(t.ops) for t in tasks],
            "algorithm": [a for a, _ in choices],
            "protocol": [p for _, p in choices],
        }
    )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


def result_html(result: SimulationResult) -> str:
    """A two-column HTML table of the headline metrics, for Jupyter's rich display."""
    report = result.summary()
    row = result_row(result, report)
    shown = [
        ("GPUs", f"{row['num_gpus']:,} × {row['accelerator']}"),
        (
            "parallel",
            f"tp={row['tp']} pp={row['pp']} dp={row['dp']} cp={row['cp']} ep={row['ep']}"
            f" · {row['pipeline_schedule']} · m={row['num_microbatches']}",
        ),
        ("step time (s)", _fmt(row["step_time_s"])),
        ("tokens/s", f"{row['tokens_per_s']:,.0f}"),
        ("MFU", f"{row['mfu']:.1%}"),
        ("bubble fraction", f"{row['bubble_fraction']:.1%}"),
        ("exposed communication (s)", _fmt(row["exposed_comm_s"])),
        (
            "peak memory (GB)",
            f"{row['peak_memory_gb']:.1f} of {row['capacity_gb']:.1f}"
            + ("" if row["fits"] else " — OUT OF MEMORY"),
        ),
    ]
    if row["usd_per_million_tokens"] is not None:
        shown.append(("USD per million tokens", f"{row['usd_per_million_tokens']:.4g}"))
    if row["run_usd"] is not None:
        shown.append(
            ("whole run", f"{row['run_wall_days']:.1f} days, ${row['run_usd'] / 1e6:,.3g}M")
        )
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
        f"<td style='text-align:right'>{html.escape(v)}</td></tr>"
        for k, v in shown
    )
    title = html.escape(f"simtrain result: {row['name']}")
    return f"<table><caption style='text-align:left'><b>{title}</b></caption>{body}</table>"
