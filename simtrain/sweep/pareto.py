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


def plot_pareto(table: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Save throughput against GPUs, memory headroom and $ per Mtoken, fronts highlighted."""
    fig = Figure(figsize=(15, 4.5))  # a bare Figure: no pyplot state, no backend switch
    axes = fig.subplots(1, len(PARETO_PANELS))
    done = table[table["status"] == "ok"]
    for ax, (column, goal, label) in zip(axes, PARETO_PANELS, strict=True):
        scale = 1e-9 if column.endswith("_bytes") else 1.0
        ax.scatter(done[column] * scale, done["tokens_per_s"], s=10, alpha=0.4, label="simulated")
        front = pareto_front(table, {column: goal, "tokens_per_s": "max"})
        if not front.empty:
            front = front.sort_values(column)
            ax.plot(front[column] * scale, front["tokens_per_s"], "o-", color="C3", label="front")
        ax.set_xlabel(label)
        ax.set_ylabel("tokens per second")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title or "sweep: Pareto fronts")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out
