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
    num_links = capacity_bytes_per_s.size
    links = np.where(routes >= 0, routes, num_links)  # padding -> a dummy unbounded link
    remaining = np.append(capacity_bytes_per_s.astype(float), np.inf)
    rates = np.zeros(num_flows)
    frozen = (routes < 0).all(axis=1)
    rates[frozen] = np.inf
    while not frozen.all():
        live = ~frozen
        counts = np.bincount(links[live].ravel(), minlength=num_links + 1)
        counts[num_links] = 0
        used = counts > 0
        share = np.full(num_links + 1, np.inf)
        share[used] = remaining[used] / counts[used]
        delta = share.min()
        rates[live] += delta
        remaining[used] -= delta * counts[used]
        full = np.zeros(num_links + 1, dtype=bool)
        full[used] = remaining[used] <= _SATURATED * np.append(capacity_bytes_per_s, 1.0)[used]
        frozen |= live & full[links].any(axis=1)
    return rates


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

    def advance(self, dt_s: float) -> np.ndarray:
        """Move time forward by ``dt_s`` (at most the next completion); return finished ids."""
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
    """Seconds until the last byte of a set of flows that all start at time 0 has left."""
    sim = FlowSimulator(capacity_bytes_per_s)
    sim.add(routes, size_bytes)
    now = 0.0
    while sim.num_active:
        # Retire every flow that ends within a hair of the first: one event, not thousands.
        dt = sim.time_to_next_completion_s() * (1 + _SAME_TIME)
        now += dt
        sim.advance(dt)
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
