"""FP8/MXFP8 in the op program and in memory, optimizers' states and steps, gradient dtype."""

import itertools

import pytest

from simtrain.memory.estimate import estimate_memory
from simtrain.memory.model_states import rank_model_states, rank_params
from simtrain.parallel.builder import build_program
from simtrain.workload.linear import CAST_BYTES_PER_ELEMENT
from simtrain.workload.optimizers import OPTIMIZERS
from tests.conftest import LLAMA_TINY, ROOT, make_experiment

MOE = {**LLAMA_TINY, "num_experts": 4, "moe_top_k": 2}


def ops_of(spec):
    return [op for t in build_program(spec).tasks for op in t.ops]


def test_fp8_runs_linear_layers_in_fp8_and_keeps_attention_and_head_in_bf16():
    ops = ops_of(make_experiment("training.dtype=fp8", "parallel.ep=2", model=MOE))
    gemms = [op for op in ops if op.kind == "gemm"]
    high = {"lm_head", "router"}
    for op in gemms:
        base = op.name.removesuffix("_dgrad").removesuffix("_wgrad")
        assert op.dtype == ("bf16" if base in high else "fp8"), op.name
    assert {op.dtype for op in ops if op.kind == "attention"} == {"bf16"}
    # every forward and input-gradient GEMM of a linear layer has its cast just before it
    for before, op in itertools.pairwise(ops):
        if op.kind == "gemm" and op.dtype == "fp8" and op.phase in ("fwd", "bwd_input"):
            assert before.name.endswith("cast"), op.name


def test_bf16_ops_keep_the_training_dtype():
    ops = ops_of(make_experiment(model=LLAMA_TINY))
    assert {op.dtype for op in ops} == {""}
    assert not any("cast" in op.name for op in ops)


@pytest.mark.parametrize("recipe", ["delayed", "current", "blockwise"])
def test_fp8_casts_cost_their_recipe_bytes(recipe):
    spec = make_experiment("training.dtype=fp8", f"training.fp8_recipe={recipe}", model=LLAMA_TINY)
    ops = ops_of(spec)
    qkv_cast = next(op for op in ops if op.name == "qkv_cast")
    tokens, h = spec.model.seq_length, spec.model.hidden_size
    assert qkv_cast.bytes_accessed == pytest.approx(tokens * h * CAST_BYTES_PER_ELEMENT[recipe])
    # the weights are cast once per step, after the optimizer, not once per microbatch
    weight_casts = [op for op in ops if op.name == "fp8_weight_cast"]
    assert len(weight_casts) == len(build_program(spec).simulated_ranks)
    assert all(op.phase == "optimizer" for op in weight_casts)


def test_fp8_gemms_read_one_byte_operands():
    bf16 = next(op for op in ops_of(make_experiment(model=LLAMA_TINY)) if op.name == "mlp_fc1")
    fp8 = next(
        op
        for op in ops_of(make_experiment("training.dtype=fp8", model=LLAMA_TINY))
        if op.name == "mlp_fc1"
    )
    m, n, k = bf16.m, bf16.n, bf16.k
    assert bf16.bytes_accessed - fp8.bytes_accessed == m * k + k * n
    assert fp8.flops == bf16.flops


def test_fp8_memory_keeps_weight_copies_and_smaller_activations():
    bf16 = make_experiment(model=LLAMA_TINY)
    fp8 = make_experiment("training.dtype=fp8", model=LLAMA_TINY)
    mem_bf16, mem_fp8 = estimate_memory(bf16, 80e9), estimate_memory(fp8, 80e9)
    copies = mem_fp8.breakdown_bytes["weights.fp8_copies"]
    assert copies == pytest.approx(2 * rank_params(fp8, 0).linear_weights)
    assert "weights.fp8_copies" not in mem_bf16.breakdown_bytes
    assert mem_fp8.weights_bytes == pytest.approx(mem_bf16.weights_bytes + copies)
    assert mem_fp8.activations_bytes < mem_bf16.activations_bytes
    # master weights stay in the optimizer states
    assert mem_fp8.optimizer_bytes == mem_bf16.optimizer_bytes


