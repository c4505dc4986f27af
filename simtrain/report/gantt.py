"""Gantt charts of replayed programs: one row per rank, compute above, communication below.

Shared by ``simtrain schedule --out`` (abstract schedules: one bar per action, labelled with its
microbatch) and the run report's ``timeline.png`` (per-op programs: thousands of tasks per
rank). Each row has two lanes:

- the *compute lane*: forward (F), backward (B), weight-gradient (W), recomputation and
  optimizer tasks in their colours; when ``show_idle`` is set, the idle time between them is
  shaded as *exposed communication* (idle while a transfer of the rank is in flight) or
  *bubble* (idle with nothing in flight), the same split as
  :func:`~simtrain.metrics.timeline.rank_times`;
- the *communication lane* (thin, under it): every communication task, coloured by kind.

Figures are built with :class:`matplotlib.figure.Figure` directly, not pyplot: nothing global
is touched, no backend is chosen, and a notebook shows the returned figure exactly once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from simtrain.metrics.timeline import merge_intervals
from simtrain.parallel.program import Program
from simtrain.parallel.schedule_timing import task_action

COMPUTE_COLOURS = {
    "F": "#4c72b0",
    "B": "#dd8452",
    "W": "#55a868",
    "recompute": "#8172b3",
    "optimizer": "#937860",
    "other": "#64b5cd",
}
"""Compute-lane colours: by schedule action kind, then recompute and optimizer categories."""

COMM_COLOURS = {
    "tp_comm": "#c44e52",
    "pp_comm": "#da8bc3",
    "dp_comm": "#8c8c8c",
    "cp_comm": "#ccb974",
    "ep_comm": "#2ca02c",
    "host": "#9467bd",
}
"""Communication- and host-lane colours by task category (other categories are black)."""

IDLE_COLOURS = {
    "exposed communication": "#f4b6b6",
    "exposed host (kernel issue)": "#d5c6e6",
    "bubble": "#e6e6e6",
}

_LEGEND = {
    "F": "forward (F)",
    "B": "backward (B)",
    "W": "weight gradient (W)",
    "recompute": "recompute",
    "optimizer": "optimizer",
    "other": "other compute",
}

_MAX_EDGED_SPANS = 64  # above this many bars in a row (per-op programs), white edges look like gaps


def _subtract(
    a: list[tuple[float, float]], b: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Parts of the disjoint sorted intervals ``a`` not covered by ``b``.

    Examples:
        >>> _subtract([(0, 10)], [(2, 3), (5, 6)])
        [(0, 2), (3, 5), (6, 10)]
    """
    out = []
    for start, end in a:
        cursor = start
        for lo, hi in b:
            if hi <= cursor or lo >= end:
                continue
            if lo > cursor:
                out.append((cursor, lo))
            cursor = max(cursor, hi)
        if cursor < end:
            out.append((cursor, end))
    return out


def _compute_key(task_index: int, program: Program) -> tuple[str, str, int]:
    """(colour key, action label, microbatch) of a compute task."""
    task = program.tasks[task_index]
    action = task_action(task)
    if task.category in ("recompute", "optimizer"):
        key = task.category
    else:
        key = action.kind if action is not None else "other"
    label = str(action) if action is not None else task.label
    return key, label, task.microbatch


def _spans(program, start_s, end_s, rank):
    """Consecutive compute tasks of one action and colour, merged into bars."""
    spans: list[list] = []  # [start, end, colour key, action label, microbatch, chunk]
    for i, task in enumerate(program.tasks):
        if task.rank != rank or task.stream != "compute":
            continue
        key, label, mb = _compute_key(i, program)
        s, e = float(start_s[i]), float(end_s[i])
        last = spans[-1] if spans else None
        if last and last[2] == key and last[3] == label and s - last[1] <= 1e-12 * max(1.0, s):
            last[1] = e
        else:
            spans.append([s, e, key, label, mb, task.stage])
    return spans


