"""Every network model honours the NetworkModel protocol; the test double times exactly."""

import pytest

from simtrain.catalog import get_accelerator
from simtrain.compute import RooflineComputeModel
from simtrain.engine import run_program
from simtrain.engine.replicas import ReplicatedNetwork
from simtrain.network import ConstantBandwidthNetwork, NetworkModel
from simtrain.network.alpha_beta import AlphaBetaNetwork
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.parallel.builder import build_program
from simtrain.parallel.layout import RankLayout
from tests.conftest import make_experiment


def test_every_model_is_a_network_model():
    spec = make_experiment()
    flow = FlowNetworkModel.from_experiment(spec)
    models = [
        ConstantBandwidthNetwork(1e9),
        AlphaBetaNetwork.from_cluster(spec.cluster),
        flow,
        ReplicatedNetwork(flow, RankLayout.from_spec(spec.parallel)),
    ]
    for model in models:
        assert isinstance(model, NetworkModel)
        assert model.collective_time_s("all_reduce", [0], 1e6) == 0.0  # a group of one
        assert model.collective_time_s("all_reduce", list(range(8)), 1e6) > 0


def test_constant_bandwidth_double_drives_the_engine():
    spec = make_experiment("parallel.overlap_grad_reduce=false")
    program = build_program(spec)
    network = ConstantBandwidthNetwork(bandwidth_bytes_per_s=1e9, latency_s=1e-5)
    # compiled execution and no interference: the step is device compute plus the transfer
    compute = RooflineComputeModel(get_accelerator("H100-SXM"), execution_mode="compiled")
    result = run_program(program, compute, network, interference=False)
    (grad,) = [t for t in program.tasks if t.ops and t.ops[0].name == "grad_all_reduce"]
    compute_s = sum(compute.task_time_s(t.ops) for t in program.tasks if t.stream == "compute")
    expected = compute_s + 1e-5 + grad.ops[0].comm_bytes / 1e9
    assert result.step_time_s == pytest.approx(expected, rel=1e-12)
