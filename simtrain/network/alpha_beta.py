"""Closed-form alpha-beta network model: ring collectives over a two-level cluster.

Ranks are placed on nodes in order (global rank r sits on node r // gpus_per_node). A group
inside one node moves data over the scale-up fabric at its measured effective bandwidth. A
group that spans nodes is limited by the slower of the scale-up fabric and the node's NICs
usable by the group: with k group members per node, NCCL runs one ring per NIC and each ring
crosses every node boundary once, so the node's share of ring traffic leaves through
min(k, NICs) NICs. For 2 x DGX A100 with 8 HDR NICs that gives min(230, 8 x 24) = 192 GB/s
busbw, the measured figure in ``docs/references/collectives.md`` §6.2.

Ring costs (n ranks, bandwidth B, per-step latency α; sizes as in ``network.base``):

- all-reduce: 2(n-1)/n · S/B + 2(n-1)·α
- all-gather, reduce-scatter: (n-1)/n · S/B + (n-1)·α
- broadcast, reduce (pipelined ring): S/B + (n-1)·α
- all-to-all (direct): max(intra-node share / B_up, inter-node share / node NIC bandwidth)
  + (n-1)·α
- send/recv: S/B + α over the fabric joining the two ranks (one NIC between nodes); on a
  group of more than two, a ring exchange timed by its slowest neighbour pair.

The model assumes full bisection bandwidth and no other traffic; the flow-level model adds
topology and contention.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from simtrain.catalog import cluster_links
from simtrain.network.base import CollectiveKind, CollectiveTiming
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.hardware import LinkSpec


class AlphaBetaNetwork:
    """Ring-based alpha-beta costs on a cluster of nodes (see the module docstring)."""

    def __init__(
        self, gpus_per_node: int, scale_up: LinkSpec, scale_out: LinkSpec, nics_per_node: int
    ) -> None:
        self.gpus_per_node = gpus_per_node
        self.scale_up = scale_up
        self.scale_out = scale_out
        self.nics_per_node = nics_per_node
        self._cache: dict[tuple[str, tuple[int, ...], float], float] = {}

    @classmethod
    def from_cluster(cls, cluster: ClusterSpec) -> AlphaBetaNetwork:
        """Build the model from a cluster spec, filling default links from the accelerator."""
        up, out = cluster_links(cluster)
        return cls(cluster.gpus_per_node, up, out, cluster.nics)

    def bandwidth_and_latency(self, ranks: Sequence[int]) -> tuple[float, float]:
        """Bottleneck bandwidth (bytes/s) and per-step latency (s) of a ring over ``ranks``."""
        per_node = Counter(r // self.gpus_per_node for r in ranks)
        up_bw = self.scale_up.effective_bandwidth_bytes_per_s
        if len(per_node) == 1:
            return up_bw, self.scale_up.latency_s
        k = max(per_node.values())
        nic_bw = min(k, self.nics_per_node) * self.scale_out.effective_bandwidth_bytes_per_s
        return min(up_bw, nic_bw), max(self.scale_up.latency_s, self.scale_out.latency_s)

    def collective_time_s(
        self, kind: CollectiveKind, ranks: Sequence[int], size_bytes: float
    ) -> float:
        """Seconds for one collective on ``ranks`` (cached by kind, group and size)."""
        n = len(ranks)
        if n <= 1 or size_bytes <= 0:
            return 0.0
        key = (kind, tuple(ranks), size_bytes)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        bw, alpha = self.bandwidth_and_latency(ranks)
        if kind == "all_reduce":
            time_s = 2 * (n - 1) / n * size_bytes / bw + 2 * (n - 1) * alpha
        elif kind in ("all_gather", "reduce_scatter"):
            time_s = (n - 1) / n * size_bytes / bw + (n - 1) * alpha
        elif kind in ("broadcast", "reduce"):
            time_s = size_bytes / bw + (n - 1) * alpha
        elif kind == "all_to_all":
            time_s = self._all_to_all_s(ranks, size_bytes) + (n - 1) * alpha
        elif kind == "send_recv":
            # Two ranks: one transfer. More: a ring exchange, every rank sending to the next
            # at once; the slowest neighbour pair sets the time.
            pairs = (
                [(ranks[0], ranks[1])]
                if n == 2
                else list(zip(ranks, [*ranks[1:], ranks[0]], strict=True))
            )
            time_s = max(self.p2p_time_s(a, b, size_bytes) for a, b in pairs)
        else:
            raise ValueError(f"unknown collective kind {kind!r}")
        self._cache[key] = time_s
        return time_s

    def time_collective(
        self, kind: str, ranks: Sequence[int], size_bytes: float
    ) -> CollectiveTiming:
        """Time of one collective, as a ring (direct all-to-all, one transfer for send/recv)."""
        if kind == "send_recv" and len(ranks) == 2:
            time_s = self.p2p_time_s(ranks[0], ranks[1], size_bytes)
        else:
            time_s = self.collective_time_s(kind, ranks, size_bytes)  # type: ignore[arg-type]
        algorithm = {"all_to_all": "direct", "send_recv": "p2p"}.get(kind, "ring")
        return CollectiveTiming(time_s, algorithm if time_s > 0 else "none", "none")

    def _all_to_all_s(self, ranks: Sequence[int], size_bytes: float) -> float:
        """Bandwidth term of a direct all-to-all: each rank sends size/n to every other."""
        n = len(ranks)
        per_node = Counter(r // self.gpus_per_node for r in ranks)
        k = max(per_node.values())
        intra_s = size_bytes * (k - 1) / n / self.scale_up.effective_bandwidth_bytes_per_s
        if len(per_node) == 1:
            return intra_s
        node_out_bytes = k * size_bytes * (n - k) / n
        node_bw = min(k, self.nics_per_node) * self.scale_out.effective_bandwidth_bytes_per_s
        return max(intra_s, node_out_bytes / node_bw)

    def p2p_time_s(self, src: int, dst: int, size_bytes: float) -> float:
        """Seconds to send ``size_bytes`` from ``src`` to ``dst`` over one link."""
        if src == dst or size_bytes <= 0:
            return 0.0
        if src // self.gpus_per_node == dst // self.gpus_per_node:
            link = self.scale_up
        else:
            link = self.scale_out
        return size_bytes / link.effective_bandwidth_bytes_per_s + link.latency_s