def gantt_figure(
    program: Program,
    start_s: Sequence[float],
    end_s: Sequence[float],
    ranks: Sequence[int],
    row_labels: Sequence[str],
    title: str,
    time_unit: str | None = "s",
    show_idle: bool = True,
    chunks_per_rank: int = 1,
) -> Figure:
    """Draw the Gantt chart of ``ranks`` (rows, top to bottom) from a replayed program.

    Args:
        program: the replayed program.
        start_s: engine start time of each task.
        end_s: engine end time of each task.
        ranks: ranks to draw, one row each, in this order.
        row_labels: y-axis label of each row.
        title: figure title.
        time_unit: ``"s"`` or ``"ms"`` for real times, None for abstract time units.
        show_idle: shade idle compute time as exposed communication or bubble.
        chunks_per_rank: model chunks per rank (interleaved schedules); odd chunks are drawn
            lighter so the reader can tell them apart.
    """
    step = float(max(end_s)) if len(end_s) else 0.0
    scale = {"s": 1.0, "ms": 1e3, None: 1.0}[time_unit]
    num_rows = len(ranks)
    fig = Figure(figsize=(11.0, 0.62 * num_rows + 1.7))
    ax = fig.add_subplot()
    comm: dict[int, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for i, task in enumerate(program.tasks):
        if task.stream != "compute" and task.rank in ranks:
            comm[task.rank][task.category].append((float(start_s[i]), float(end_s[i])))
    used: set[str] = set()
    used_comm: set[str] = set()
    lane_offset = 0.12 if comm else 0.0  # centre the compute lane when nothing communicates
    for row, rank in enumerate(ranks):
        spans = _spans(program, start_s, end_s, rank)
        y = row - lane_offset  # compute lane: [y - 0.3, y + 0.3]; comm lane under it
        if show_idle:
            busy = merge_intervals((s, e) for s, e, *_ in spans)
            idle = _subtract([(0.0, step)], busy)
            in_flight = merge_intervals(iv for ivs in comm[rank].values() for iv in ivs)
            exposed = _subtract(idle, _subtract(idle, in_flight))
            for name, pieces in (
                ("exposed communication", exposed),
                ("bubble", _subtract(idle, exposed)),
            ):
                if pieces:
                    used.add(name)
                    ax.broken_barh(
                        [(s * scale, (e - s) * scale) for s, e in pieces],
                        (y - 0.3, 0.6),
                        facecolors=IDLE_COLOURS[name],
                        hatch="//" if name == "bubble" else None,
                        edgecolor="#bbbbbb" if name == "bubble" else "none",
                        linewidth=0,
                    )
        edged = len(spans) <= _MAX_EDGED_SPANS
        by_style: dict[tuple[str, float], list[tuple[float, float]]] = defaultdict(list)
        for s, e, key, _, _, stage in spans:
            chunk = stage // len(ranks) if chunks_per_rank > 1 and stage >= 0 else 0
            by_style[(key, 1.0 - 0.35 * (chunk % 2))].append((s * scale, (e - s) * scale))
            used.add(key)
        for (key, alpha), bars in by_style.items():
            ax.broken_barh(
                bars,
                (y - 0.3, 0.6),
                facecolors=COMPUTE_COLOURS[key],
                alpha=alpha,
                edgecolor="white" if edged else "none",
                linewidth=0.6 if edged else 0,
            )
        for s, e, key, _, mb, _ in spans:
            if mb >= 0 and key in "FBW" and (e - s) > 0.012 * step:
                ax.text(
                    (s + e) / 2 * scale,
                    y,
                    str(mb),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                )
        for category, intervals in comm[rank].items():
            used_comm.add(category)
            ax.broken_barh(
                [(s * scale, (e - s) * scale) for s, e in intervals],
                (row + 0.22, 0.16),
                facecolors=COMM_COLOURS.get(category, "black"),
                linewidth=0,
            )
    ax.set_yticks(range(num_rows), list(row_labels))
    ax.set_ylim(num_rows - 0.5, -0.55)
    ax.set_xlim(0, step * scale)
    ax.set_xlabel("time (abstract units)" if time_unit is None else f"time ({time_unit})")
    ax.set_title(title, fontsize=10)
    handles = [
        Patch(color=COMPUTE_COLOURS[k], label=_LEGEND.get(k, k))
        for k in COMPUTE_COLOURS
        if k in used
    ]
    handles += [
        Patch(
            facecolor=IDLE_COLOURS[k],
            hatch="//" if k == "bubble" else None,
            edgecolor="#bbbbbb",
            label=f"idle: {k}",
        )
        for k in IDLE_COLOURS
        if k in used
    ]
    handles += [
        Patch(color=COMM_COLOURS.get(k, "black"), label=f"{k} (lower lane)")
        for k in sorted(used_comm)
    ]
    if chunks_per_rank > 1:
        handles.append(Patch(color="#888888", alpha=0.65, label="lighter: odd model chunk"))
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False
    )
    fig.tight_layout()
    return fig
