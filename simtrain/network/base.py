"""The seam between the engine and any model of the network.

A network model answers one question: how long does this collective (or point-to-point
transfer) take on these global ranks? Sizes follow the nccl-tests convention, so that the
bandwidth reported by ``simtrain collective`` compares directly with published busbw:

- ``all_reduce``, ``broadcast``, ``reduce``: ``size_bytes`` is the buffer on each rank;
- ``all_gather``: the gathered output buffer; ``reduce_scatter``: the input buffer;
- ``all_to_all``: the send buffer of each rank (split evenly among the ranks);
- ``send_recv``: the bytes moved from one rank to the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

CollectiveKind = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv"
]
COLLECTIVE_KINDS: tuple[str, ...] = CollectiveKind.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class CollectiveTiming:
    """Time of one collective and the algorithm and protocol that achieve it."""

    time_s: float
    algorithm: str
    protocol: str


@runtime_checkable
class NetworkModel(Protocol):
    """Times communication on a cluster; implementations must be pure and deterministic."""

    def collective_time_s(
        self, kind: CollectiveKind, ranks: Sequence[int], size_bytes: float
    ) -> float:
        """Seconds for one ``kind`` collective over global ``ranks`` with no other traffic."""
        ...

    def p2p_time_s(self, src: int, dst: int, size_bytes: float) -> float:
        """Seconds to move ``size_bytes`` from global rank ``src`` to ``dst``."""
        ...


@runtime_checkable
class DescribedNetwork(NetworkModel, Protocol):
    """A network model that also says which algorithm and protocol a collective runs."""

    def time_collective(
        self, kind: str, ranks: Sequence[int], size_bytes: float
    ) -> CollectiveTiming:
        """Time, algorithm and protocol of one collective (``send_recv`` for a transfer)."""
        ...


class ConstantBandwidthNetwork:
    """Test double: every collective moves ``size_bytes`` at one bandwidth, plus a latency."""

    def __init__(self, bandwidth_bytes_per_s: float, latency_s: float = 0.0) -> None:
        self.bandwidth_bytes_per_s = bandwidth_bytes_per_s
        self.latency_s = latency_s

    def collective_time_s(
        self, kind: CollectiveKind, ranks: Sequence[int], size_bytes: float
    ) -> float:
        """Latency plus size over bandwidth, whatever the collective."""
        if len(ranks) <= 1:
            return 0.0
        return self.latency_s + size_bytes / self.bandwidth_bytes_per_s

    def p2p_time_s(self, src: int, dst: int, size_bytes: float) -> float:
        """Latency plus size over bandwidth."""
        return self.latency_s + size_bytes / self.bandwidth_bytes_per_s