def test_mxfp8_runs_on_b200_and_is_refused_on_h100(capsys):
    from simtrain.api import simulate
    from simtrain.cli.app import run_app

    b200 = make_experiment("training.dtype=mxfp8", "cluster.accelerator=B200", model=LLAMA_TINY)
    ops = ops_of(b200)
    assert {op.dtype for op in ops if op.name == "qkv"} == {"mxfp8"}
    assert next(op for op in ops if op.name == "qkv_cast").bytes_accessed == pytest.approx(
        128 * 256 * (4 + 2 / 32)
    )
    assert simulate(b200).mfu > 0
    code = run_app(
        ["run", str(ROOT / "experiments" / "quickstart.yaml"), "--set", "training.dtype=mxfp8"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "mxfp8" in err and "H100" in err


def test_adafactor_states_are_a_third_of_adams():
    adam = rank_model_states(make_experiment(model=LLAMA_TINY), 0)
    adafactor = rank_model_states(
        make_experiment("training.optimizer=adafactor", model=LLAMA_TINY), 0
    )
    assert adam.optimizer == pytest.approx(3 * adafactor.optimizer)
    assert adafactor.weights == adam.weights and adafactor.gradients == adam.gradients


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_optimizer_states_and_step_follow_the_table(optimizer):
    spec = make_experiment(f"training.optimizer={optimizer}", model=LLAMA_TINY)
    params = rank_params(spec, 0).dense
    cost = OPTIMIZERS[optimizer]
    assert rank_model_states(spec, 0).optimizer == pytest.approx(params * cost.state_bytes)
    step = next(op for op in ops_of(spec) if op.name == "optimizer_step")
    assert step.bytes_accessed / step.flops == pytest.approx(cost.step_bytes / cost.step_flops)


def test_state_bytes_order():
    states = {name: cost.state_bytes for name, cost in OPTIMIZERS.items()}
    assert states["adam"] == states["adamw"] == 12
    assert states["adafactor"] < states["adam8bit"] < states["lion"] == states["sgd"] < 12


@pytest.mark.parametrize(("dtype", "size"), [("fp32", 4), ("bf16", 2), ("fp16", 2)])
def test_gradient_reduction_dtype_sets_the_bytes(dtype, size):
    spec = make_experiment(f"training.grad_reduce_dtype={dtype}", model=LLAMA_TINY)
    reduced = sum(op.comm_bytes for op in ops_of(spec) if op.name == "grad_all_reduce")
    fp32 = make_experiment(model=LLAMA_TINY)
    full = sum(op.comm_bytes for op in ops_of(fp32) if op.name == "grad_all_reduce")
    assert reduced == pytest.approx(full * size / 4)


@pytest.mark.parametrize("recipe", ["delayed", "current", "blockwise"])
def test_fp8_backward_gemms_accumulate_split_under_per_tensor_recipes(recipe):
    """TransformerEngine: _2X_ACC_FPROP False, _2X_ACC_DGRAD and _2X_ACC_WGRAD True."""
    ops = ops_of(make_experiment("training.dtype=fp8", f"training.fp8_recipe={recipe}"))
    fp8 = [op for op in ops if op.kind == "gemm" and op.dtype == "fp8"]
    split = recipe in ("delayed", "current")
    assert fp8
    for op in fp8:
        assert op.split_accumulator == (split and op.phase != "fwd"), (op.name, op.phase)
    # 16-bit GEMMs (LM head) and BF16 training never carry it
    assert not any(op.split_accumulator for op in ops if op.dtype == "bf16")
    assert not any(op.split_accumulator for op in ops_of(make_experiment(model=LLAMA_TINY)))
