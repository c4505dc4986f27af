"""ZeRO-3 / FSDP as the stacks run it: gather granularity, prefetch, re-gathers, scaling."""

import itertools

import pytest

from simtrain.api import simulate
from simtrain.catalog.frameworks import get_framework
from simtrain.parallel.builder import build_program
from simtrain.parallel.sharding import with_param_gathers
from simtrain.specs.loader import load_experiment
from simtrain.workload.counts import recompute_flops_per_sequence
from simtrain.workload.ops import Op
from tests.conftest import ROOT, make_experiment

QUICKSTART = ROOT / "experiments" / "quickstart.yaml"


def gathers(program):
    return [
        (op, task) for task in program.tasks for op in task.ops if op.name == "param_all_gather"
    ]


def zero3(*overrides):
    return make_experiment("parallel.zero_stage=3", "parallel.recompute=full", *overrides)


def test_per_tensor_stacks_issue_more_gathers_than_per_unit_stacks():
    fsdp = gathers(build_program(zero3("training.framework=pytorch-fsdp1")))
    ds = gathers(build_program(zero3("training.framework=deepspeed")))
    assert len(ds) > 3 * len(fsdp)
    # same bytes per pass, in smaller pieces
    assert max(op.comm_bytes for op, _ in ds) < max(op.comm_bytes for op, _ in fsdp)


def test_deepspeed_gathers_again_for_recomputation_and_fsdp_does_not():
    def per_layer_passes(framework):
        found = gathers(build_program(zero3(f"training.framework={framework}")))
        return sum(1 for op, task in found if op.layer == 0 and task.microbatch == 0)

    layer0_tensors = 4  # qkv, proj, fc1, fc2 of the tiny GPT
    assert per_layer_passes("pytorch-fsdp1") == 2  # forward, backward (recompute shares it)
    assert per_layer_passes("deepspeed") == 3 * layer0_tensors  # forward, recompute, backward


def _ops(layers):
    return [Op(f"l{layer}", "gemm", layer=layer, flops=1.0) for layer in layers for _ in range(3)]


def test_prefetch_is_limited_by_units_and_bytes():
    tensors = {layer: [1000] for layer in range(4)}
    fsdp = get_framework("pytorch-fsdp1").sharding
    out = with_param_gathers(_ops(range(4)), tensors, "dp_shard", fsdp)
    windows = [op.overlap_ops for op in out if op.is_comm]
    assert windows == [0, 3, 3, 3]  # first exposed, then one unit ahead over 3 ops
    none = fsdp.model_copy(update={"prefetch_bytes": 100.0})  # a gather is 2,000 bytes
    out = with_param_gathers(_ops(range(4)), tensors, "x", none)
    assert [op.overlap_ops for op in out if op.is_comm] == [
        0,
        0,
        0,
        0,
    ]  # nothing fits the prefetch budget: all exposed
    deep = fsdp.model_copy(update={"prefetch_units": 2})
    out = with_param_gathers(_ops(range(4)), tensors, "x", deep)
    windows = [op.overlap_ops for op in out if op.is_comm]
    assert windows == [0, 3, 6, 6]  # two units ahead


def test_fsdp_reduces_every_microbatch_megatron_once():
    def reductions(framework):
        program = build_program(
            make_experiment(
                "parallel.zero_stage=2",
                "parallel.global_batch_size=64",
                f"training.framework={framework}",
            )
        )
        return sum(op.name == "grad_reduce_scatter" for t in program.tasks for op in t.ops)

    assert reductions("pytorch-fsdp1") == 4 * reductions("megatron-core")  # 4 microbatches


@pytest.mark.parametrize("framework", ["pytorch-fsdp1", "deepspeed"])
def test_zero3_throughput_per_gpu_falls_as_dp_grows_at_fixed_batch(framework):
    """ZeRO-3, one sequence per GPU per microbatch, global batch 4,096, fat-tree cluster.

    Per-GPU throughput falls under every stack; DeepSpeed's per-tensor gathers, each paying
    the latency of a 4,096-rank collective and too large for its prefetch bucket, fall
    several times over, FSDP's per-layer gathers stay mostly hidden.
    """
    per_gpu = []
    for dp in (64, 256, 1024, 4096):
        spec = load_experiment(
            QUICKSTART,
            [
                f"training.framework={framework}",
                "parallel.tp=1",
                "parallel.sp=false",
                "parallel.zero_stage=3",
                "parallel.recompute=full",
                "parallel.micro_batch_size=1",
                "parallel.global_batch_size=4096",
                f"cluster.num_gpus={dp}",
            ],
        )
        per_gpu.append(simulate(spec).summary()["tokens_per_s"] / dp)
    assert all(b < a for a, b in itertools.pairwise(per_gpu)), per_gpu
    if framework == "deepspeed":
        assert per_gpu[-1] < 0.5 * per_gpu[0], per_gpu


def test_minimal_recompute_reruns_everything_but_the_weight_gemms():
    spec = make_experiment("parallel.recompute=minimal", "training.attention_kernel=flash")
    program = build_program(spec)
    recomputed = {op.kind for task in program.tasks for op in task.ops if op.phase == "recompute"}
    assert "gemm" not in recomputed
    assert {"attention", "norm", "elementwise"} <= recomputed
    model = spec.model
    assert recompute_flops_per_sequence(model, "minimal") == recompute_flops_per_sequence(
        model, "selective"
    )
