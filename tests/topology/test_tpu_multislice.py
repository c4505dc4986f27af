"""TPU slices as ICI tori (3D v4/v5p, 2D v5e), several slices joined by DCN."""

import numpy as np
import pytest

from simtrain.errors import SpecError
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import build_topology


def v5e(num_slices=2, shape=(16, 16, 1)):
    chips = int(np.prod(shape)) * num_slices
    return ClusterSpec(
        accelerator="TPUv5e",
        num_gpus=chips,
        gpus_per_node=8,
        topology={"kind": "torus_3d", "torus_shape": list(shape), "num_slices": num_slices},
    )


def test_v5e_pod_is_a_2d_torus_with_the_published_bisection():
    topo = build_topology(v5e(num_slices=1))
    # tpu.md §2: 16 rows x 2 wrap-around links x 50 GB/s = 1.6 TB/s
    assert topo.bisection_bandwidth_bytes_per_s == pytest.approx(1.6e12)
    assert topo.num_links == 256 * 4  # four ICI ports per chip


def test_slices_are_joined_only_by_dcn_host_ports():
    topo = build_topology(v5e(num_slices=2))
    assert topo.chips_per_slice == 256
    assert "2 slices of 256 chips" in topo.details["slices"]
    # 32 hosts per slice x 25 GB/s = 6.4 Tb/s per slice (tpu.md §3)
    assert "6.4 Tb/s per slice" in topo.details["dcn"]
    inside = topo.routes(np.array([0]), np.array([17]))[0]
    across = topo.routes(np.array([3]), np.array([256 + 9]))[0]
    assert set(topo.link_class[inside[inside >= 0]]) == {3}  # ici
    across = across[across >= 0]
    assert across.size == 2 and set(topo.link_class[across]) == {2}  # host port out, in
    assert topo.link_bandwidth_bytes_per_s[across].tolist() == [25e9, 25e9]


def test_chips_of_a_host_share_its_dcn_port():
    model = FlowNetworkModel.from_cluster(v5e(num_slices=2))
    one = model.p2p_time_s(0, 256, 2**30)
    # eight chips of host 0 each sending to their peer in slice 1 share one 25 GB/s port
    eight = model.concurrent_time_s("send_recv", [[c, 256 + c] for c in range(8)], 2**30)
    assert eight == pytest.approx(8 * one, rel=0.02)


def test_torus_all_reduce_runs_on_one_slice_of_several():
    model = FlowNetworkModel.from_cluster(v5e(num_slices=2), algorithm="torus")
    alone = FlowNetworkModel.from_cluster(v5e(num_slices=1), algorithm="torus")
    size = 2**28
    second_slice = list(range(256, 512))
    assert model.collective_time_s("all_reduce", second_slice, size) == pytest.approx(
        alone.collective_time_s("all_reduce", list(range(256)), size)
    )


def test_slices_must_hold_the_cluster():
    cluster = v5e(num_slices=2).model_copy(update={"num_gpus": 256 * 3})
    with pytest.raises(SpecError, match="2 slices of 16x16x1 = 512"):
        build_topology(cluster)
