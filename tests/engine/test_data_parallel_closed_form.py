"""A data-parallel step equals its compute plus its network model's all-reduce, exactly."""

import pytest

from simtrain.api import simulate
from simtrain.catalog import get_link
from simtrain.network.nccl import NcclNetwork
from tests.conftest import make_experiment


def compute_seconds(result, categories=("compute", "recompute", "optimizer")) -> float:
    rank = result.ranks[0]
    return sum(rank.by_category_s.get(c, 0.0) for c in categories)


def ring_all_reduce_s(n: int, size_bytes: float, bandwidth: float, alpha: float) -> float:
    return 2 * (n - 1) / n * size_bytes / bandwidth + 2 * (n - 1) * alpha


def test_unoverlapped_dp_step_is_compute_plus_ring_all_reduce():
    # Compiled execution issues kernels at no host cost, so the step is device work only.
    spec = make_experiment(
        "parallel.overlap_grad_reduce=false",
        "simulation.network_model=alpha_beta",
        "training.execution_mode=compiled",
    )
    result = simulate(spec)
    grads = [op for t in result.program.tasks for op in t.ops if op.name == "grad_all_reduce"]
    assert len(grads) == 1
    size = grads[0].comm_bytes
    # 16 ranks over two H100 nodes: NVLink4 (370 GB/s measured) vs 8 NDR NICs (8 x 47 GB/s);
    # the slower one, NVLink4, bounds the ring; inter-node steps pay the NIC latency.
    bandwidth = min(
        get_link("nvlink4").effective_bandwidth_bytes_per_s,
        8 * get_link("ib-ndr").effective_bandwidth_bytes_per_s,
    )
    alpha = get_link("ib-ndr").latency_s
    expected = compute_seconds(result) + ring_all_reduce_s(16, size, bandwidth, alpha)
    assert result.step_time_s == pytest.approx(expected, rel=1e-12)
    summary = result.summary()
    assert summary["exposed_comm_s"] == pytest.approx(
        ring_all_reduce_s(16, size, bandwidth, alpha), rel=1e-9
    )


def test_unoverlapped_dp_step_is_compute_plus_the_tuned_all_reduce():
    spec = make_experiment("parallel.overlap_grad_reduce=false", "training.execution_mode=compiled")
    result = simulate(spec)
    (grad,) = [op for t in result.program.tasks for op in t.ops if op.name == "grad_all_reduce"]
    timing = NcclNetwork.from_cluster(spec.cluster).time_collective(
        "all_reduce", range(16), grad.comm_bytes
    )
    assert result.step_time_s == pytest.approx(compute_seconds(result) + timing.time_s, rel=1e-12)
    frame = result.events_frame()
    (row,) = frame[frame.label.str.contains("grad")].itertuples()
    assert (row.algorithm, row.protocol) == (timing.algorithm, timing.protocol)
    assert timing.algorithm in ("ring", "tree", "nvls_tree")


def test_gradient_bytes_equal_local_parameters_in_fp32():
    spec = make_experiment("parallel.overlap_grad_reduce=false")
    result = simulate(spec)
    (grad,) = [op for t in result.program.tasks for op in t.ops if op.name == "grad_all_reduce"]
    # all weight matrices plus the embedding tables; norms and biases are not GEMM weights
    m = spec.model
    weights = m.num_layers * 12 * m.hidden_size**2 + (m.vocab_size + m.seq_length) * m.hidden_size
    assert grad.comm_bytes == 4 * weights


def test_overlap_hides_part_of_the_reduction():
    # compute-heavy enough that a layer's backward outlasts one bucket's all-reduce
    bigger = ("model.hidden_size=2048", "model.num_layers=4", "model.seq_length=4096")
    hidden = simulate(make_experiment(*bigger, "parallel.grad_bucket_size_bytes=200000000"))
    exposed = simulate(make_experiment(*bigger, "parallel.overlap_grad_reduce=false"))
    assert hidden.step_time_s < exposed.step_time_s
    assert hidden.summary()["exposed_comm_s"] < exposed.summary()["exposed_comm_s"]
