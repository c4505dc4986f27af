"""The neutral form every trace reader produces: per-rank lists of nodes.

A :class:`TraceNode` is one kernel, collective or transfer of one rank, with its
dependencies on earlier nodes of the same rank file (by node id). Readers fill in what their
format records; :mod:`simtrain.traceio.replay` turns the nodes into engine tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from simtrain.workload.ops import Op

NodeKind = Literal["compute", "collective", "send", "recv"]
HOST_STREAM = "host"
"""Stream of a host thread's kernel launches: host time, neither compute nor communication."""


@dataclass(frozen=True, slots=True)
class TraceNode:
    """One node of a rank's trace.

    Attributes:
        node_id: the id the file gives it (unique within the rank file).
        name: kernel or operator name.
        kind: compute, collective, send or recv.
        deps: ids of nodes of the same rank that must finish first.
        stream: engine stream (nodes on one stream run one at a time, in file order).
        category: time-breakdown bucket (``compute``, ``dp_comm``, ...).
        duration_s: measured duration, or None when the node must be timed by the models.
        ops: operators with their FLOPs, bytes and shapes (empty if the trace has none).
        group: ranks taking part in a collective (or the two ends of a transfer).
        collective_key: equal keys across ranks are one collective instance; empty for
            readers that leave matching to :mod:`~simtrain.traceio.replay`.
        peer: the other end of a send or recv, -1 otherwise.
        tag: send/recv tag (matches a send with its recv).
        stage: pipeline stage, -1 if unknown.
        microbatch: microbatch index, -1 if unknown.
    """

    node_id: int
    name: str
    kind: NodeKind
    deps: tuple[int, ...] = ()
    stream: str = "compute"
    category: str = "compute"
    duration_s: float | None = None
    ops: tuple[Op, ...] = ()
    group: tuple[int, ...] = ()
    collective_key: str = ""
    peer: int = -1
    tag: int = 0
    stage: int = -1
    microbatch: int = -1


@dataclass(slots=True)
class RankTrace:
    """All nodes of one rank file.

    Attributes:
        path: the file name (for error messages).
        rank: global rank the file describes.
        nodes: nodes in file order.
        world_size: ranks in the job if the file records it, else 0.
        weight: how many ranks this file stands for (symmetry reduction on export).
        accelerator: device name recorded in the trace, or empty.
    """

    path: str
    rank: int
    nodes: list[TraceNode] = field(default_factory=list)
    world_size: int = 0
    weight: int = 1
    accelerator: str = ""
