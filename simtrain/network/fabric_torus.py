"""Group fabric of a 3D torus (TPU ICI): one scale-up domain, rings along its dimensions.

Every chip of a torus slice reaches every other over ICI, so a group is one "node" in
NCCL's sense and all its traffic is intra-domain (link class ``ici``: no NCCL protocols).

- A single ring in group order: each hop moves over the dimension-order route between
  consecutive ranks. Under SPMD every chip runs such a ring at once, so a ring whose hops
  are h links long on average shares each link with about h flows: bus bandwidth
  ``link / max(1, h)`` (one link for the usual contiguous groups).
- Multi-dimensional rings (XLA's torus collectives, ``collectives/torus.py``): a group that
  is a full sub-box of the torus runs one ring per dimension it spans at once, on two links
  (both directions) where the dimension wraps around in full and on one link otherwise. Bus
  bandwidth: their sum; steps of one reduce-scatter pass: the sum of (length - 1). On the
  16x16x16 TPU v4 pod that is 6 x 44.8 GB/s = 269 GB/s per chip, the published 1.1 PB/s
  pod all-reduce bandwidth over 4,096 chips (``docs/references/hardware.md`` §7.1).
"""

from __future__ import annotations

import numpy as np

from simtrain.network.fabric import GroupFabric, MultiRing, Tier, register_fabric_view
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import Topology, cluster_links


@register_fabric_view("torus_3d")
def torus_view(topology: Topology, cluster: ClusterSpec, devices: np.ndarray) -> GroupFabric:
    """The group's fabric on a 3D torus (see the module docstring)."""
    spec = cluster.topology
    shape = np.array(spec.torus_shape)
    link, _ = cluster_links(cluster)
    per_link = link.effective_bandwidth_bytes_per_s / link.ports
    coords = np.stack(np.unravel_index(devices, tuple(shape), order="F"), axis=1)
    hops = _hop_lengths(coords, np.roll(coords, -1, axis=0), shape, spec.torus_wraparound)
    mean_hop = float(hops.mean()) if devices.size > 1 else 1.0
    ring_bw = per_link / max(1.0, mean_hop)
    intra = Tier(
        bandwidth_bytes_per_s=ring_bw,
        latency_s=link.latency_s,
        link_class="ici",
        flow_bandwidth_bytes_per_s=per_link,
    )
    return GroupFabric(
        num_ranks=int(devices.size),
        num_nodes=1,
        ranks_per_node=int(devices.size),
        intra=intra,
        multi_ring=_multi_ring(coords, shape, spec.torus_wraparound, per_link),
    )


def _hop_lengths(
    src: np.ndarray, dst: np.ndarray, shape: np.ndarray, wraparound: bool
) -> np.ndarray:
    """Links on the dimension-order route of each (src, dst) coordinate pair."""
    delta = np.abs(dst - src)
    if wraparound:
        delta = np.minimum(delta, shape - delta)
    return delta.sum(axis=1)


def _multi_ring(
    coords: np.ndarray, shape: np.ndarray, wraparound: bool, per_link: float
) -> MultiRing | None:
    """Multi-dimensional rings of a group that is a full sub-box of the torus, else None."""
    spans = np.array([np.unique(coords[:, d]).size for d in range(3)])
    if int(np.prod(spans)) != coords.shape[0] or coords.shape[0] < 2:
        return None
    for d in range(3):
        values = np.unique(coords[:, d])
        if spans[d] < shape[d] and values[-1] - values[0] != spans[d] - 1:
            return None  # not contiguous along d (a wrapped or strided sub-box)
    links = np.where((spans == shape) & (spans > 2) & wraparound, 2, (spans > 1).astype(int))
    return MultiRing(float(links.sum()) * per_link, int((spans - 1).sum()))
