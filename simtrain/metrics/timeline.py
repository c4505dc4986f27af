"""Per-rank time accounting of a simulated step: busy, exposed communication and bubble.

For each simulated rank the compute stream is either busy or idle. Idle time during which
some communication of that rank is in flight is *exposed communication* (the rank waits for
data); idle time with no communication in flight is *bubble* (the rank waits for another
pipeline stage, or for nothing at all at the end of the step). The three add up to the step
time exactly, which the tests check.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from simtrain.parallel.program import Program


def merge_intervals(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Union of half-open intervals as a sorted list of disjoint intervals.

    Examples:
        >>> merge_intervals([(3, 4), (0, 1), (0.5, 2)])
        [(0, 2), (3, 4)]
    """
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def overlap_s(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted disjoint interval lists."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass
class RankTime:
    """Where one rank's step time went.

    Attributes:
        rank: global rank.
        busy_s: time the compute stream was busy (compute, recompute and optimizer).
        exposed_comm_s: compute-stream idle time with communication in flight.
        bubble_s: compute-stream idle time with no communication in flight.
        by_category_s: summed task durations per category (communication may overlap
            compute, so these do not add up to the step time). A collective counts for each
            of its members; a point-to-point transfer for its sender.
    """

    rank: int
    busy_s: float
    exposed_comm_s: float
    bubble_s: float
    by_category_s: dict[str, float] = field(default_factory=dict)


def rank_times(
    program: Program, start_s: np.ndarray, end_s: np.ndarray, step_time_s: float
) -> list[RankTime]:
    """Account the step time of every simulated rank."""
    compute: dict[int, list[tuple[float, float]]] = defaultdict(list)
    comm: dict[int, list[tuple[float, float]]] = defaultdict(list)
    categories: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    simulated = set(program.simulated_ranks)
    for index, task in enumerate(program.tasks):
        interval = (float(start_s[index]), float(end_s[index]))
        if task.stream == "compute":
            compute[task.rank].append(interval)
            categories[task.rank][task.category] += interval[1] - interval[0]
            continue
        # A communication task is in flight for every simulated member of its group (a
        # collective shared by its members, or both ends of a point-to-point transfer).
        members = [r for r in task.group if r in simulated] or [task.rank]
        for rank in members:
            comm[rank].append(interval)
            if rank == task.rank or task.collective_key:
                categories[rank][task.category] += interval[1] - interval[0]
    result = []
    for rank in program.simulated_ranks:
        busy = merge_intervals(compute[rank])
        busy_s = sum(e - s for s, e in busy)
        idle, cursor = [], 0.0
        for s, e in busy:
            if s > cursor:
                idle.append((cursor, s))
            cursor = e
        if cursor < step_time_s:
            idle.append((cursor, step_time_s))
        exposed = overlap_s(idle, merge_intervals(comm[rank]))
        idle_s = step_time_s - busy_s
        result.append(
            RankTime(rank, busy_s, exposed, max(0.0, idle_s - exposed), dict(categories[rank]))
        )
    return result
