"""Group fabric of a dragonfly (HPE Slingshot): node fabrics, then switch groups.

Inside a node and for the NICs a group's ring can use, a dragonfly is like any cluster of
nodes (:func:`simtrain.network.fabric_clos.clos_view` gives those figures, with a
non-blocking scale-out). What differs is the switch fabric above the NICs
(``topology/dragonfly.py``): hops that leave their switch share the switch's local links, and
hops that leave their group share the group's global links. Under SPMD every replica of the
group runs the same pattern at once, so with N of the cluster's NICs on a switch (or in a
group) and a fraction f of the ring's hops leaving it, N·f flows share its exit capacity:

- local (leaving a switch): minimal routing has one link to each destination switch the
  pattern uses; Valiant and UGAL spread over all ``switches_per_group - 1`` local links.
- global (leaving a group): minimal routing has ``links_per_group_pair`` links to each
  destination group the pattern uses; Valiant and UGAL spread over all the group's global
  links, each detour using two global hops: ``links_per_group_pair · (groups - 1) / 2``
  (and never less than minimal).

Each flow gets at most capacity / (N·f); the ring's hops (and an all-to-all's pairs) take
the least over the tiers, capped by the NIC. Consecutive nodes share a switch, so rings of
a data-parallel group mostly stay below the global tier, while an all-to-all across groups
pays the global taper (Frontier: 512 NICs per group, 4 x 73 global links).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simtrain.collectives.base import GroupLayout
from simtrain.network.fabric import GroupFabric, register_fabric_view
from simtrain.network.fabric_clos import _exchange_pairs, _ring_hops, clos_view
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import Topology, cluster_links
from simtrain.topology.dragonfly import DragonflyRouter


@register_fabric_view("dragonfly")
def dragonfly_view(topology: Topology, cluster: ClusterSpec, devices: np.ndarray) -> GroupFabric:
    """The group's fabric on a dragonfly (see the module docstring)."""
    base = clos_view(topology, cluster, devices)
    if base.inter is None or not isinstance(topology.router, DragonflyRouter):
        return base
    _, out = cluster_links(cluster)
    nic_bw = out.effective_bandwidth_bytes_per_s
    g = topology.gpus_per_node
    nics = max(1, topology.nics_per_node)
    by_node = GroupLayout.of(devices, topology).by_node
    channels = int(base.notes.get("channels", 1))
    flows_per_nic = base.notes.get("flows_per_nic", 1.0)
    src, dst, _ = _ring_hops(devices, by_node, g, nics, channels)
    ring_rate = min(nic_bw, _limit(topology.router, src, dst, nics)) / flows_per_nic
    nodes = np.array([devices[r[0]] // g for r in by_node])
    src, dst = _exchange_pairs(nodes)
    exchange_rate = min(nic_bw, _limit(topology.router, src, dst, nics)) / flows_per_nic
    inter = dataclasses.replace(
        base.inter,
        bandwidth_bytes_per_s=channels * ring_rate,
        flow_bandwidth_bytes_per_s=ring_rate,
        exchange_bandwidth_bytes_per_s=channels * exchange_rate,
    )
    notes = {
        **base.notes,
        "scale_out_share_ring": ring_rate / nic_bw,
        "scale_out_share_exchange": exchange_rate / nic_bw,
    }
    return dataclasses.replace(base, inter=inter, notes=notes)


def _limit(router: DragonflyRouter, src_node: np.ndarray, dst_node: np.ndarray, nics: int) -> float:
    """Most one flow gets when every NIC carries these node-to-node hops (SPMD)."""
    shape, links = router.shape, router.links
    bw = float(router.capacity_bytes_per_s[links.nic_up[0, 0]])
    adaptive = router.routing != "minimal"
    a = shape.switches_per_group
    src_sw, dst_sw = links.switch_of_node[src_node], links.switch_of_node[dst_node]
    src_grp, dst_grp = src_sw // a, dst_sw // a
    nics_on_switch = np.bincount(links.switch_of_node, minlength=shape.num_groups * a) * nics
    nics_in_group = np.bincount(links.switch_of_node // a, minlength=shape.num_groups) * nics
    limit = np.inf
    cross_sw = (src_sw != dst_sw) & (src_grp == dst_grp)
    if cross_sw.any():
        share = cross_sw.mean()
        for sw in np.unique(src_sw[cross_sw]):
            targets = np.unique(dst_sw[cross_sw & (src_sw == sw)]).size
            capacity = bw * ((a - 1) if adaptive else targets)
            limit = min(limit, capacity / (nics_on_switch[sw] * share))
    cross_grp = src_grp != dst_grp
    if cross_grp.any():
        share = cross_grp.mean()
        k, groups = shape.links_per_group_pair, shape.num_groups
        for grp in np.unique(src_grp[cross_grp]):
            targets = np.unique(dst_grp[cross_grp & (src_grp == grp)]).size
            minimal = k * targets
            links_out = max(minimal, k * (groups - 1) / 2) if adaptive else minimal
            limit = min(limit, bw * links_out / (nics_in_group[grp] * share))
    return float(limit)
