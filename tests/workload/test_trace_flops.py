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
