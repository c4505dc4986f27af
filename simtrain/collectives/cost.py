"""Closed-form costs of collective algorithms on a group's fabric, and NCCL's choice among them.

Each algorithm is a function ``(kind, fabric, size_bytes, protocol) -> (latency_s,
transfer_s)`` on a :class:`~simtrain.network.fabric.GroupFabric`; sizes follow
``simtrain.network.base``. The formulas are NCCL's tuning model (``protocols.py``,
``docs/references/collectives.md`` §6.3): time = latency + bytes / algorithm bandwidth, with

- ring: bus bandwidth = the group's ring bandwidth x the protocol's factor (LL capped);
  algorithm bandwidth = bus x n / steps (steps 2(n-1) for all-reduce, n-1 for all-gather
  and reduce-scatter, n for broadcast and reduce); latency = base + intra-node steps x intra
  latency + inter-node steps x inter latency (2·nodes inter steps for all-reduce, nodes-1
  otherwise);
- tree (all-reduce): bus = ring bandwidth x 0.92 x 0.85 x protocol factor x the size
  correction; algorithm bandwidth = bus / 2; latency = base + 2 x ((ranks per node - 1) x
  intra + floor(log2 nodes) x inter);
- nvls (in one node): every rank moves S(k+1)/k through the NVSwitch (all-reduce; S for
  reduce-scatter and all-gather) at the switch's multimem bandwidth; across nodes, NVLS with
  SHARP (CollNet) runs at 5/6 of the slower of the node's NVLS and its NICs;
- nvls_tree (all-reduce across nodes): 5/6 of the slower of NVLS and the NICs (half the NICs
  beyond two nodes); latency intra + 2·log2(nodes) x inter;
- sharp (CollNet Direct, all-reduce across nodes): ring reduce-scatter and all-gather inside
  nodes pipelined with each NIC sending its shard up the switch tree once;
- torus: the fabric's multi-dimensional rings (TPU ICI), with no NCCL protocol;
- direct (all-to-all): every rank sends S/n to each peer at once; the node fabric and each
  node's NICs set the time; send/recv: one transfer.

Two algorithms NCCL does not run are costed too, so that they can be named explicitly:
hierarchical (intra-node rings, inter-node rings per local rank, intra-node rings again,
one after another) and halving_doubling.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from simtrain.collectives.innetwork import NVLS_EFFICIENCY
from simtrain.collectives.protocols import (
    BASE_LATENCY_S,
    FAMILY_PROTOCOLS,
    HW_LATENCY_S,
    NET_OVERHEAD_S,
    TREE_PATTERN_SHARE,
    TREE_SHARE,
    bandwidth_factor,
    ll_cap_bytes_per_s,
    tree_correction,
    uses_catalog_latency,
)
from simtrain.errors import SpecError
from simtrain.network.base import CollectiveTiming
from simtrain.network.fabric import GroupFabric, Tier

US = 1e-6
CostFn = Callable[[str, GroupFabric, float, str], tuple[float, float]]
"""``cost(kind, fabric, size_bytes, protocol) -> (latency_s, transfer_s)``."""

COLLNET_PER_RANK_LATENCY_S = 0.4 * US
"""CollNet Direct's latency per extra rank of a node (§6.3, latency formulas)."""
NVLS_SHARE = 5 / 6
"""NCCL's bus-to-algorithm bandwidth conversion for NVLS and NVLS-tree (§6.3)."""


@dataclass(frozen=True)
class CostModel:
    """A closed-form algorithm: its NCCL family (for protocols), kinds and cost."""

    name: str
    family: str
    kinds: frozenset[str]
    cost: CostFn


COSTS: dict[str, CostModel] = {}
"""Closed-form algorithms by name (same names as the flow model's schedules)."""

