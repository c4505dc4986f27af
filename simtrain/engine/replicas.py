"""Replica-aware timing: each collective runs with all its SPMD replicas loading the network.

Under SPMD every data-parallel group reduces its gradients at the same moment, every tensor-
parallel group all-reduces at the same moment, and every pipeline replica sends its
activations at the same moment. Timing a collective alone ignores that these replicas share
links (the spine of an oversubscribed fat-tree, a node's NICs). This wrapper times a
collective on ``ranks`` as all groups of the same mesh axes running it together, through the
flow model's :meth:`~simtrain.network.flow_model.FlowNetworkModel.concurrent_time_s`, so
reduced mode (one simulated rank per stage) still loads every link with every replica's
flows. Results are cached per (kind, axis groups, size).
"""

from __future__ import annotations

from collections.abc import Sequence

from simtrain.network.base import CollectiveKind, CollectiveTiming
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.parallel.layout import RankLayout

AXES = ("tp", "cp", "dp", "dp-cp", "ep", "edp", "tp-dp", "tp-cp")
"""Process-group shapes whose replicas run together (any group the builder may use)."""


class ReplicatedNetwork:
    """A NetworkModel that times collectives with all their replicas at once.

    Args:
        network: the flow-level model of the cluster.
        layout: the job's rank layout (to find a group's replicas).
    """

    def __init__(self, network: FlowNetworkModel, layout: RankLayout) -> None:
        self.network = network
        self._replicas: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for axes in AXES:
            groups = [tuple(g) for g in layout.groups(axes)]
            if len(groups[0]) > 1:
                for group in groups:
                    self._replicas.setdefault(group, groups)
        self._pipelines = [tuple(g) for g in layout.groups("pp")]
        self._stage_of = {r: (i, s) for i, g in enumerate(self._pipelines) for s, r in enumerate(g)}
        self._cache: dict[tuple[str, int, float], float] = {}

    def collective_time_s(
        self, kind: CollectiveKind, ranks: Sequence[int], size_bytes: float
    ) -> float:
        """Seconds for the collective with every replica of its group running it too."""
        groups = self._replicas.get(tuple(ranks))
        if groups is None or len(groups) == 1:
            return self.network.collective_time_s(kind, ranks, size_bytes)
        key = (kind, id(groups), size_bytes)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self.network.concurrent_time_s(kind, groups, size_bytes)
        return cached

    def p2p_time_s(self, src: int, dst: int, size_bytes: float) -> float:
        """Seconds for a pipeline transfer; every pipeline replica sends at the same time."""
        (_, a), (_, b) = self._stage_of[src], self._stage_of[dst]
        key = (f"p2p:{a}:{b}", 0, size_bytes)
        cached = self._cache.get(key)
        if cached is None:
            pairs = [(g[a], g[b]) for g in self._pipelines]
            cached = self._cache[key] = self.network.concurrent_time_s(
                "send_recv", pairs, size_bytes
            )
        return cached

    def time_collective(
        self, kind: str, ranks: Sequence[int], size_bytes: float
    ) -> CollectiveTiming:
        """Time with all replicas, and the algorithm and protocol chosen for one group."""
        alone = self.network.time_collective(kind, ranks, size_bytes)
        if kind == "send_recv":
            time_s = self.p2p_time_s(ranks[0], ranks[1], size_bytes)
        else:
            time_s = self.collective_time_s(kind, ranks, size_bytes)  # type: ignore[arg-type]
        return CollectiveTiming(time_s, alone.algorithm, alone.protocol)
