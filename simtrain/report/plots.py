"""The run report's figures: timeline (Gantt of one pipeline), time breakdown, memory over the step.

Each function takes a :class:`~simtrain.metrics.result.SimulationResult` and returns a
:class:`matplotlib.figure.Figure` (not a pyplot figure: no global state, no backend chosen).
``SimulationResult.plot_timeline`` / ``plot_breakdown`` / ``plot_memory`` call them, and
:func:`simtrain.report.files.write_report_files` saves them as PNGs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from simtrain.memory import estimate_memory, memory_timeline
from simtrain.parallel.layout import RankLayout
from simtrain.report.gantt import COMM_COLOURS, COMPUTE_COLOURS, IDLE_COLOURS, gantt_figure
from simtrain.report.titles import config_title

if TYPE_CHECKING:
    from simtrain.metrics.result import SimulationResult

GB = 1e9


def pipeline_ranks(result: SimulationResult) -> list[tuple[int, int]]:
    """(stage, rank) of the simulated ranks of one pipeline: the one holding the first rank.

    Under symmetry reduction these are all simulated ranks (one per stage); in full mode, the
    pipeline-parallel group of the lowest simulated rank.
    """
    layout = RankLayout.from_spec(result.spec.parallel)
    first = min(result.program.simulated_ranks)
    group = set(layout.group_of(first, "pp")) & set(result.program.simulated_ranks)
    return sorted((layout.coords(r)["pp"], r) for r in group)


def time_unit(step_time_s: float) -> tuple[str, float]:
    """Display unit of times for a step: ms below one second, else s.

    Examples:
        >>> time_unit(0.25), time_unit(3.0)
        (('ms', 1000.0), ('s', 1.0))
    """
    return ("ms", 1e3) if step_time_s < 1 else ("s", 1.0)


def _row_label(result: SimulationResult, stage: int, rank: int) -> str:
    return f"stage {stage} (rank {rank})"


def plot_timeline(result: SimulationResult) -> Figure:
    """Gantt chart of one training step for one pipeline: stages as rows.

    The upper lane of a row is the compute stream (forward, backward, recompute, optimizer,
    and idle time split into exposed communication and bubble); the lower lane shows the
    rank's communication by kind.
    """
    rows = pipeline_ranks(result)
    unit, _ = time_unit(result.step_time_s)
    title = f"{config_title(result.spec)}\none step, one pipeline: step {result.step_time_s:.4g} s"
    return gantt_figure(
        result.program,
        result.start_s,
        result.end_s,
        [rank for _, rank in rows],
        [_row_label(result, s, r) for s, r in rows],
        title,
        time_unit=unit,
        # no lighter odd chunks here: among thousands of per-op bars they read as idle time
        chunks_per_rank=1,
    )


def _compute_stream_s(result: SimulationResult) -> dict[int, dict[str, float]]:
    """Per rank, busy compute-stream time by category (these add up to ``busy_s``)."""
    out: dict[int, dict[str, float]] = {}
    durations = result.end_s - result.start_s
    for i, task in enumerate(result.program.tasks):
        if task.stream == "compute":
            per = out.setdefault(task.rank, {})
            per[task.category] = per.get(task.category, 0.0) + float(durations[i])
    return out


def plot_breakdown(result: SimulationResult) -> Figure:
    """Where each stage's step time goes (left) and how much communication it runs (right).

    Left: per pipeline stage, compute-stream time by category, then exposed communication and
    bubble; the segments add up to the step time (dashed line). Right: the time each kind of
    communication is in flight, which may overlap compute and so is not part of the left sum.
    """
    rows = pipeline_ranks(result)
    unit, scale = time_unit(result.step_time_s)
    by_rank = {r.rank: r for r in result.ranks}
    compute = _compute_stream_s(result)
    labels = [_row_label(result, s, r) for s, r in rows]
    y = np.arange(len(rows))
    fig = Figure(figsize=(11.0, 0.45 * len(rows) + 2.6), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    segments = [
        ("compute", "compute", COMPUTE_COLOURS["F"]),
        ("recompute", "recompute", COMPUTE_COLOURS["recompute"]),
        ("optimizer", "optimizer", COMPUTE_COLOURS["optimizer"]),
    ]
    base = np.zeros(len(rows))
    for key, label, colour in segments:
        values = np.array([compute.get(r, {}).get(key, 0.0) for _, r in rows]) * scale
        if values.any():
            left.barh(y, values, left=base, color=colour, label=label, height=0.7)
            base += values
    idle_states = (
        ("exposed_comm_s", "exposed communication"),
        ("exposed_host_s", "exposed host (kernel issue)"),
        ("bubble_s", "bubble"),
    )
    for attr, name in idle_states:
        values = np.array([getattr(by_rank[r], attr) for _, r in rows]) * scale
        if values.max() <= 1e-9 * result.step_time_s * scale:
            continue  # e.g. no bubble without pipelining: keep it out of the legend
        left.barh(
            y,
            values,
            left=base,
            color=IDLE_COLOURS[name],
            hatch="//" if name == "bubble" else None,
            edgecolor="#bbbbbb",
            linewidth=0,
            label=f"idle: {name}",
            height=0.7,
        )
        base += values
    left.axvline(result.step_time_s * scale, color="black", linestyle="--", linewidth=1)
    left.text(
        result.step_time_s * scale,
        -0.6,
        f" step {result.step_time_s * scale:.4g} {unit}",
        va="bottom",
        fontsize=8,
    )
    left.set_yticks(y, labels)
    left.set_ylim(len(rows) - 0.5, -0.9)
    left.set_xlabel(f"time in the step ({unit})")
    left.set_title("step time by state (adds up to the step)", fontsize=10)
    categories = sorted({c for r in result.ranks for c in r.by_category_s if c.endswith("_comm")})
    height = 0.7 / max(1, len(categories))
    for k, category in enumerate(categories):
        values = np.array([by_rank[r].by_category_s.get(category, 0.0) for _, r in rows]) * scale
        right.barh(
            y - 0.35 + height * (k + 0.5),
            values,
            height=height,
            color=COMM_COLOURS.get(category, "black"),
            label=category,
        )
    right.set_xlabel(f"communication in flight ({unit})")
    right.set_title("communication by kind (overlaps compute)", fontsize=10)
    handles, labels = left.get_legend_handles_labels()
    comm_handles, comm_labels = right.get_legend_handles_labels()
    fig.legend(
        handles + comm_handles,
        labels + [f"{label} (right)" for label in comm_labels],
        loc="outside lower center",
        ncol=5,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(f"{config_title(result.spec)}\ntime breakdown per pipeline stage", fontsize=11)
    return fig


def plot_memory(result: SimulationResult) -> Figure:
    """Device memory of each pipeline stage over the step, against the device capacity.

    Model states and buffers are held all step; the activations of a (stage, microbatch) grow
    over its forward tasks and shrink over its backward tasks, so the curves rise and fall with
    each microbatch and show the schedule's in-flight microbatches. The peak of the fullest
    stage is the report's memory figure.
    """
    rows = pipeline_ranks(result)
    unit, scale = time_unit(result.step_time_s)
    capacity = result.accelerator.hbm_capacity_bytes
    fig = Figure(figsize=(11.0, 4.8))
    ax = fig.add_subplot()
    colours = _stage_colours(len(rows))
    peak = 0.0
    # Stages whose curves coincide (equal layers, same in-flight count) stay distinguishable:
    # earlier stages are drawn wider and underneath, so a shared segment shows every colour.
    widths = np.linspace(1.2 + 0.9 * (len(rows) - 1), 1.2, len(rows)) if len(rows) > 1 else [1.3]
    for (stage, rank), colour, width in zip(rows, colours, widths, strict=True):
        estimate = estimate_memory(result.spec, capacity, stage)
        points = _settled(
            memory_timeline(result.program, result.start_s, result.end_s, rank, estimate),
            result.step_time_s,
        )
        times = np.array([t for t, _ in points]) * scale
        values = np.array([b for _, b in points]) / GB
        peak = max(peak, float(values.max()))
        ax.step(times, values, where="post", color=colour, linewidth=width, label=f"stage {stage}")
    ax.axhline(
        capacity / GB,
        color="#c44e52",
        linestyle="--",
        linewidth=1.2,
        label=f"capacity {capacity / GB:.1f} GB\n({result.accelerator.name})",
    )
    ax.set_xlim(0, result.step_time_s * scale)
    ax.set_ylim(0, max(capacity, peak * GB) / GB * 1.12)
    ax.set_xlabel(f"time in the step ({unit})")
    ax.set_ylabel("device memory in use (GB = 10⁹ bytes)")
    fig.text(
        0.01,
        0.01,
        "activations grow over each microbatch's forward and are freed over its backward; "
        "model states and buffers are held all step",
        fontsize=7,
        color="#555555",
    )
    verdict = "fits" if result.memory.fits else "OUT OF MEMORY"
    ax.set_title(
        f"{config_title(result.spec)}\nmemory per pipeline stage over one step "
        f"(peak {result.memory.peak_bytes / GB:.1f} GB, {verdict})",
        fontsize=10,
    )
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8,
        frameon=False,
        ncol=1 if len(rows) <= 16 else 2,
    )
    fig.tight_layout()
    return fig


def _settled(points: list[tuple[float, float]], step_time_s: float) -> list[tuple[float, float]]:
    """Keep the last value at each instant and close the curve at the end of the step.

    A backward that frees a microbatch and the forward that allocates the next one at the same
    instant would otherwise draw a zero-width dip that no device ever sees.

    Examples:
        >>> _settled([(0.0, 1.0), (1.0, 2.0), (2.0, 1.0), (2.0, 2.0)], 3.0)
        [(0.0, 1.0), (1.0, 2.0), (2.0, 2.0), (3.0, 2.0)]
    """
    tolerance_s = 1e-9 * step_time_s
    out: list[tuple[float, float]] = []
    for time_s, value in points:
        if out and time_s - out[-1][0] <= tolerance_s:
            out[-1] = (out[-1][0], value)
        else:
            out.append((time_s, value))
    return [*out, (step_time_s, out[-1][1])]


def _stage_colours(count: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(i / max(1, count - 1) * 0.9) for i in range(count)]
