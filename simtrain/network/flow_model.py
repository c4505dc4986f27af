"""``FlowNetworkModel``: the NetworkModel protocol on a Topology, at flow level.

One collective is timed in isolation: the chosen algorithm turns it into phases of flows,
each phase runs through the max-min fair flow model on the topology's routes, and NCCL's
protocol costs are added (base latency once, per-step hop latency, bandwidth share, and the
collective library's calibrated fixed cost per call). With
``algorithm="auto"`` and ``protocol="auto"`` every valid pair among the algorithms NCCL
implements for the collective is timed and the fastest wins,
as NCCL's tuner does with its own cost model. Results are cached by (kind, devices, size).

``protocol="none"`` drops protocol effects: catalog bandwidth and latency only, the
alpha-beta view, where an uncontended ring all-reduce takes exactly
2(n-1)/n · S/B + 2(n-1)·α.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simtrain.catalog.collective_calibration import collective_calibration_for
from simtrain.collectives import ALGORITHMS, FAMILY_PROTOCOLS, PROTOCOLS, Schedule, get_algorithm
from simtrain.collectives.base import merge_schedules
from simtrain.errors import SpecError
from simtrain.network.base import COLLECTIVE_KINDS, CollectiveKind, CollectiveTiming
from simtrain.network.flow import Phase, transfer_time_s
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.experiment import ExperimentSpec
from simtrain.topology import Topology, build_topology

PROTOCOL_CHOICES: tuple[str, ...] = ("auto", "none", *PROTOCOLS)
"""Valid ``protocol`` values."""
AUTO_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "nvls", "sharp"),
    "all_gather": ("ring", "nvls"),
    "reduce_scatter": ("ring", "nvls"),
    "all_to_all": ("direct",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
}
"""Algorithms ``auto`` chooses among: those NCCL implements for each collective (its tuner
never picks the others, which stay available by name)."""
TORUS_AUTO_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("torus", "ring"),
    "all_gather": ("torus", "ring"),
    "reduce_scatter": ("torus", "ring"),
    "all_to_all": ("direct",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
}
"""On a torus (TPU ICI, no NCCL) ``auto`` keeps to rings, multi-dimensional torus rings and
direct exchanges, the patterns of XLA's torus collectives."""


