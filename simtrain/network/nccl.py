"""``NcclNetwork``: the default network model — topology-aware, closed form, NCCL's tuner.

For each process group the topology's view (:mod:`simtrain.network.fabric`) gives the
group's effective fabric once: nodes spanned, ring bus bandwidth inside and across nodes
after oversubscription, rail forwarding, torus dimensions and whatever the topology kind
adds, and the in-network reduction it offers. Each collective is then timed in closed form
by NCCL's cost model (:mod:`simtrain.collectives.cost`) for every algorithm and protocol
NCCL would consider, and the fastest wins, as NCCL's tuner picks; the collective library's
calibrated fixed cost per call (``simtrain/catalog/collective_calibrations``) is added.

It is as fast as a table lookup after the first call on a group (results are cached by
kind, group and size) and, unlike a plain alpha-beta ring, a user who changes the topology
(oversubscription, rails, a torus shape, NVLS or SHARP switches) sees the difference. On a
Clos whose topology says ``clos_routing: ecmp`` it charges the expected loss to hash
collisions (``fabric_clos``). It does not model contention between different collectives:
that is the flow model's job (``simulation.network_model: flow``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simtrain.catalog.collective_calibration import collective_calibration_for
from simtrain.collectives.cost import COSTS, tune
from simtrain.errors import SpecError
from simtrain.network.base import COLLECTIVE_KINDS, CollectiveKind, CollectiveTiming
from simtrain.network.fabric import GroupFabric, group_fabric
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.experiment import ExperimentSpec
from simtrain.topology import Topology, build_topology

PROTOCOL_CHOICES: tuple[str, ...] = ("auto", "none", "ll", "ll128", "simple")
"""Valid ``protocol`` values ("none": catalog bandwidth and latency, no NCCL effects)."""


class NcclNetwork:
    """Closed-form, topology-aware timing of collectives (see the module docstring).

    Args:
        topology: the wired cluster (``build_topology``).
        cluster: the cluster spec it was built from (links, oversubscription).
        algorithm: a closed-form algorithm name (``collectives.cost.COSTS``) or ``auto``.
        protocol: ``auto``, ``none``, ``ll``, ``ll128`` or ``simple``.
        placement: device index of every global rank; omit for rank r on device r.
        overhead_s: fixed cost per call; omit for the accelerator's calibration.
    """

    def __init__(
        self,
        topology: Topology,
        cluster: ClusterSpec,
        algorithm: str = "auto",
        protocol: str = "auto",
        placement: Sequence[int] | None = None,
        overhead_s: float | None = None,
    ) -> None:
        if algorithm != "auto" and algorithm not in COSTS:
            valid = ", ".join(["auto", *sorted(COSTS)])
            raise SpecError(
                f"'algo' must be a known collective algorithm (got {algorithm!r}; valid: {valid})"
            )
        if protocol not in PROTOCOL_CHOICES:
            raise SpecError(
                f"'protocol' must be one of {', '.join(PROTOCOL_CHOICES)} (got {protocol!r})"
            )
        self.topology = topology
        self.cluster = cluster
        self.algorithm = algorithm
        self.protocol = protocol
        self.placement = (
            np.arange(topology.num_devices)
            if placement is None
            else np.asarray(placement, dtype=np.int64)
        )
        calibration = collective_calibration_for(cluster.accelerator)
        self.overhead_s = calibration.launch_overhead_s if overhead_s is None else overhead_s
        self._fabrics: dict[tuple[int, ...], GroupFabric] = {}
        self._cache: dict[tuple[str, tuple[int, ...], float], CollectiveTiming] = {}

    @classmethod
    def from_cluster(
        cls,
        cluster: ClusterSpec,
        algorithm: str = "auto",
        protocol: str = "auto",
        placement: Sequence[int] | None = None,
    ) -> NcclNetwork:
        """Build the topology of ``cluster`` and the model on it."""
        return cls(build_topology(cluster), cluster, algorithm, protocol, placement)

    @classmethod
    def from_experiment(cls, spec: ExperimentSpec) -> NcclNetwork:
        """The model of an experiment: its cluster and ``simulation.collective_algorithm``."""
        return cls.from_cluster(spec.cluster, algorithm=spec.simulation.collective_algorithm)

    def collective_time_s(
        self, kind: CollectiveKind, ranks: Sequence[int], size_bytes: float
    ) -> float:
        """Seconds for one ``kind`` collective over global ``ranks`` (every replica at once)."""
        return self.time_collective(kind, ranks, size_bytes).time_s

    def p2p_time_s(self, src: int, dst: int, size_bytes: float) -> float:
        """Seconds to move ``size_bytes`` from global rank ``src`` to ``dst``."""
        if src == dst:
            return 0.0
        return self.time_collective("send_recv", (src, dst), size_bytes).time_s

    def time_collective(
        self, kind: str, ranks: Sequence[int], size_bytes: float
    ) -> CollectiveTiming:
        """Time, algorithm and protocol of one collective (cached by kind, group and size).

        Raises:
            SpecError: unknown kind, ranks outside the topology, or an algorithm or protocol
                that cannot run this collective here (named in the message).
        """
        group = tuple(ranks)
        key = (kind, group, float(size_bytes))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if kind not in COLLECTIVE_KINDS:
            raise SpecError(f"'op' must be one of {', '.join(COLLECTIVE_KINDS)} (got {kind!r})")
        if len(group) <= 1 or size_bytes <= 0:
            timing = CollectiveTiming(0.0, "none", "none")
        else:
            algorithm = "p2p" if kind == "send_recv" else self.algorithm
            timing = tune(
                kind,
                self.fabric(group),
                float(size_bytes),
                algorithm,
                self.protocol if kind != "send_recv" else "auto",
                self.overhead_s,
            )
        self._cache[key] = timing
        return timing

    def fabric(self, ranks: Sequence[int]) -> GroupFabric:
        """The effective fabric of the group on global ``ranks`` (cached)."""
        group = tuple(ranks)
        found = self._fabrics.get(group)
        if found is None:
            found = self._fabrics[group] = group_fabric(
                self.topology, self.cluster, self._devices(group)
            )
        return found

    def _devices(self, ranks: tuple[int, ...]) -> np.ndarray:
        """Devices of global ``ranks``, or a SpecError naming the first rank out of range."""
        ranks_arr = np.asarray(ranks, dtype=np.int64)
        bad = ranks_arr[(ranks_arr < 0) | (ranks_arr >= self.placement.size)]
        if bad.size:
            raise SpecError(
                f"'ranks' must be global ranks 0..{self.placement.size - 1} of this topology "
                f"(got rank {int(bad[0])} in a group of {ranks_arr.size}; the topology has "
                f"{self.topology.num_devices} devices)"
            )
        return self.placement[ranks_arr]
