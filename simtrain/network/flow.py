"""Flow-level network model: flows on routes share links max-min fairly.

A flow moves ``size_bytes`` along a fixed route of directed links. At any instant the rates
of the active flows are the max-min fair allocation (progressive filling: raise every
unfrozen flow's rate together until some link is full, freeze the flows crossing it,
repeat). Rates are recomputed whenever a flow starts or ends. A flow's data arrives its
route latency (sum of per-link latencies) after its last byte leaves.

:class:`FlowSimulator` is the pure state machine (no clock of its own: the caller advances
it, so the SimPy engine can drive it); :func:`run_phases` uses it to time a sequence of
:class:`Phase` s, each a set of flows that start together and must all arrive before the
next phase starts (the steps of a collective algorithm).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

RouteFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""A bulk router: ``(src, dst) -> link ids padded with -1`` (see ``Topology.routes``)."""

_SATURATED = 1e-9
"""Relative slack under which a link counts as full during progressive filling."""
_SAME_TIME = 1e-9
"""Relative slack under which flows finishing together are retired in one event."""
EVENT_WINDOW = 0.01
"""Smallest time step of :func:`transfer_time_s` as a fraction of the time elapsed: flows
ending within it are retired together, and the others change rate at the end of the step,
not the instant a flow ends. This bounds the number of rate recomputations (thousands of
distinct finish times otherwise, e.g. a tree on a 4,096-chip torus) for an error of about
1 % of the phase time (either way: freeing a flow can also lower another's max-min rate);
bytes stay exactly conserved."""


@dataclass(frozen=True, eq=False)
class Phase:
    """Point-to-point flows that start together, repeated ``repeat`` times back to back.

    Endpoints are topology node indices (devices, or a switch for in-network reduction).
    A pipelined algorithm streams chunks through the same flows: it pays the bandwidth time
    of every repeat but the route latency only ``latency_count`` times (its pipeline
    depth); by default every repeat pays it, as in the steps of a ring.
    """

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    repeat: int = 1
    latency_count: int | None = None

    @classmethod
    def of(
        cls,
        src: Sequence[int] | np.ndarray,
        dst: Sequence[int] | np.ndarray,
        size_bytes: float | np.ndarray,
        repeat: int = 1,
        latency_count: int | None = None,
    ) -> Phase:
        """Build a phase, broadcasting a scalar size to every flow."""
        src_arr = np.asarray(src, dtype=np.int64).ravel()
        dst_arr = np.asarray(dst, dtype=np.int64).ravel()
        sizes = np.broadcast_to(np.asarray(size_bytes, dtype=float), src_arr.shape).copy()
        return cls(src_arr, dst_arr, sizes, repeat, latency_count)

    @property
    def bytes_sent(self) -> float:
        """Bytes injected by all flows of all repeats."""
        return float(self.size_bytes.sum()) * self.repeat

    @property
    def num_latencies(self) -> int:
        """How many times the phase pays its route latency."""
        return self.repeat if self.latency_count is None else self.latency_count


