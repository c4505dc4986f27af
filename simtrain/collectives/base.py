"""What every collective algorithm shares: its output type, its registry, group geometry.

An algorithm is a pure function ``(kind, devices, size_bytes, topology) -> Schedule`` that
turns one collective on a process group (``devices[i]`` is the device of group rank i) into
phases of point-to-point flows; sizes follow ``simtrain.network.base``. Algorithms register
by name with :func:`register`; :func:`get_algorithm` lists the valid names on a miss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from simtrain.errors import SpecError
from simtrain.network.flow import Phase
from simtrain.topology.base import LINK_CLASSES, Topology

Family = Literal["ring", "tree", "nvls", "collnet"]
"""NCCL algorithm family whose protocol latencies and bandwidth factors apply."""

PIPELINE_CHUNK_BYTES = 512 * 1024
"""Largest chunk a pipelined algorithm (tree, chain broadcast) streams per step: NCCL's
default 4 MiB buffer split into NCCL_STEPS = 8 slots (NVIDIA/nccl ``src/include/device.h``;
not in the reference set)."""
MIN_PIPELINE_CHUNK_BYTES = 32 * 1024
"""Smallest chunk: NCCL halves a tree's chunk while the message holds fewer chunks per
channel than the tree is deep, down to 32 KiB (NVIDIA/nccl ``src/enqueue.cc``; not in the
reference set)."""
CHUNKS_PER_DEPTH = 4
"""Chunks per hop of pipeline depth that the chunk size aims for (same source)."""


@dataclass(frozen=True)
class Schedule:
    """The phases of one collective, run one after another, and how NCCL would cost them."""

    phases: tuple[Phase, ...]
    family: Family = "ring"
    efficiency: tuple[tuple[str, float], ...] = ()
    """Per link class (``LINK_CLASSES``), the share of the links' calibrated (ring)
    bandwidth this algorithm reaches there; classes not listed reach all of it."""

    def link_efficiency(self, link_class: np.ndarray) -> np.ndarray:
        """Efficiency factor of every link, given the links' class codes."""
        factors = np.ones(len(LINK_CLASSES))
        for name, value in self.efficiency:
            factors[LINK_CLASSES.index(name)] = value
        return factors[link_class]

    @property
    def bytes_sent(self) -> float:
        """Bytes injected into the network by all phases."""
        return sum(p.bytes_sent for p in self.phases)


class CollectiveAlgorithm(Protocol):
    """A collective algorithm: turns one collective into a :class:`Schedule`."""

    def __call__(
        self, kind: str, devices: np.ndarray, size_bytes: float, topology: Topology
    ) -> Schedule:
        """Phases of ``kind`` over ``devices`` moving ``size_bytes`` (nccl-tests sizes)."""
        ...


@dataclass(frozen=True)
class AlgorithmInfo:
    """A registered algorithm and the collective kinds it implements."""

    name: str
    kinds: frozenset[str]
    build: CollectiveAlgorithm


ALGORITHMS: dict[str, AlgorithmInfo] = {}
"""Registry of collective algorithms by name, filled by :func:`register`."""


def register(
    name: str, kinds: tuple[str, ...]
) -> Callable[[CollectiveAlgorithm], CollectiveAlgorithm]:
    """Decorator adding an algorithm to :data:`ALGORITHMS` under ``name``."""

    def decorate(build: CollectiveAlgorithm) -> CollectiveAlgorithm:
        ALGORITHMS[name] = AlgorithmInfo(name, frozenset(kinds), build)
        return build

    return decorate


def get_algorithm(name: str, kind: str | None = None, field: str = "algo") -> AlgorithmInfo:
    """The algorithm ``name``; with ``kind``, also check that it implements that collective.

    Raises:
        SpecError: unknown name (listing the known ones, naming ``field``) or unsupported kind.
    """
    if name not in ALGORITHMS:
        valid = ", ".join(["auto", *sorted(ALGORITHMS)])
        raise SpecError(
            f"'{field}' must be a known collective algorithm (got {name[:40]!r}; valid: {valid})"
        )
    info = ALGORITHMS[name]
    if kind is not None and kind not in info.kinds:
        able = ", ".join(sorted(a.name for a in ALGORITHMS.values() if kind in a.kinds))
        raise SpecError(
            f"'algo' {name} does not implement {kind} (valid for {kind}: {able or 'none'})"
        )
    return info


