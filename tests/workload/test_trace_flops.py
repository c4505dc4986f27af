"""The ops of a built step add up to the closed-form FLOPs of the model."""

import pytest

from simtrain.metrics.flops import step_flops
from simtrain.parallel.builder import build_program
from tests.conftest import GPT_TINY, LLAMA_TINY, make_experiment


def matmul_flops(program, phases=("fwd", "bwd_input", "bwd_weight")) -> float:
    """FLOPs of matmul ops of every simulated rank, in the given phases."""
    return sum(
        op.flops * program.weights[task.rank]
        for task in program.tasks
        for op in task.ops
        if op.is_matmul and op.phase in phases
    )


@pytest.mark.parametrize("model", [GPT_TINY, LLAMA_TINY], ids=["gpt", "gqa-swiglu"])
@pytest.mark.parametrize(
    "overrides",
    [
        (),
        ("parallel.tp=2",),
        ("parallel.tp=2", "parallel.sp=true"),
        ("parallel.pp=2", "parallel.tp=2"),
        ("parallel.pp=2", "parallel.pipeline_schedule=zb-h1"),
        ("training.attention_kernel=unfused",),
        ("parallel.cp=2",),
        ("parallel.cp=2", "parallel.cp_algorithm=all_gather"),
        ("parallel.cp=2", "parallel.cp_algorithm=ulysses", "parallel.tp=2"),
        ("parallel.zero_stage=3",),
    ],
)
def test_op_flops_equal_closed_form_model_flops(model, overrides):
    spec = make_experiment(*overrides, model=model)
    program = build_program(spec)
    expected = step_flops(spec).model
    assert matmul_flops(program) == pytest.approx(expected, rel=1e-3)


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_recomputed_op_flops_equal_hardware_minus_model(recompute):
    spec = make_experiment(f"parallel.recompute={recompute}", "parallel.tp=2")
    program = build_program(spec)
    flops = step_flops(spec)
    assert matmul_flops(program, ("recompute",)) == pytest.approx(
        flops.hardware - flops.model, rel=1e-3
    )


def test_full_mode_covers_every_rank_with_the_same_flops():
    spec = make_experiment("parallel.tp=2", "parallel.pp=2")
    reduced, full = build_program(spec, full=False), build_program(spec, full=True)
    assert len(full.simulated_ranks) == 16 and len(reduced.simulated_ranks) == 2
    assert matmul_flops(full) == pytest.approx(matmul_flops(reduced), rel=1e-12)


def test_moe_active_flops_follow_top_k():
    moe = {**LLAMA_TINY, "num_experts": 4, "moe_top_k": 2}
    spec = make_experiment("parallel.ep=2", model=moe)
    program = build_program(spec)
    # Capacity factor 1: routed tokens = tokens * top_k, so the expert FLOPs equal the
    # closed form that counts top-k experts per token.
    assert matmul_flops(program) == pytest.approx(step_flops(spec).model, rel=2e-2)
    assert any(op.comm == "all_to_all" for t in program.tasks for op in t.ops)


def test_zero3_gathers_each_layer_before_forward_and_backward():
    spec = make_experiment("parallel.zero_stage=3", "parallel.global_batch_size=16")
    program = build_program(spec)
    gathers = [op for t in program.tasks for op in t.ops if op.name == "param_all_gather"]
    # one microbatch per rank; embedding (-1), 2 layers and the head, in F and in B
    layers = {-1, 0, 1, spec.model.num_layers}
    assert sorted({op.layer for op in gathers}) == sorted(layers)
    assert len(gathers) == 2 * len(layers)


@pytest.mark.parametrize(
    ("algorithm", "comm"),
    [
        ("ring", "send_recv"),
        ("all_gather", "all_gather"),
        ("ulysses", "all_to_all"),
    ],
)
def test_context_parallel_collectives(algorithm, comm):
    spec = make_experiment("parallel.cp=4", f"parallel.cp_algorithm={algorithm}")
    program = build_program(spec)
    cp_ops = [op for t in program.tasks for op in t.ops if op.axis == "cp"]
    assert cp_ops and {op.comm for op in cp_ops} <= {comm, "reduce_scatter"}
    if algorithm == "ring":  # cp - 1 transfers per layer, forward and backward
        per_microbatch = 2 * (4 - 1) * spec.model.num_layers
        assert len(cp_ops) == per_microbatch * spec.parallel.num_microbatches


def test_hybrid_shard_reduces_inside_groups_then_across():
    spec = make_experiment("parallel.zero_stage=2", "parallel.zero_shard_group_size=8")
    program = build_program(spec)
    comms = {op.name: t.group for t in program.tasks for op in t.ops if op.axis == "dp"}
    assert len(comms["grad_reduce_scatter"]) == 8  # inside a node's shard group
    assert len(comms["grad_all_reduce_across_shards"]) == 2  # one rank per shard group
    assert len(comms["param_all_gather"]) == 8