def max_min_rates(routes: np.ndarray, capacity_bytes_per_s: np.ndarray) -> np.ndarray:
    """Max-min fair rates of flows on padded ``routes`` (-1 = no link) by progressive filling.

    A flow with no link at all (source = destination) gets an infinite rate.

    Examples:
        Two flows on one link get half of it each; a third on another link gets all of it:

        >>> max_min_rates(np.array([[0], [0], [1]]), np.array([10.0, 4.0])).tolist()
        [5.0, 5.0, 4.0]
    """
    num_flows = routes.shape[0]
    on_link = routes >= 0
    hops = on_link.sum(axis=1)
    rates = np.full(num_flows, np.inf)
    if not on_link.any():
        return rates
    # Work on the links in use only, renumbered 0..L-1; entries are (flow, link) pairs in
    # flow order. All unfrozen flows share one rate, the water level: a link fills when
    # level x (its unfrozen flows) reaches its capacity minus the frozen flows' rates.
    used, entry_link = np.unique(routes[on_link], return_inverse=True)
    entry_flow = np.repeat(np.arange(num_flows), hops)
    flow_start = np.concatenate(([0], np.cumsum(hops)))
    by_link = np.argsort(entry_link, kind="stable")
    unfrozen = np.bincount(entry_link, minlength=used.size).astype(float)
    link_start = np.concatenate(([0], np.cumsum(unfrozen))).astype(np.int64)
    free = capacity_bytes_per_s[used].astype(float)
    frozen = hops == 0
    while True:
        active = np.flatnonzero(unfrozen > 0)
        if not active.size:
            return rates
        fill_level = free[active] / unfrozen[active]
        level = fill_level.min()
        full = active[fill_level <= level * (1 + _SATURATED)]
        flows = entry_flow[by_link[_ranges(link_start[full], link_start[full + 1])]]
        flows = np.unique(flows[~frozen[flows]])
        rates[flows] = level
        frozen[flows] = True
        links = entry_link[_ranges(flow_start[flows], flow_start[flows + 1])]
        dropped = np.bincount(links, minlength=used.size)
        free -= level * dropped
        unfrozen -= dropped


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, e)`` for every (s, e) pair, without a Python loop.

    Examples:
        >>> _ranges(np.array([0, 5]), np.array([2, 8])).tolist()
        [0, 1, 5, 6, 7]
    """
    lengths = ends - starts
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(lengths.sum())


class FlowSimulator:
    """Pure state machine of flows sharing links; the caller owns the clock.

    Use: :meth:`add` flows (rates are recomputed), ask :meth:`time_to_next_completion_s`,
    :meth:`advance` by at most that much and collect the ids that finished (rates are
    recomputed again). ``link_bytes`` accumulates the bytes each link has carried.
    """

    def __init__(self, capacity_bytes_per_s: np.ndarray) -> None:
        self.capacity_bytes_per_s = np.asarray(capacity_bytes_per_s, dtype=float)
        self.link_bytes = np.zeros(self.capacity_bytes_per_s.size)
        self._routes = np.zeros((0, 1), dtype=np.int64)
        self._remaining = np.zeros(0)
        self._ids = np.zeros(0, dtype=np.int64)
        self._rates = np.zeros(0)
        self._next_id = 0

    @property
    def num_active(self) -> int:
        """Flows still transferring."""
        return int(self._ids.size)

    def rates(self) -> dict[int, float]:
        """Current rate of every active flow, by flow id (bytes/s)."""
        return dict(zip(self._ids.tolist(), self._rates.tolist(), strict=True))

    def add(self, routes: np.ndarray, size_bytes: np.ndarray) -> np.ndarray:
        """Start flows (one padded route row each); return their ids."""
        count = routes.shape[0]
        ids = np.arange(self._next_id, self._next_id + count)
        self._next_id += count
        width = max(self._routes.shape[1], routes.shape[1])
        self._routes = np.vstack([_widen(self._routes, width), _widen(routes, width)])
        self._remaining = np.concatenate([self._remaining, np.asarray(size_bytes, dtype=float)])
        self._ids = np.concatenate([self._ids, ids])
        self._recompute()
        return ids

    def time_to_next_completion_s(self) -> float:
        """Seconds until the next flow finishes at current rates (inf when idle)."""
        if not self._ids.size:
            return np.inf
        with np.errstate(divide="ignore"):
            return float(np.min(self._remaining / self._rates))

    def time_to_last_completion_s(self) -> float:
        """Seconds until every active flow finishes if rates stayed as they are now."""
        if not self._ids.size:
            return 0.0
        with np.errstate(divide="ignore"):
            return float(np.max(self._remaining / self._rates))

    def advance(self, dt_s: float) -> np.ndarray:
        """Move time forward by ``dt_s`` at the current rates; return the ids that finished.

        A flow whose remaining bytes take less than ``dt_s`` finishes within the step (it
        sends them all); rates are recomputed once, at the end of the step.
        """
        if not self._ids.size:
            return self._ids
        finite = np.isfinite(self._rates)
        moved = np.where(finite, np.where(finite, self._rates, 0.0) * dt_s, self._remaining)
        moved = np.minimum(moved, self._remaining)
        on_link = self._routes >= 0
        weights = np.broadcast_to(moved[:, None], self._routes.shape)[on_link]
        self.link_bytes += np.bincount(
            self._routes[on_link], weights=weights, minlength=self.link_bytes.size
        )
        self._remaining = self._remaining - moved
        done = self._remaining <= _SAME_TIME * np.maximum(moved, 1.0)
        finished = self._ids[done]
        if done.any():
            keep = ~done
            self._routes = self._routes[keep]
            self._remaining = self._remaining[keep]
            self._ids = self._ids[keep]
            self._recompute()
        return finished

    def _recompute(self) -> None:
        self._rates = max_min_rates(self._routes, self.capacity_bytes_per_s)


def _widen(routes: np.ndarray, width: int) -> np.ndarray:
    """Pad route rows with -1 up to ``width`` columns."""
    if routes.shape[1] == width:
        return routes
    pad = np.full((routes.shape[0], width - routes.shape[1]), -1, dtype=np.int64)
    return np.hstack([routes, pad])


def transfer_time_s(
    routes: np.ndarray, size_bytes: np.ndarray, capacity_bytes_per_s: np.ndarray
) -> float:
    """Seconds until the last byte of a set of flows that all start at time 0 has left.

    Steps from one completion to the next, but never by less than ``EVENT_WINDOW`` of the
    time elapsed (see there).
    """
    sim = FlowSimulator(capacity_bytes_per_s)
    sim.add(routes, size_bytes)
    now = 0.0
    while sim.num_active:
        step = max(sim.time_to_next_completion_s(), EVENT_WINDOW * now)
        step = min(step, sim.time_to_last_completion_s()) * (1 + _SAME_TIME)
        sim.advance(step)
        now += step
    return now


def run_phases(
    phases: Sequence[Phase],
    route: RouteFn,
    capacity_bytes_per_s: np.ndarray,
    link_latency_s: np.ndarray,
) -> float:
    """Seconds to run ``phases`` one after another, each flow on ``route(src, dst)``.

    A phase costs ``repeat`` x its transfer time (max-min fair sharing among its flows) plus
    ``num_latencies`` x its longest route latency.

    Args:
        phases: the steps of an algorithm; phase k+1 starts when every flow of k arrived.
        route: bulk router returning padded link-id rows (``Topology.routes``).
        capacity_bytes_per_s: bandwidth of every link.
        link_latency_s: latency of every link; a route's latency is their sum.
    """
    total_s = 0.0
    for phase in phases:
        if phase.src.size == 0 or phase.repeat == 0:
            continue
        routes = route(phase.src, phase.dst)
        latency = np.where(routes >= 0, link_latency_s[np.maximum(routes, 0)], 0.0).sum(axis=1)
        transfer = transfer_time_s(routes, phase.size_bytes, capacity_bytes_per_s)
        total_s += phase.repeat * transfer + phase.num_latencies * float(latency.max())
    return total_s
