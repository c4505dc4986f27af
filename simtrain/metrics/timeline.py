"""Per-rank time accounting of a simulated step: busy, exposed communication, host and bubble.

For each simulated rank the compute stream is either busy or idle. Idle time during which
some communication of that rank is in flight is *exposed communication* (the rank waits for
data); idle time with no communication in flight but its host still issuing kernels is
*exposed host* time (the device waits for the CPU: launch-bound, small per-GPU work); the
rest is *bubble* (the rank waits for another pipeline stage, or for nothing at all at the end
of the step). The four add up to the step time exactly, which the tests check.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from simtrain.parallel.program import Program

HOST_STREAM = "host"  # stream of the host-issue tasks (simtrain.engine.host)


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


@dataclass
class RankTime:
    """Where one rank's step time went.

    Attributes:
        rank: global rank.
        busy_s: time the compute stream was busy (compute, recompute and optimizer).
        exposed_comm_s: compute-stream idle time with communication in flight.
        bubble_s: compute-stream idle time with neither communication nor host issue in
            flight.
        by_category_s: summed task durations per category (communication may overlap
            compute, so these do not add up to the step time). A collective counts for each
            of its members; a point-to-point transfer for its sender.
    """

    rank: int
    busy_s: float
    exposed_comm_s: float
    bubble_s: float
    by_category_s: dict[str, float] = field(default_factory=dict)
    exposed_host_s: float = 0.0
    """Compute-stream idle time, with no communication in flight, while the host is still
    issuing this rank's kernels."""
    exposed_by_category_s: dict[str, float] = field(default_factory=dict)
    """Per communication category, compute-stream idle time while communication of that
    category is in flight: what overlap left exposed. Categories in flight at the same idle
    moment each count it, so these may add up to more than ``exposed_comm_s``."""


def union_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals ``[starts[i], ends[i])`` as sorted disjoint arrays (vectorised).

    Examples:
        >>> union_intervals(np.array([3.0, 0.0, 0.5]), np.array([4.0, 1.0, 2.0]))
        (array([0., 3.]), array([2., 4.]))
    """
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    first = np.empty(s.size, dtype=bool)
    first[0] = True
    first[1:] = s[1:] > reach[:-1]
    heads = np.flatnonzero(first)
    return s[heads], np.maximum.reduceat(e, heads)


def covered_up_to(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Length of the union of sorted disjoint intervals that lies before each time ``t``."""
    if starts.size == 0:
        return np.zeros_like(t)
    before = np.concatenate(([0.0], np.cumsum(ends - starts)))
    k = np.searchsorted(starts, t, side="right") - 1  # last interval starting at or before t
    safe = np.maximum(k, 0)
    partial = np.clip(t - starts[safe], 0.0, ends[safe] - starts[safe])
    return np.where(k >= 0, before[safe] + partial, 0.0)


def rank_times(
    program: Program,
    start_s: np.ndarray,
    end_s: np.ndarray,
    step_time_s: float,
    host: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[RankTime]:
    """Account the step time of every simulated rank.

    Compute tasks of a rank never overlap (one compute stream), so its busy time is their
    sum; exposed communication is the part of the union of its communication intervals that
    no compute covers; exposed host time is the part of its host-issue intervals that
    neither compute nor communication covers.

    Host-issue intervals are the program's ``host`` stream tasks, or, for a program without
    them, ``host``: (starts, ends) of each rank's host tasks (the engine's
    ``EngineResult.host.intervals()``, which spares recording them as tasks).
    """
    tasks = program.tasks
    simulated = set(program.simulated_ranks)
    categories: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    # Task indices per rank, in program order: compute, communication in flight (by
    # category), host issue.
    compute_rows: dict[int, list[int]] = defaultdict(list)
    comm_rows: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    host_rows: dict[int, list[int]] = defaultdict(list)
    comm_order: dict[int, list[int]] = defaultdict(list)
    duration = end_s - start_s
    seconds = duration.tolist()
    members_of: dict[tuple[int, ...], list[int]] = {}
    for index, task in enumerate(tasks):
        if task.stream == "compute":
            compute_rows[task.rank].append(index)
            categories[task.rank][task.category] += seconds[index]
            continue
        if task.stream == HOST_STREAM:
            host_rows[task.rank].append(index)
            categories[task.rank][task.category] += seconds[index]
            continue
        # A communication task is in flight for every simulated member of its group (a
        # collective shared by its members, or both ends of a point-to-point transfer).
        members = members_of.get(task.group)
        if members is None:
            members = members_of[task.group] = [r for r in task.group if r in simulated]
        for rank in members or (task.rank,):
            comm_order[rank].append(index)
            comm_rows[rank][task.category].append(index)
            if rank == task.rank or task.collective_key:
                categories[rank][task.category] += seconds[index]
    empty = np.zeros(0, dtype=np.int64)
    result = []
    for rank in program.simulated_ranks:
        mine = np.asarray(compute_rows.get(rank, empty), dtype=np.int64)
        busy_s = float(duration[mine].sum())
        comm = np.asarray(comm_order.get(rank, empty), dtype=np.int64)
        exposed = _uncovered(start_s[comm], end_s[comm], start_s[mine], end_s[mine])
        exposed_by = {
            category: _uncovered(start_s[rows], end_s[rows], start_s[mine], end_s[mine])
            for category, rows in sorted(comm_rows[rank].items())
        }
        rows = np.asarray(host_rows.get(rank, empty), dtype=np.int64)
        host_starts, host_ends = start_s[rows], end_s[rows]
        if host is not None and rank in host:
            host_starts, host_ends = host[rank]
            total = categories[rank]["host"]
            for length in (host_ends - host_starts).tolist():
                total += length
            categories[rank]["host"] = total
        exposed_host = 0.0
        if host_starts.size:
            # Idle time the host explains: uncovered by compute and communication together.
            covers = np.concatenate((mine, comm))
            exposed_host = _uncovered(host_starts, host_ends, start_s[covers], end_s[covers])
        idle_s = step_time_s - busy_s
        result.append(
            RankTime(
                rank,
                busy_s,
                exposed,
                max(0.0, idle_s - exposed - exposed_host),
                dict(categories[rank]),
                exposed_host,
                exposed_by,
            )
        )
    return result


def _uncovered(
    starts: np.ndarray, ends: np.ndarray, cover_starts: np.ndarray, cover_ends: np.ndarray
) -> float:
    """Length of the union of ``[starts, ends)`` that the union of the cover leaves free."""
    us, ue = union_intervals(starts, ends)
    total = float((ue - us).sum())
    if not total:
        return 0.0
    cs, ce = union_intervals(cover_starts, cover_ends)
    # Covered part of the union = sum over cover intervals of their overlap with the union.
    overlapped = covered_up_to(ce, us, ue) - covered_up_to(cs, us, ue)
    return max(0.0, total - float(overlapped.sum()))
