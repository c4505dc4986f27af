"""MoE as it runs: parallel folding, expert TP, dispatchers, routing kernels, imbalance."""

from __future__ import annotations

import pytest

from simtrain.api import compute_model_for, simulate
from simtrain.catalog import get_accelerator
from simtrain.cli.app import run_app
from simtrain.compute.roofline import RooflineComputeModel
from simtrain.errors import SpecError
from simtrain.parallel.builder import build_program, make_layout
from simtrain.workload.moe import bins_hit, destinations
from simtrain.workload.primitives import gemm
from tests.cli.test_core_cli import QUICKSTART
from tests.conftest import LLAMA_TINY, make_experiment

MOE = {**LLAMA_TINY, "name": "moe-tiny", "num_experts": 8, "moe_top_k": 2}
FINE = {**MOE, "num_experts": 64, "moe_top_k": 8, "moe_ffn_hidden_size": 128}


def ops_of(spec, name_prefix: str = "") -> list:
    program = build_program(spec)
    return [
        (task, op)
        for task in program.tasks
        for op in task.ops
        if op.name.startswith(name_prefix) and task.rank == program.simulated_ranks[0]
    ]


def test_folding_makes_ep_wider_than_dp_expressible():
    # ep = 32 over tp = 2 x dp = 16: impossible without folding (ep must divide dp*cp)...
    base = ("parallel.tp=2", "parallel.sp=true", "parallel.ep=32", "cluster.num_gpus=32")
    with pytest.raises(SpecError, match=r"parallel.ep\*etp=32\*2=64 must divide"):
        make_experiment(*base, "parallel.global_batch_size=16", model=FINE)
    # ... and fine with expert tensor parallelism 1: the 32 ranks form one expert group.
    spec = make_experiment(*base, "parallel.etp=1", "parallel.global_batch_size=16", model=FINE)
    layout = make_layout(spec)
    assert layout.group_of(5, "ep") == tuple(range(32))
    assert layout.group_of(5, "tp") == (4, 5)
    assert spec.parallel.expert_dp == 1
    assert simulate(spec).step_time_s > 0


def test_edp_must_match_the_grid():
    with pytest.raises(SpecError, match=r"parallel.edp=8 must equal parallel.tp\*cp\*dp/\(ep"):
        make_experiment("parallel.ep=4", "parallel.edp=8", model=MOE)


def test_expert_tensor_parallelism_gathers_over_its_own_group():
    spec = make_experiment(
        "parallel.tp=4", "parallel.sp=true", "parallel.ep=2", "parallel.etp=2", model=MOE
    )  # 16 ranks: etp 2 x ep 2 x edp 4
    gathers = ops_of(spec, "expert_tp_all_gather")
    assert gathers and all(len(task.group) == 2 for task, _ in gathers)
    assert all(op.axis == "etp" for _, op in gathers)
    # each expert's matrices are split over etp = 2, not tp = 4
    fc1 = next(op for _, op in ops_of(spec, "expert_fc1") if op.phase == "fwd")
    assert fc1.n == 2 * spec.model.expert_ffn_size // 2


def test_moe_layer_runs_on_sequence_parallel_tokens_without_tp_boundary():
    spec = make_experiment("parallel.tp=2", "parallel.sp=true", "parallel.ep=2", model=MOE)
    names = [
        op.name
        for task, op in ops_of(spec)
        if op.layer == 0 and op.phase == "fwd" and task.microbatch == 0
    ]
    # attention keeps its gather and reduce-scatter; the MoE MLP adds none on tp
    assert names.count("attn_all_gather") == 1 and "mlp_all_gather" not in names
    router = next(op for _, op in ops_of(spec, "router") if op.phase == "fwd")
    assert router.m == spec.model.seq_length // 2  # the rank's own tokens


def test_routing_kernels_and_dispatch_bytes():
    spec = make_experiment("parallel.ep=2", model=MOE)
    names = {op.name for _, op in ops_of(spec)}
    assert {"router_topk", "moe_permute", "moe_unpermute", "moe_permute_bwd"} <= names
    dispatch = next(op for _, op in ops_of(spec, "moe_dispatch") if op.phase == "fwd")
    tokens, h = spec.model.seq_length, spec.model.hidden_size
    assert dispatch.comm_bytes == tokens * 2 * h * 2  # a 16-bit copy per routed expert


def test_imbalance_loads_the_busiest_rank_and_capacity_caps_it():
    def expert_flops(model):
        spec = make_experiment("parallel.ep=2", model=model)
        return sum(op.flops for _, op in ops_of(spec, "expert_fc1") if op.phase == "fwd")

    base = expert_flops(MOE)
    assert expert_flops({**MOE, "moe_token_imbalance": 1.5}) == pytest.approx(1.5 * base)
    capped = {**MOE, "moe_token_imbalance": 1.5, "moe_capacity_factor": 1.25}
    assert expert_flops(capped) == pytest.approx(1.25 * base)


def test_group_limited_routing_reaches_fewer_nodes():
    dsv3 = make_experiment(model=FINE).model.model_copy(
        update={"num_experts": 256, "moe_router_num_groups": 8, "moe_router_group_topk": 4}
    )
    nodes, gpus = destinations(dsv3, ep=64, nodes=8)
    free_nodes, _ = destinations(dsv3.model_copy(update={"moe_router_num_groups": None,
                                                         "moe_router_group_topk": None}),
                                 ep=64, nodes=8)  # fmt: skip
    assert nodes <= 4 < free_nodes < 8
    assert nodes < gpus <= 8
    assert bins_hit(8, 256, 1) == 1.0


