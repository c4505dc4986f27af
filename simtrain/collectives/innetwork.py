"""In-network reduction: on NVSwitch (NVLS, H100-class nodes) and on IB switches (SHARP).

Inside a node of k group ranks, an NVLS all-reduce has every rank pull its reduced 1/k
shard from the switch (the switch reads and adds the k copies: S leaves each rank) and
multicast it back (S/k up, S down to each rank): S·(k+1)/k bytes per direction per rank,
instead of the ring's 2(k-1)/k · S. The switch's multimem throughput is lower than plain
NVLink streaming; fitting the measured 8 x H100 figure, busbw ≈ 480 GB/s = B·2(k-1)/(k+1)
gives B = 480·9/14 = 308.6 GB/s per direction, 0.834 of the 370 GB/s ring calibration
(``docs/references/collectives.md`` §6.1, nccl-tests#212). The same B reproduces the
user-measured 460 (k=7), 440 (k=6), 420 (k=5) and 370 (k=4) GB/s of NVIDIA/nccl#1455 within
3 %, which supports the traffic model.

Across nodes, NVLS reduce-scatters inside every node, all-reduces each shard across nodes
with one ring per local rank, and all-gathers by multicast inside every node.

SHARP (NCCL's CollNet): ring reduce-scatter inside every node, then every local rank sends
its S/k shard up a switch aggregation tree (device -> leaf -> spine -> core, one tree per
rail) and receives the reduced shard back down, then ring all-gather inside every node. Each
NIC moves S/k each way instead of the ring's 2(m-1)/m · S/k, and every switch forwards one
reduced stream per tree upward, whatever the number of nodes below it.

Both multi-node schedules run their intra- and inter-node parts one after another, without
NCCL's chunk-level overlap, so they are upper bounds (e.g. 2 x 8 H100 NVLS all-reduce gives
≈200 GB/s busbw here; a user measured ≈343 GB/s on 2 x 8 H20 with NVLS + SHARP,
docs/references/collectives.md §6.2, NVIDIA/nccl#1244).
"""

from __future__ import annotations

import numpy as np

from simtrain.collectives.base import GroupLayout, Schedule, register, require_uniform
from simtrain.collectives.hierarchical import inter_node_rings, intra_node_ring
from simtrain.errors import SpecError
from simtrain.network.flow import Phase
from simtrain.topology.base import Topology

NVLS_BUSBW_8XH100_BYTES_PER_S = 480e9
"""Measured NVLS all-reduce busbw on 8 x H100 (docs/references/collectives.md §6.1)."""
RING_BUSBW_8XH100_BYTES_PER_S = 370e9
"""Measured ring busbw on 8 x H100, the catalog's NVLink4 calibration.

Source: docs/references/collectives.md §6.1.
"""
NVLS_EFFICIENCY = NVLS_BUSBW_8XH100_BYTES_PER_S * 9 / 14 / RING_BUSBW_8XH100_BYTES_PER_S
"""Share of the ring-calibrated NVLink bandwidth that NVLS multimem traffic reaches."""


def switch_phase(
    devices: np.ndarray, switches: np.ndarray, up_bytes: float, down_bytes: float
) -> Phase:
    """Every rank sends ``up_bytes`` to its node's switch and receives ``down_bytes`` from it."""
    return Phase.of(
        np.concatenate([devices, switches]),
        np.concatenate([switches, devices]),
        np.concatenate([np.full(devices.size, up_bytes), np.full(devices.size, down_bytes)]),
    )


@register("nvls", ("all_reduce", "reduce_scatter", "all_gather"))
def nvls(kind: str, devices: np.ndarray, size_bytes: float, topology: Topology) -> Schedule:
    """NVLS schedule of ``kind`` (see the module docstring).

    Raises:
        SpecError: the node fabric cannot reduce in-network (e.g. PCIe, A100 NVSwitch).
    """
    if topology.nvls_switch is None:
        raise SpecError(
            "'algo' nvls needs NVSwitches that reduce in-network (NVLink SHARP, H100-class "
            f"nodes); this topology's node fabric is {topology.node_fabric} "
            "(valid here: ring, tree, hierarchical, halving_doubling, direct)"
        )
    layout = GroupLayout.of(devices, topology)
    k = require_uniform(layout, "nvls")
    m = layout.num_nodes
    switches = topology.nvls_switch[devices // topology.gpus_per_node]
    efficiency = (("nvlink", NVLS_EFFICIENCY),)
    if m == 1:
        up, down = {
            "all_reduce": (size_bytes * (k + 1) / k, size_bytes * (k + 1) / k),
            "reduce_scatter": (size_bytes, size_bytes / k),
            "all_gather": (size_bytes / k, size_bytes),
        }[kind]
        return Schedule((switch_phase(devices, switches, up, down),), "nvls", efficiency)
    reduce = switch_phase(devices, switches, size_bytes, size_bytes / k)
    gather = switch_phase(devices, switches, size_bytes / k, size_bytes)
    shard = size_bytes / (k * m)
    if kind == "all_reduce":
        phases = (reduce, inter_node_rings(devices, layout, shard, 2 * (m - 1)), gather)
    elif kind == "reduce_scatter":
        phases = (reduce, inter_node_rings(devices, layout, shard, m - 1))
    else:
        phases = (inter_node_rings(devices, layout, shard, m - 1), gather)
    return Schedule(phases, "nvls", efficiency)


@register("sharp", ("all_reduce",))
def sharp(kind: str, devices: np.ndarray, size_bytes: float, topology: Topology) -> Schedule:
    """SHARP all-reduce (see the module docstring).

    Raises:
        SpecError: the scale-out switches cannot reduce (``topology.sharp`` is off).
    """
    if topology.sharp is None:
        raise SpecError(
            "'algo' sharp needs scale-out switches that reduce in-network "
            "(set cluster.topology.sharp: true on a Clos of SHARP-capable IB switches)"
        )
    layout = GroupLayout.of(devices, topology)
    k = require_uniform(layout, "sharp")
    shard = size_bytes / k
    grid = np.stack(layout.by_node)  # (nodes, k) group ranks
    children, parents = [], []
    for j in range(k):
        child, parent = topology.sharp.reduction_tree(
            devices[grid[:, j]], topology.gpus_per_node, topology.nics_per_node, tree=j
        )
        children.append(child)
        parents.append(parent)
    up_src, up_dst = np.concatenate(children), np.concatenate(parents)
    # Reduction up and broadcast down stream through the tree at the same time.
    tree = Phase.of(np.concatenate([up_src, up_dst]), np.concatenate([up_dst, up_src]), shard)
    intra = intra_node_ring(devices, layout, shard, k - 1)
    return Schedule((intra, tree, intra), family="collnet")