class FlowNetworkModel:
    """Times collectives on a topology with the flow-level model (see the module docstring).

    Args:
        topology: the wired cluster (``build_topology``).
        algorithm: a registered algorithm name or ``auto``.
        protocol: ``auto``, ``none``, ``simple``, ``ll128`` or ``ll``.
        placement: device index of every global rank; omit for rank r on device r.
        overhead_s: fixed cost of every call under an NCCL protocol (the calibration's
            ``launch_overhead_s``; ``from_cluster`` looks it up).
    """

    def __init__(
        self,
        topology: Topology,
        algorithm: str = "auto",
        protocol: str = "auto",
        placement: Sequence[int] | None = None,
        overhead_s: float = 0.0,
    ) -> None:
        if algorithm != "auto":
            get_algorithm(algorithm)
        if protocol not in PROTOCOL_CHOICES:
            raise SpecError(
                f"'protocol' must be one of {', '.join(PROTOCOL_CHOICES)} (got {protocol!r})"
            )
        self.topology = topology
        self.algorithm = algorithm
        self.protocol = protocol
        self.overhead_s = overhead_s
        self.placement = (
            np.arange(topology.num_devices)
            if placement is None
            else np.asarray(placement, dtype=np.int64)
        )
        if self.placement.size and (
            self.placement.min() < 0 or self.placement.max() >= topology.num_devices
        ):
            raise SpecError(
                f"'placement' must map ranks to devices 0..{topology.num_devices - 1} "
                f"(got {self.placement.min()}..{self.placement.max()})"
            )
        self._cache: dict[tuple[str, tuple[int, ...], float], CollectiveTiming] = {}

    @classmethod
    def from_cluster(
        cls,
        cluster: ClusterSpec,
        algorithm: str = "auto",
        protocol: str = "auto",
        placement: Sequence[int] | None = None,
        seed: int = 0,
    ) -> FlowNetworkModel:
        """Build the topology of ``cluster`` (``seed`` salts its ECMP hash) and the model.

        Every call pays the collective library's calibrated fixed cost for the cluster's
        accelerator (``simtrain.catalog.collective_calibration``).
        """
        overhead = collective_calibration_for(cluster.accelerator).launch_overhead_s
        topology = build_topology(cluster, seed)
        return cls(topology, algorithm, protocol, placement, overhead)

    @classmethod
    def from_experiment(
        cls, spec: ExperimentSpec, placement: Sequence[int] | None = None
    ) -> FlowNetworkModel:
        """The model an experiment asks for: its cluster and ``simulation.collective_algorithm``.

        Global rank r runs on device ``placement[r]`` (default r: node r // gpus_per_node,
        the placement the alpha-beta model assumes).
        """
        algorithm = spec.simulation.collective_algorithm
        return cls.from_cluster(
            spec.cluster, algorithm=algorithm, placement=placement, seed=spec.seed
        )

    def collective_time_s(
        self, kind: CollectiveKind, ranks: Sequence[int], size_bytes: float
    ) -> float:
        """Seconds for one ``kind`` collective over global ``ranks`` with no other traffic."""
        return self.time_collective(kind, ranks, size_bytes).time_s

    def p2p_time_s(self, src: int, dst: int, size_bytes: float) -> float:
        """Seconds to move ``size_bytes`` from global rank ``src`` to ``dst``."""
        return self.time_collective("send_recv", [src, dst], size_bytes).time_s

    def time_collective(
        self, kind: str, ranks: Sequence[int], size_bytes: float
    ) -> CollectiveTiming:
        """Time, algorithm and protocol of one collective (cached).

        Raises:
            SpecError: unknown kind, ranks outside the topology, or an algorithm that cannot
                run this collective here (named in the message).
        """
        if kind not in COLLECTIVE_KINDS:
            raise SpecError(f"'op' must be one of {', '.join(COLLECTIVE_KINDS)} (got {kind!r})")
        devices = self._devices(ranks)
        key = (kind, tuple(devices.tolist()), float(size_bytes))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if devices.size <= 1 or size_bytes <= 0:
            timing = CollectiveTiming(0.0, "none", "none")
        else:
            timing = self._best(kind, devices, float(size_bytes))
        self._cache[key] = timing
        return timing

    def schedule(self, kind: str, ranks: Sequence[int], size_bytes: float) -> Schedule:
        """Phases of flows (on device indices) of the algorithm chosen for this collective.

        For an engine that runs several collectives at once through one
        :class:`~simtrain.network.flow.FlowSimulator`, so that they contend for links.
        """
        timing = self.time_collective(kind, ranks, size_bytes)
        return self._build(timing.algorithm, kind, self._devices(ranks), float(size_bytes))

    def concurrent_time_s(
        self, kind: CollectiveKind, groups: Sequence[Sequence[int]], size_bytes: float
    ) -> float:
        """Seconds for one collective run at the same time on several alike groups.

        This is how SPMD replicas load the network: every data-parallel group reduces its
        gradients at once, and their flows share links (spines of a fat-tree, for instance).
        Each group runs the algorithm and protocol chosen for the first group alone; phase i
        of all groups runs together.

        Raises:
            SpecError: groups of different shapes, or ranks outside the topology.
        """
        if not groups:
            return 0.0
        first = self.time_collective(kind, groups[0], size_bytes)
        if first.algorithm == "none" or len(groups) == 1:
            return first.time_s
        merged = merge_schedules(
            [
                self._build(first.algorithm, kind, self._devices(g), float(size_bytes))
                for g in groups
            ]
        )
        multi_node = any(self._multi_node(self._devices(g)) for g in groups)
        return self._fastest_protocol(
            first.algorithm, kind, merged, multi_node, protocols=(first.protocol,)
        ).time_s

    def _build(self, algorithm: str, kind: str, devices: np.ndarray, size_bytes: float) -> Schedule:
        """Schedule of ``algorithm`` (or of nothing, or one transfer for p2p)."""
        if algorithm == "none":
            return Schedule(())
        if algorithm == "p2p":
            return Schedule((Phase.of(devices[:1], devices[1:2], size_bytes),))
        return ALGORITHMS[algorithm].build(kind, devices, size_bytes, self.topology)

    def _devices(self, ranks: Sequence[int]) -> np.ndarray:
        """Devices of global ``ranks``, or a SpecError naming the first rank out of range."""
        ranks_arr = np.asarray(ranks, dtype=np.int64)
        if ranks_arr.size and (ranks_arr.min() < 0 or ranks_arr.max() >= self.placement.size):
            bad = int(
                ranks_arr.max() if ranks_arr.max() >= self.placement.size else ranks_arr.min()
            )
            raise SpecError(
                f"'ranks' must be global ranks 0..{self.placement.size - 1} of this topology "
                f"(got rank {bad} in a group of {ranks_arr.size}; the topology has "
                f"{self.topology.num_devices} devices)"
            )
        return self.placement[ranks_arr]

    def _best(self, kind: str, devices: np.ndarray, size_bytes: float) -> CollectiveTiming:
        """Fastest (algorithm, protocol) pair allowed by the model's settings."""
        if kind == "send_recv":
            schedule = Schedule((Phase.of(devices[:1], devices[1:2], size_bytes),))
            return self._fastest_protocol("p2p", kind, schedule, multi_node=True)
        if self.algorithm != "auto":
            info = get_algorithm(self.algorithm, kind)
            schedule = info.build(kind, devices, size_bytes, self.topology)
            return self._fastest_protocol(info.name, kind, schedule, self._multi_node(devices))
        best: CollectiveTiming | None = None
        reasons = []
        torus = self.topology.kind == "torus_3d"
        for name in (TORUS_AUTO_ALGORITHMS if torus else AUTO_ALGORITHMS)[kind]:
            info = ALGORITHMS[name]
            try:
                schedule = info.build(kind, devices, size_bytes, self.topology)
            except SpecError as exc:
                reasons.append(str(exc))
                continue
            timing = self._fastest_protocol(info.name, kind, schedule, self._multi_node(devices))
            if best is None or timing.time_s < best.time_s:
                best = timing
        if best is None:
            raise SpecError(f"no algorithm can run {kind} on this group: {'; '.join(reasons)}")
        return best

    def _multi_node(self, devices: np.ndarray) -> bool:
        node = devices // self.topology.gpus_per_node
        return bool(node.min() != node.max())

    def _fastest_protocol(
        self,
        algorithm: str,
        kind: str,
        schedule: Schedule,
        multi_node: bool,
        protocols: tuple[str, ...] | None = None,
    ) -> CollectiveTiming:
        """Cost ``schedule`` under each allowed protocol (or ``protocols``); keep the fastest."""
        topo = self.topology
        capacity = topo.link_bandwidth_bytes_per_s * schedule.link_efficiency(topo.link_class)
        parts = []
        for phase in schedule.phases:
            if phase.src.size == 0 or phase.repeat == 0:
                continue
            routes = topo.routes(phase.src, phase.dst)
            parts.append((phase, routes, transfer_time_s(routes, phase.size_bytes, capacity)))
        if protocols is not None:
            names: tuple[str, ...] = protocols
        elif self.protocol == "none":
            names = ("none",)
        elif self.protocol == "auto":
            names = FAMILY_PROTOCOLS[schedule.family]
        else:
            names = (self.protocol,)
            if self.protocol not in FAMILY_PROTOCOLS[schedule.family]:
                raise SpecError(
                    f"'protocol' {self.protocol} is not available for algorithm {algorithm} "
                    f"(valid: {', '.join(FAMILY_PROTOCOLS[schedule.family])})"
                )
        best: CollectiveTiming | None = None
        for name in names:
            total = self._protocol_time_s(name, kind, schedule, parts, multi_node)
            if best is None or total < best.time_s:
                best = CollectiveTiming(total, algorithm, name)
        assert best is not None  # names is never empty
        return best

    def _protocol_time_s(
        self,
        name: str,
        kind: str,
        schedule: Schedule,
        parts: list[tuple[Phase, np.ndarray, float]],
        multi_node: bool,
    ) -> float:
        """Base latency + per phase (repeats x transfer / bandwidth share + hop latencies)."""
        topo = self.topology
        if name == "none":
            base_s, factor, link_lat = 0.0, 1.0, topo.link_latency_s
        else:
            proto = PROTOCOLS[name]
            base_s = proto.base_latency_s[schedule.family] + self.overhead_s
            factor = proto.bandwidth_factor(schedule.family, kind, multi_node)
            link_lat = proto.link_latency_s(schedule.family, topo.link_class, topo.link_latency_s)
        total = base_s
        for phase, routes, transfer_s in parts:
            latency = np.where(routes >= 0, link_lat[np.maximum(routes, 0)], 0.0).sum(axis=1)
            total += phase.repeat * transfer_s / factor + phase.num_latencies * float(latency.max())
        return total