AUTO_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "sharp"),
    "all_gather": ("ring", "nvls"),
    "reduce_scatter": ("ring", "nvls"),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all_to_all": ("direct",),
    "send_recv": ("p2p",),
}
"""What ``auto`` chooses among: the algorithms NCCL implements for each collective."""
TORUS_AUTO_ALGORITHMS: dict[str, tuple[str, ...]] = {
    **AUTO_ALGORITHMS,
    "all_reduce": ("torus", "ring", "hierarchical"),
    "all_gather": ("torus", "ring", "hierarchical"),
    "reduce_scatter": ("torus", "ring", "hierarchical"),
}
"""On ICI fabrics (TPU slices, no NCCL): rings, torus rings, hierarchical (inside slices,
then over DCN between them) and direct exchanges, the patterns of XLA's collectives."""


def cost_model(name: str, family: str, kinds: tuple[str, ...]) -> Callable[[CostFn], CostFn]:
    """Decorator registering a closed-form algorithm in :data:`COSTS`."""

    def decorate(cost: CostFn) -> CostFn:
        COSTS[name] = CostModel(name, family, frozenset(kinds), cost)
        return cost

    return decorate


def _nccl(tier: Tier) -> bool:
    """Whether NCCL's latency tables know the tier's links (not TPU ICI)."""
    return tier.link_class in HW_LATENCY_S["ring"]["simple"]


def step_latency_s(family: str, protocol: str, tier: Tier) -> float:
    """Latency of one step over ``tier``.

    NCCL's ``hwLat``, or the catalog link's for the Simple ring, for links NCCL does not
    know and for the "none" protocol.
    """
    if protocol == "none" or not _nccl(tier) or uses_catalog_latency(family, protocol):
        return tier.latency_s
    return HW_LATENCY_S[family][protocol][tier.link_class]


def base_latency_s(family: str, protocol: str) -> float:
    """Fixed cost of one collective (NCCL's ``baseLat``; none for the "none" protocol)."""
    return 0.0 if protocol == "none" else BASE_LATENCY_S[family][protocol]


def protocols_for(model: CostModel, fabric: GroupFabric) -> tuple[str, ...]:
    """Protocols NCCL would consider for ``model`` on this fabric.

    LL128 needs NVLink inside nodes (NCCL enables it by default only there, §6.3); a fabric
    NCCL does not run on (ICI) gets no protocol effects ("none").
    """
    if not _nccl(fabric.intra):
        return ("none",)
    names = FAMILY_PROTOCOLS.get(model.family, ("simple",))
    if fabric.intra.link_class != "nvlink":
        names = tuple(p for p in names if p != "ll128")
    return names


def _factor(family: str, protocol: str, kind: str, fabric: GroupFabric) -> float:
    if protocol == "none":
        return 1.0
    return bandwidth_factor(family, protocol, kind, fabric.num_nodes, fabric.ranks_per_node)


def _inter_latency(family: str, protocol: str, fabric: GroupFabric) -> float:
    return 0.0 if fabric.inter is None else step_latency_s(family, protocol, fabric.inter)


