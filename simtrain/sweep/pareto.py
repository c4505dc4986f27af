"""Pareto fronts of a sweep table, and the plot of throughput against GPUs, headroom and $.

A row is on the front when no other row is at least as good in every objective and strictly
better in one. :func:`pareto_mask` is pure numpy on a matrix of objectives; the plot is the
only function here that touches matplotlib (a bare ``Figure``, no pyplot global state).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

PARETO_PANELS: tuple[tuple[str, str, str], ...] = (
    ("num_gpus", "min", "GPUs"),
    ("memory_headroom_bytes", "max", "memory headroom (GB)"),
    ("usd_per_million_tokens", "min", "USD per million tokens"),
)
"""x column, its goal and axis label of each panel; every panel plots tokens_per_s upward."""


def pareto_mask(values: np.ndarray, maximize: list[bool]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``values`` (rows x objectives).

    Examples:
        >>> pareto_mask(np.array([[1.0, 1.0], [2.0, 0.5], [0.5, 0.5]]), [True, True]).tolist()
        [True, True, False]
    """
    signed = np.where(np.array(maximize), values, -values)  # larger is better everywhere
    at_least = (signed[None, :, :] >= signed[:, None, :]).all(axis=2)  # [i, j]: j >= i
    better = (signed[None, :, :] > signed[:, None, :]).any(axis=2)
    dominated = (at_least & better).any(axis=1)
    return ~dominated


def pareto_front(table: pd.DataFrame, objectives: dict[str, str]) -> pd.DataFrame:
    """Simulated rows of ``table`` on the Pareto front of ``objectives`` (column -> max/min).

    Rows missing any objective (pruned, failed, no price) are left out.
    """
    done = table[table["status"] == "ok"].dropna(subset=list(objectives))
    if done.empty:
        return done
    values = done[list(objectives)].to_numpy(dtype=float)
    mask = pareto_mask(values, [goal == "max" for goal in objectives.values()])
    return done[mask]


def meaningful_panels(table: pd.DataFrame) -> list[tuple[str, str, str]]:
    """The panels of :data:`PARETO_PANELS` worth drawing: x spreads over at least 1 %.

    A sweep over one cluster size has nothing to show against GPUs, a sweep without a price
    nothing against dollars, and headrooms that differ by megabytes nothing against memory;
    such panels would be one column of dots.
    """
    done = table[table["status"] == "ok"]
    panels = []
    for panel in PARETO_PANELS:
        values = done[panel[0]].dropna().astype(float) if panel[0] in done else pd.Series()
        if len(values) >= 2 and values.max() - values.min() > 0.01 * values.abs().max():
            panels.append(panel)
    return panels


def _thousands(value: float, _position: int) -> str:
    return f"{value:,.0f}"


def plot_pareto(table: pd.DataFrame, path: str | Path, title: str = "") -> Path | None:
    """Save tokens/s against GPUs, memory headroom and $ per Mtoken, with each front drawn.

    Only panels whose x axis varies are drawn (:func:`meaningful_panels`); returns None and
    writes nothing when none does.
    """
    panels = meaningful_panels(table)
    if not panels:
        return None
    # A bare Figure: no pyplot state, no backend switch. 4.5 inches per panel keeps the
    # labels readable at the saved size.
    fig = Figure(figsize=(4.5 * len(panels) + 0.5, 4.2))
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    done = table[table["status"] == "ok"]
    for ax, (column, goal, label) in zip(axes, panels, strict=True):
        scale = 1e-9 if column.endswith("_bytes") else 1.0
        ax.scatter(
            done[column] * scale, done["tokens_per_s"], s=12, alpha=0.4, label="configuration"
        )
        front = pareto_front(table, {column: goal, "tokens_per_s": "max"})
        if not front.empty:
            front = front.sort_values(column)
            ax.plot(
                front[column] * scale,
                front["tokens_per_s"],
                "o-",
                color="C3",
                label=f"Pareto front ({'fewer' if goal == 'min' else 'more'} is better)",
            )
        ax.set_xlabel(label)
        ax.set_ylabel("tokens per second")
        ax.yaxis.set_major_formatter(FuncFormatter(_thousands))
        if column == "num_gpus":
            ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title or "sweep: Pareto fronts")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out