@dataclass(frozen=True)
class GroupLayout:
    """How a group's ranks fall on nodes: ``by_node[j]`` = group ranks on the j-th node used."""

    by_node: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, devices: np.ndarray, topology: Topology) -> GroupLayout:
        """Split group ranks by node, nodes in order of first appearance in the group.

        On a wired node fabric (MI250X) each node's ranks are put in the order of the node's
        widest ring (``Topology.ring_order``), so rings and chains follow the real links.
        """
        g = topology.gpus_per_node
        node = devices // g
        _, first = np.unique(node, return_index=True)
        order = node[np.sort(first)]
        by_node = [np.flatnonzero(node == n) for n in order]
        if topology.ring_order is not None:
            by_node = [
                r[_order_of(topology.ring_order(devices[r] % g), devices[r] % g)] for r in by_node
            ]
        return cls(tuple(by_node))

    @property
    def num_nodes(self) -> int:
        """Nodes the group spans."""
        return len(self.by_node)

    @property
    def ranks_per_node(self) -> int | None:
        """Group ranks on every node when all nodes hold the same number, else None."""
        counts = {len(r) for r in self.by_node}
        return counts.pop() if len(counts) == 1 else None

    def num_channels(self, topology: Topology) -> int:
        """Parallel rings/trees NCCL would open: one per NIC a node's ranks can use."""
        if self.num_nodes == 1 or topology.nics_per_node == 0:
            return 1
        fewest = min(len(r) for r in self.by_node)
        return max(1, min(fewest, topology.nics_per_node))


def _order_of(ordered: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Positions in ``local`` of the values of ``ordered`` (a permutation of ``local``)."""
    position = {int(d): i for i, d in enumerate(local)}
    return np.array([position[int(d)] for d in ordered], dtype=np.int64)


def require_uniform(layout: GroupLayout, name: str) -> int:
    """Ranks per node, or a SpecError when nodes hold different numbers of group ranks."""
    k = layout.ranks_per_node
    if k is None:
        counts = sorted({len(r) for r in layout.by_node})
        raise SpecError(
            f"'algo' {name} needs the same number of group ranks on every node "
            f"(got {counts}; use ring or direct)"
        )
    return k


def merge_schedules(schedules: Sequence[Schedule]) -> Schedule:
    """One schedule running several alike schedules at once: phase i of all of them together.

    Raises:
        SpecError: the schedules do not have the same phases (groups of different shapes).
    """
    first = schedules[0]
    shape = [(p.repeat, p.num_latencies) for p in first.phases]
    for other in schedules[1:]:
        if [(p.repeat, p.num_latencies) for p in other.phases] != shape:
            raise SpecError(
                "'groups' must have the same shape (ranks per node and count) to run at once "
                f"(got phases {shape} and {[(p.repeat, p.num_latencies) for p in other.phases]})"
            )
    phases = tuple(
        Phase.of(
            np.concatenate([s.phases[i].src for s in schedules]),
            np.concatenate([s.phases[i].dst for s in schedules]),
            np.concatenate([s.phases[i].size_bytes for s in schedules]),
            repeat=phase.repeat,
            latency_count=phase.latency_count,
        )
        for i, phase in enumerate(first.phases)
    )
    return Schedule(phases, first.family, first.efficiency)


def pipeline_chunk_bytes(size_bytes: float, depth: int) -> float:
    """Chunk of a pipeline ``depth`` hops deep streaming ``size_bytes`` per flow.

    About ``CHUNKS_PER_DEPTH`` chunks per hop, between the smallest and largest chunk, and
    never more than the message. The chunk grows with the message, so the pipeline's time
    does too (see :func:`pipelined_phases`).

    Examples:
        >>> pipeline_chunk_bytes(2**30, 10), pipeline_chunk_bytes(1e6, 10)
        (524288, 32768)
        >>> pipeline_chunk_bytes(1000.0, 10)
        1000.0
    """
    chunk = min(
        PIPELINE_CHUNK_BYTES, max(MIN_PIPELINE_CHUNK_BYTES, size_bytes / (CHUNKS_PER_DEPTH * depth))
    )
    return min(chunk, size_bytes)


def pipelined_phases(
    src: np.ndarray, dst: np.ndarray, size_bytes: float, depth: int, latency_count: int
) -> tuple[Phase, Phase]:
    """Flows streaming ``size_bytes`` each through a pipeline ``depth`` hops deep.

    A pipeline of chunk c on flows of s bytes runs s / c + depth - 1 chunk steps: the whole
    message once, plus ``depth - 1`` chunks to fill and drain the pipe. The first phase moves
    the message (paying the ``latency_count`` hop latencies), the second the fill and drain,
    on the same flows. Time is then s + (depth - 1)·c(s) over the flows' rate: non-decreasing
    in s, because the chunk c(s) is (a whole number of chunks would make it jump down each
    time the message needs one more).
    """
    chunk = pipeline_chunk_bytes(size_bytes, max(depth, 1))
    stream = Phase.of(src, dst, size_bytes, latency_count=latency_count)
    fill = Phase.of(src, dst, chunk, repeat=max(depth - 1, 0), latency_count=0)
    return stream, fill