@cost_model("ring", "ring", ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"))
def ring(kind: str, fabric: GroupFabric, size_bytes: float, protocol: str) -> tuple[float, float]:
    """NCCL's ring (see the module docstring)."""
    n, m = fabric.num_ranks, fabric.num_nodes
    steps = {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1}.get(kind, n)
    inter_steps = 0 if m == 1 else min(steps, 2 * m if kind == "all_reduce" else m - 1)
    bus = fabric.ring_bandwidth_bytes_per_s * _factor("ring", protocol, kind, fabric)
    if protocol == "ll":
        bus = min(bus, ll_cap_bytes_per_s(m))
    intra = step_latency_s("ring", protocol, fabric.intra)
    if m > 1 and protocol != "none":
        intra = max(intra, NET_OVERHEAD_S * (3 if protocol == "simple" else 1))
    latency = (
        base_latency_s("ring", protocol)
        + (steps - inter_steps) * intra
        + inter_steps * _inter_latency("ring", protocol, fabric)
    )
    return latency, size_bytes * steps / (bus * n)


@cost_model("tree", "tree", ("all_reduce",))
def tree(kind: str, fabric: GroupFabric, size_bytes: float, protocol: str) -> tuple[float, float]:
    """NCCL's double binary tree all-reduce (see the module docstring)."""
    m = fabric.num_nodes
    bus = fabric.ring_bandwidth_bytes_per_s * TREE_SHARE * _factor("tree", protocol, kind, fabric)
    if protocol == "ll":
        bus = min(bus, ll_cap_bytes_per_s(m))
    bus *= TREE_PATTERN_SHARE
    if protocol != "none":
        bus *= tree_correction(protocol, size_bytes)
    depth = (fabric.ranks_per_node - 1) * step_latency_s("tree", protocol, fabric.intra)
    depth += int(math.log2(m)) * _inter_latency("tree", protocol, fabric)
    return base_latency_s("tree", protocol) + 2 * depth, size_bytes / (bus / 2)


def _nvls_bandwidth(fabric: GroupFabric, name: str) -> float:
    """Per-rank multimem bandwidth of the node's NVSwitch, or a SpecError without one."""
    if not fabric.nvls:
        raise SpecError(
            f"'algo' {name} needs NVSwitches that reduce in-network (NVLink SHARP, H100-class "
            "nodes) (valid here: ring, tree, hierarchical, halving_doubling, direct)"
        )
    return NVLS_EFFICIENCY * fabric.intra.bandwidth_bytes_per_s


@cost_model("nvls", "nvls", ("all_reduce", "reduce_scatter", "all_gather"))
def nvls(kind: str, fabric: GroupFabric, size_bytes: float, protocol: str) -> tuple[float, float]:
    """NVLink SHARP in a node; with SHARP switches, across nodes too (module docstring)."""
    switch_bw = _nvls_bandwidth(fabric, "nvls")
    k = fabric.ranks_per_node
    intra = step_latency_s("nvls", protocol, fabric.intra)
    if fabric.inter is None:
        moved = size_bytes * (k + 1) / k if kind == "all_reduce" else size_bytes
        return intra, moved / switch_bw
    if kind != "all_reduce" or not fabric.collnet:
        raise SpecError(
            f"'algo' nvls across nodes needs an all-reduce on SHARP switches (got {kind}, "
            f"cluster.topology.sharp={fabric.collnet}; use nvls_tree or ring)"
        )
    algbw = NVLS_SHARE * min(switch_bw * k / (k + 1), fabric.inter.bandwidth_bytes_per_s)
    return intra + _inter_latency("nvls", protocol, fabric), size_bytes / algbw


@cost_model("nvls_tree", "nvls_tree", ("all_reduce",))
def nvls_tree(
    kind: str, fabric: GroupFabric, size_bytes: float, protocol: str
) -> tuple[float, float]:
    """NVLS inside nodes, a tree across them (see the module docstring)."""
    switch_bw = _nvls_bandwidth(fabric, "nvls_tree")
    if fabric.inter is None:
        raise SpecError("'algo' nvls_tree needs a group spanning nodes (use nvls in one node)")
    k, m = fabric.ranks_per_node, fabric.num_nodes
    inter_bw = fabric.inter.bandwidth_bytes_per_s / (1 if m <= 2 else 2)
    algbw = NVLS_SHARE * min(switch_bw * k / (k + 1), inter_bw)
    latency = step_latency_s("nvls_tree", protocol, fabric.intra)
    latency += 2 * int(math.log2(m)) * _inter_latency("nvls_tree", protocol, fabric)
    return base_latency_s("nvls_tree", protocol) + latency, size_bytes / algbw


@cost_model("sharp", "collnet", ("all_reduce",))
def sharp(kind: str, fabric: GroupFabric, size_bytes: float, protocol: str) -> tuple[float, float]:
    """SHARP in-network all-reduce across nodes (NCCL CollNet Direct, module docstring)."""
    if not fabric.collnet or fabric.inter is None:
        raise SpecError(
            "'algo' sharp needs a group spanning nodes on scale-out switches that reduce "
            "in-network (set cluster.topology.sharp: true on a Clos of SHARP-capable switches)"
        )
    k = fabric.ranks_per_node
    intra_bw = math.inf if k == 1 else fabric.intra.bandwidth_bytes_per_s * k / (2 * (k - 1))
    algbw = min(intra_bw, fabric.inter.bandwidth_bytes_per_s)
    intra = step_latency_s("collnet", protocol, fabric.intra)
    latency = 2 * (min(1, k - 1) * intra + (k - 1) * COLLNET_PER_RANK_LATENCY_S)
    latency += _inter_latency("collnet", protocol, fabric)
    return base_latency_s("collnet", protocol) + latency, size_bytes / algbw


@cost_model("torus", "ring", ("all_reduce", "reduce_scatter", "all_gather"))
def torus(kind: str, fabric: GroupFabric, size_bytes: float, protocol: str) -> tuple[float, float]:
    """Multi-dimensional rings of a torus sub-box (see the module docstring)."""
    rings = fabric.multi_ring
    if rings is None:
        raise SpecError(
            "'algo' torus needs a torus_3d topology and a group that is a full sub-box of it "
            f"(got {fabric.num_ranks} ranks that are not; use ring)"
        )
    n, passes = fabric.num_ranks, 2 if kind == "all_reduce" else 1
    transfer = passes * (n - 1) / n * size_bytes / rings.bandwidth_bytes_per_s
    return passes * rings.steps * fabric.intra.latency_s, transfer


def _exchange_s(fabric: GroupFabric, size_bytes: float) -> float:
    """Bandwidth time of a direct all-to-all: each rank sends size/n to every other rank."""
    n, k = fabric.num_ranks, fabric.ranks_per_node
    intra_bytes = size_bytes * (k - 1) / n
    if fabric.inter is None:
        return intra_bytes / fabric.intra.exchange_bytes_per_s
    if fabric.cross_rail_via_scale_up:
        # PXN: bytes for another rail's GPU of a remote node first cross the node fabric.
        intra_bytes += size_bytes * (n - k) / n * (k - 1) / k
    node_out = k * size_bytes * (n - k) / n
    return max(
        intra_bytes / fabric.intra.exchange_bytes_per_s,
        node_out / fabric.inter.exchange_bytes_per_s,
    )


def _slowest_step_s(fabric: GroupFabric) -> float:
    """Catalog latency of one step over the group's slowest tier."""
    return fabric.intra.latency_s if fabric.inter is None else fabric.inter.latency_s


@cost_model("direct", "direct", ("all_to_all", "all_gather", "reduce_scatter", "all_reduce"))
def direct(kind: str, fabric: GroupFabric, size_bytes: float, protocol: str) -> tuple[float, float]:
    """Every rank sends its share to every other rank at once (all-reduce: twice)."""
    passes = 2 if kind == "all_reduce" else 1
    latency = (fabric.num_ranks - 1) * _slowest_step_s(fabric)
    return passes * latency, passes * _exchange_s(fabric, size_bytes)


@cost_model("p2p", "direct", ("send_recv",))
def p2p(kind: str, fabric: GroupFabric, size_bytes: float, protocol: str) -> tuple[float, float]:
    """One transfer (a group of more than two: a ring exchange, all pairs at once)."""
    tier = fabric.intra if fabric.inter is None else fabric.inter
    return tier.latency_s, size_bytes / tier.flow_bandwidth_bytes_per_s


@cost_model("hierarchical", "ring", ("all_reduce", "reduce_scatter", "all_gather"))
def hierarchical(
    kind: str, fabric: GroupFabric, size_bytes: float, protocol: str
) -> tuple[float, float]:
    """Rings in nodes, rings across nodes per local rank, rings in nodes, one after another."""
    n, m, k = fabric.num_ranks, fabric.num_nodes, fabric.ranks_per_node
    if n != m * k:
        raise SpecError(
            "'algo' hierarchical needs the same number of group ranks on every node "
            f"(got {n} ranks on {m} nodes; use ring or direct)"
        )
    passes = 2 if kind == "all_reduce" else 1
    intra_s = (k - 1) / k * size_bytes / fabric.intra.bandwidth_bytes_per_s
    latency = base_latency_s("ring", protocol)
    latency += passes * (k - 1) * step_latency_s("ring", protocol, fabric.intra)
    inter_s = 0.0
    if fabric.inter is not None:
        inter_s = passes * (m - 1) / m * size_bytes / fabric.inter.bandwidth_bytes_per_s
        latency += passes * (m - 1) * _inter_latency("ring", protocol, fabric)
    return latency, passes * intra_s + inter_s


@cost_model("halving_doubling", "ring", ("all_reduce", "reduce_scatter", "all_gather"))
def halving_doubling(
    kind: str, fabric: GroupFabric, size_bytes: float, protocol: str
) -> tuple[float, float]:
    """Recursive halving and doubling: ring volume in 2·log2(n) steps (n a power of two)."""
    n = fabric.num_ranks
    if n & (n - 1):
        raise SpecError(f"'algo' halving_doubling needs a power-of-two group (got {n} ranks)")
    passes = 2 if kind == "all_reduce" else 1
    tier = fabric.intra if fabric.inter is None else fabric.inter
    latency = passes * (n.bit_length() - 1) * step_latency_s("ring", protocol, tier)
    transfer = passes * (n - 1) / n * size_bytes / fabric.ring_bandwidth_bytes_per_s
    return base_latency_s("ring", protocol) + latency, transfer


def tune(
    kind: str,
    fabric: GroupFabric,
    size_bytes: float,
    algorithm: str = "auto",
    protocol: str = "auto",
    overhead_s: float = 0.0,
) -> CollectiveTiming:
    """Fastest (algorithm, protocol) pair for one collective, as NCCL's tuner picks it.

    With ``algorithm="auto"`` every algorithm NCCL implements for ``kind`` and can run on
    this fabric is costed under every protocol it allows, and the fastest wins; a named
    algorithm or protocol restricts the choice. ``overhead_s`` (the collective library's
    calibrated fixed cost per call) is added to every protocol but "none".

    Raises:
        SpecError: the named algorithm or protocol cannot run this collective here.
    """
    if fabric.num_ranks <= 1 or size_bytes <= 0:
        return CollectiveTiming(0.0, "none", "none")
    if algorithm == "auto":
        table = TORUS_AUTO_ALGORITHMS if not _nccl(fabric.intra) else AUTO_ALGORITHMS
        names = table[kind]
    else:
        names = (algorithm,)
    best: CollectiveTiming | None = None
    reasons = []
    for name in names:
        model = COSTS[name]
        if kind not in model.kinds:
            able = ", ".join(sorted(c.name for c in COSTS.values() if kind in c.kinds))
            raise SpecError(f"'algo' {name} does not implement {kind} (valid for {kind}: {able})")
        allowed = protocols_for(model, fabric)
        if protocol == "auto":
            chosen = allowed
        elif protocol == "none" or protocol in allowed:
            chosen = (protocol,)
        else:
            raise SpecError(
                f"'protocol' {protocol} is not available for algorithm {name} here "
                f"(valid: {', '.join(allowed)}, none)"
            )
        for proto in chosen:
            try:
                latency, transfer = model.cost(kind, fabric, size_bytes, proto)
            except SpecError as exc:
                if algorithm != "auto":
                    raise
                reasons.append(str(exc))
                break
            total = latency + transfer + (0.0 if proto == "none" else overhead_s)
            if best is None or total < best.time_s:
                best = CollectiveTiming(total, name, proto)
    if best is None:
        raise SpecError(f"no algorithm can run {kind} on this group: {'; '.join(reasons)}")
    return best
