"""Group fabric of TPU slices: ICI tori (one scale-up domain each), joined by DCN.

Every chip of a torus slice reaches every other over ICI, so a slice is one "node" in NCCL's
sense (link class ``ici``: no NCCL protocols); several slices are joined by the data-centre
network (``topology/multislice.py``), the group's inter-node tier.

Inside a slice:

- A single ring in group order: each hop moves over the dimension-order route between
  consecutive ranks. Under SPMD every chip runs such a ring at once, so a ring whose hops
  are h links long on average shares each link with about h flows: bus bandwidth
  ``link / max(1, h)`` (one link for the usual contiguous groups).
- Multi-dimensional rings (XLA's torus collectives, ``collectives/torus.py``): a group that
  is a full sub-box of the torus runs one ring per dimension it spans at once, on two links
  (both directions) where the dimension wraps around in full and on one link otherwise. Bus
  bandwidth: their sum; steps of one reduce-scatter pass: the sum of (length - 1). On the
  16x16x16 TPU v4 pod that is 6 x 44.8 GB/s = 269 GB/s per chip, the published 1.1 PB/s
  pod all-reduce bandwidth over 4,096 chips (``docs/references/tpu.md`` §2).

Across slices, each host's DCN port is shared by its chips, and under SPMD every chip of a
host runs its own replica of the group: each chip gets 1/g of its host's port (g chips per
host), and the group's ring across slices gets that times its chips per slice.
"""

from __future__ import annotations

import numpy as np

from simtrain.network.fabric import GroupFabric, MultiRing, Tier, register_fabric_view
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import Topology, cluster_links


@register_fabric_view("torus_3d")
def torus_view(topology: Topology, cluster: ClusterSpec, devices: np.ndarray) -> GroupFabric:
    """The group's fabric on TPU slices (see the module docstring)."""
    spec = cluster.topology
    shape = np.array(spec.torus_shape)
    ici, dcn = cluster_links(cluster)
    per_link = ici.effective_bandwidth_bytes_per_s / ici.ports
    per_slice = topology.chips_per_slice or topology.num_devices
    slices, counts = np.unique(devices // per_slice, return_counts=True)
    first = devices[devices // per_slice == devices[0] // per_slice] % per_slice
    coords = np.stack(np.unravel_index(first, tuple(shape), order="F"), axis=1)
    hops = _hop_lengths(coords, np.roll(coords, -1, axis=0), shape, spec.torus_wraparound)
    mean_hop = float(hops.mean()) if first.size > 1 else 1.0
    intra = Tier(
        bandwidth_bytes_per_s=per_link / max(1.0, mean_hop),
        latency_s=ici.latency_s,
        link_class="ici",
        flow_bandwidth_bytes_per_s=per_link,
    )
    inter = None
    if slices.size > 1:
        share = dcn.effective_bandwidth_bytes_per_s / topology.gpus_per_node
        inter = Tier(
            bandwidth_bytes_per_s=int(counts.min()) * share,
            latency_s=dcn.latency_s,
            link_class="net",
            flow_bandwidth_bytes_per_s=share,
        )
    return GroupFabric(
        num_ranks=int(devices.size),
        num_nodes=int(slices.size),
        ranks_per_node=int(counts.min()),
        intra=intra,
        inter=inter,
        multi_ring=None if inter else _multi_ring(coords, shape, spec.torus_wraparound, per_link),
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
