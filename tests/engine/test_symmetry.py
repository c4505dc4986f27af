"""Reduced mode (one rank per pipeline stage) against full mode (every rank), and replicas."""

import pytest

from simtrain.api import simulate
from simtrain.engine.replicas import ReplicatedNetwork
from simtrain.network.flow_model import FlowNetworkModel
from simtrain.parallel.layout import RankLayout
from tests.conftest import LLAMA_TINY, make_experiment

MOE_TINY = {**LLAMA_TINY, "num_experts": 4, "moe_top_k": 2}
CONFIGS = {
    "pp-1f1b": (("parallel.pp=2", "parallel.tp=2"), None),
    "pp-interleaved": (
        (
            "parallel.pp=2",
            "parallel.vpp=2",
            "parallel.pipeline_schedule=interleaved",
            "model.num_layers=4",
        ),
        None,
    ),
    "zero3": (("parallel.zero_stage=3", "parallel.tp=2"), None),
    "cp-ring": (("parallel.cp=2", "parallel.tp=2"), None),
    "ep": (("parallel.ep=4",), MOE_TINY),
    "oversubscribed-fat-tree-flow": (
        (
            "parallel.tp=2",
            "cluster.topology.oversubscription=4",
            "cluster.num_gpus=32",
            "simulation.network_model=flow",
            "parallel.global_batch_size=32",
        ),
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reduced_equals_full(name):
    overrides, model = CONFIGS[name]
    spec = make_experiment(*overrides, model=model)
    reduced, full = simulate(spec, full=False), simulate(spec, full=True)
    assert len(full.ranks) == spec.cluster.num_gpus > len(reduced.ranks)
    assert full.step_time_s == pytest.approx(reduced.step_time_s, rel=5e-3)


def test_replicas_share_an_oversubscribed_fabric():
    spec = make_experiment(
        "cluster.num_gpus=64",
        "cluster.topology.oversubscription=4",
        "parallel.tp=8",
        "simulation.network_model=flow",
    )
    flow = FlowNetworkModel.from_experiment(spec)
    layout = RankLayout.from_spec(spec.parallel)
    replicated = ReplicatedNetwork(flow, layout)
    dp_group = layout.group_of(0, "dp")
    alone = flow.collective_time_s("all_reduce", dp_group, 2**28)
    together = replicated.collective_time_s("all_reduce", dp_group, 2**28)
    assert together > alone  # 8 DP groups (one per TP rank) share the uplinks
    tp_group = layout.group_of(0, "tp")  # inside one node: replicas do not interfere
    assert replicated.collective_time_s("all_reduce", tp_group, 2**24) == pytest.approx(
        flow.collective_time_s("all_reduce", tp_group, 2**24)
    )


def test_full_mode_stages_wait_for_their_own_pipeline_replica():
    spec = make_experiment("parallel.pp=2", "parallel.tp=2")
    from simtrain.parallel.builder import build_program

    program = build_program(spec, full=True)
    for task in program.tasks:
        for dep in task.deps:
            source = program.tasks[dep]
            if source.stream == "pp_comm" and source.rank != task.rank:
                assert source.group == (source.rank, task.rank)  # sent to this very rank