DEEPEP = ("parallel.ep=16", "cluster.num_gpus=16", "parallel.moe_dispatcher=deepep")


def test_deepep_dispatches_once_per_node_over_rdma_then_nvlink():
    spec = make_experiment(*DEEPEP, "parallel.global_batch_size=16", model=FINE)
    hops = {op.name: (task, op) for task, op in ops_of(spec, "moe_dispatch") if op.phase == "fwd"}
    rdma_task, rdma = hops["moe_dispatch_rdma"]
    nvl_task, nvl = hops["moe_dispatch_nvlink"]
    assert (rdma.axis, len(rdma_task.group)) == ("ep_inter", 2)  # same rail, other node
    assert (nvl.axis, len(nvl_task.group)) == ("ep_intra", 8)
    # Each token crosses the network once per remote node, not once per remote expert.
    tokens, h, k = spec.model.seq_length, spec.model.hidden_size, spec.model.moe_top_k
    nodes, _ = destinations(spec.model, ep=16, nodes=2)
    assert rdma.comm_bytes / 2 == pytest.approx(tokens * nodes / 2 * h * 2)
    assert rdma.comm_bytes / 2 < tokens * k / 2 * h * 2
    # FP8 training dispatches FP8 (1 byte and a scale per 128 values), combines in BF16.
    fp8 = make_experiment(*DEEPEP, "parallel.global_batch_size=16", "training.dtype=fp8",
                          model=FINE)  # fmt: skip
    fp8_ops = {op.name: op for _, op in ops_of(fp8, "moe_") if op.phase == "fwd"}
    assert fp8_ops["moe_dispatch_rdma"].comm_bytes == pytest.approx(
        rdma.comm_bytes * (1 + 4 / 128) / 2
    )
    assert fp8_ops["moe_combine_rdma"].comm_bytes == pytest.approx(rdma.comm_bytes)


def test_deepep_beats_the_plain_all_to_all_across_nodes():
    common = ("parallel.ep=16", "cluster.num_gpus=16", "parallel.global_batch_size=16")
    plain = simulate(make_experiment(*common, model=FINE)).summary()
    deep = simulate(make_experiment(*common, "parallel.moe_dispatcher=deepep", model=FINE))
    assert deep.summary()["breakdown_s"]["ep_comm"] < plain["breakdown_s"]["ep_comm"]


def test_expert_gradients_reduce_over_the_expert_data_parallel_group():
    spec = make_experiment("parallel.ep=4", "parallel.zero_stage=1", model=MOE)  # dp 16, edp 4
    program = build_program(spec)
    expert = [t for t in program.tasks if t.label.startswith("edp:")]
    dense = [t for t in program.tasks if t.label.startswith("dp:")]
    assert expert and dense
    assert {len(t.group) for t in expert} == {4}
    assert {len(t.group) for t in dense} == {16}


def test_small_expert_grouped_gemms_run_below_dense_efficiency():
    # The per-shape GEMM model prices a grouped GEMM (batch = local experts) by its own
    # tiles: few tokens per expert mean partial tiles and weights streamed for little work.
    model = RooflineComputeModel(get_accelerator("H100-SXM"), "bf16")

    def efficiency(m, n, k, batch):
        op = gemm("g", "fwd", m, n, k, 2, 0, batch)
        return op.flops / model.op_time_s(op) / model.accelerator.peak_flops["bf16"]

    dense = efficiency(8192, 4096, 4096, 1)
    assert efficiency(128, 2 * 1408, 2048, 8) < 0.6 * dense
    # 128 tokens per expert: the kernel streams the experts' weights, bandwidth-bound
    small = gemm("g", "fwd", 128, 2 * 1408, 2048, 2, 0, 8)
    streamed_s = small.bytes_accessed / model.memory_bytes_per_s
    kernel_s = model.calibration.kernel_overhead_s
    assert model.op_time_s(small) == pytest.approx(streamed_s + kernel_s, rel=1e-9)
    assert efficiency(8192, 2 * 1408, 2048, 8) > 0.9 * dense


def test_moe_compute_model_from_the_spec():
    spec = make_experiment("parallel.ep=2", model=MOE)
    assert compute_model_for(spec).op_time_s(next(op for _, op in ops_of(spec, "expert_fc1")))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["parallel.etp=3"], "parallel.etp=3 must divide model.moe_ffn_hidden_size"),
        (["parallel.ep=2", "parallel.tp=2"], "parallel.sp must be true for an MoE model"),
        (["parallel.moe_dispatcher=nccl"], "parallel.moe_dispatcher"),
        (["model.moe_router_num_groups=3"], "model.moe_router_num_groups and"),
        (["parallel.etp=2", "model.num_experts=0"], "parallel.etp and parallel.edp need an MoE"),
    ],
)
def test_bad_moe_input_is_one_line_and_exit_2(capsys, tmp_path, overrides, message):
    exp = tmp_path / "moe.yaml"
    exp.write_text(
        f"extends: {QUICKSTART}\n"
        "model: {num_experts: 8, moe_top_k: 2, num_layers: 2}\n"
        "parallel: {tp: 1, sp: false}\n"
    )
    argv = ["run", str(exp)]
    for item in overrides:
        argv += ["--set", item]
    code = run_app(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error:")
    assert message in err
