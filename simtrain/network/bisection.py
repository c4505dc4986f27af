"""Achieved bisection bandwidth of a Clos under ECMP hashing and under adaptive routing.

A topology's nominal bisection (``Topology.bisection_bandwidth_bytes_per_s``) assumes that
traffic spreads evenly over every equal-cost path. Hash-based ECMP does not spread it
evenly: flows that hash onto the same uplink share it while others idle. This module
measures what a bisection-crossing permutation actually achieves in the flow model: every
NIC of node i sends to the same NIC of node i + N/2 and back (all at once, every flow as
fast as max-min fair sharing lets it), once with the topology's seeded ECMP hash and once
with adaptive (least-loaded) routing. The achieved bisection is the summed rate of the flows
crossing the cut in one direction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simtrain.network.flow import max_min_rates
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import Topology, build_topology


@dataclass(frozen=True)
class BisectionReport:
    """Nominal and achieved bisection bandwidth, bytes/s per direction."""

    nominal_bytes_per_s: float
    ecmp_bytes_per_s: float
    adaptive_bytes_per_s: float

    @property
    def ecmp_share(self) -> float:
        """Achieved with ECMP hashing over nominal."""
        return self.ecmp_bytes_per_s / self.nominal_bytes_per_s

    @property
    def adaptive_share(self) -> float:
        """Achieved with adaptive routing over nominal."""
        return self.adaptive_bytes_per_s / self.nominal_bytes_per_s


def bisection_flows(topology: Topology) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) devices of the cut-crossing permutation (first half of nodes to the second).

    Each NIC is represented by the first device that uses it (device ``a`` uses NIC
    ``a * nics // g``); both directions are included, the forward ones first.
    """
    g, nics = topology.gpus_per_node, topology.nics_per_node
    half = topology.num_nodes // 2
    local = -(-np.arange(nics) * g // nics)  # first device of each NIC
    first = (np.arange(half)[:, None] * g + local[None, :]).ravel()
    second = first + half * g
    return np.concatenate([first, second]), np.concatenate([second, first])


def achieved_bisection_bytes_per_s(topology: Topology) -> float:
    """Summed max-min rate of the forward half of :func:`bisection_flows` on ``topology``."""
    src, dst = bisection_flows(topology)
    rates = max_min_rates(topology.routes(src, dst), topology.link_bandwidth_bytes_per_s)
    return float(rates[: src.size // 2].sum())


def bisection_report(cluster: ClusterSpec, seed: int = 0) -> BisectionReport | None:
    """Nominal, hashed-ECMP and adaptive bisection of a multi-node Clos; None otherwise."""
    topology = build_topology(cluster, seed)
    if topology.clos is None or topology.num_nodes < 2:
        return None
    spec = cluster.topology
    current = spec.clos_routing or "ecmp"  # the flow model's default
    routing = "adaptive" if current == "ecmp" else "ecmp"
    other = build_topology(
        cluster.model_copy(update={"topology": spec.model_copy(update={"clos_routing": routing})}),
        seed,
    )
    measured = {
        current: achieved_bisection_bytes_per_s(topology),
        routing: achieved_bisection_bytes_per_s(other),
    }
    return BisectionReport(
        topology.bisection_bandwidth_bytes_per_s, measured["ecmp"], measured["adaptive"]
    )
