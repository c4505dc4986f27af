"""Selective recomputation by module (``parallel.recompute_modules``): closed forms of each
module's bytes, monotonicity in memory and recompute time, and the bad inputs."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from simtrain.api import simulate
from simtrain.estimator import Estimator
from simtrain.memory import estimate_stage_memory, layer_activation_bytes, memory_timeline
from simtrain.memory.activations import layer_activation_parts, peak_inflight
from simtrain.metrics.flops import step_flops
from simtrain.parallel.builder import chunk_ops, make_shard
from simtrain.parallel.schedules import build_schedule
from simtrain.specs.parallel import RECOMPUTE_MODULES
from simtrain.workload.counts import model_flops_per_sequence
from tests.conftest import ROOT, make_experiment

MLA_MOE_TINY = {
    "name": "mla-moe-tiny",
    "num_layers": 4,
    "hidden_size": 256,
    "num_heads": 8,
    "mla": {"q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 16, "v_head_dim": 32},
    "ffn_hidden_size": 512,
    "vocab_size": 1024,
    "seq_length": 128,
    "activation": "swiglu",
    "norm": "rmsnorm",
    "use_bias": False,
    "position_embedding": "rope",
    "dropout": False,
    "num_experts": 8,
    "moe_top_k": 2,
    "moe_ffn_hidden_size": 128,
    "num_shared_experts": 1,
    "first_dense_layers": 1,
}  # fmt: skip
S, H, HEADS, F, FE, K = 128, 256, 8, 512, 128, 2
D_QK, D_V, LORA = 32 + 16, 32, 64 + 32
MODULES = frozenset(RECOMPUTE_MODULES)


SELECTIVE = "parallel.recompute=selective"
DEEPSEEK = "parallel.recompute_modules=[layernorm,mla_up_proj,moe_act]"


def spec(*overrides: str):
    return make_experiment(*overrides, model=MLA_MOE_TINY)


def modules_flag(modules: list[str]) -> str:
    return f"parallel.recompute_modules=[{','.join(modules)}]"


MODEL = spec().model


def parts(modules, moe: bool, fp8: bool = False, tp: int = 1, flash: bool = False, **kw):
    return layer_activation_parts(
        MODEL, 1, tp, tp > 1, "selective", 1, moe, flash, fp8, frozenset(modules), **kw
    )


def closed_form(module: str, moe: bool, fp8: bool, tp: int) -> float:
    """Bytes a module's recomputation frees in one layer, b = 1 (written out by hand)."""
    g = 1 if fp8 else 2  # a stored linear-layer input
    forms = {
        "core_attn": 2 * HEADS * S * S / tp,  # unfused softmax output, no dropout
        "layernorm": 2 * g * S * H / tp,  # the two norm outputs (SP splits them)
        "mla_up_proj": S * (g * LORA + 2 * HEADS * (2 * D_QK + D_V) / tp),
        "mlp": 0 if moe else S * F * (2 * 2 + g) / tp,  # SwiGLU: gate, up; fc2's input
        "moe_act": S * FE * K * g / tp if moe else 0,
        "shared_experts": S * FE * (2 * 2 + g) / tp if moe else 0,
        "moe": S * (g * H * K + FE * (K + 1) * (2 * 2 + g)) / tp if moe else 0,
    }
    return forms[module]


@pytest.mark.parametrize(("fp8", "tp"), [(False, 1), (True, 1), (False, 2), (True, 4)])
@pytest.mark.parametrize("moe", [False, True])
@pytest.mark.parametrize("module", RECOMPUTE_MODULES)
def test_each_module_frees_exactly_its_closed_form(module, moe, fp8, tp):
    for others in (frozenset(), MODULES - {module, "moe"} if module != "moe" else frozenset()):
        kept = sum(parts(others, moe, fp8, tp).values())
        dropped = sum(parts(others | {module}, moe, fp8, tp).values())
        assert kept - dropped == pytest.approx(closed_form(module, moe, fp8, tp), rel=1e-12)


def test_default_modules_are_korthikantis_selective_and_empty_is_none():
    for moe, flash, fp8 in itertools.product([False, True], repeat=3):
        legacy = layer_activation_bytes(MODEL, 1, recompute="selective", moe_layer=moe,
                                        flash_attention=flash, fp8=fp8)  # fmt: skip
        explicit = sum(parts({"core_attn"}, moe, fp8, flash=flash).values())
        assert explicit == legacy
        nothing = layer_activation_bytes(MODEL, 1, moe_layer=moe, flash_attention=flash, fp8=fp8)
        assert sum(parts(set(), moe, fp8, flash=flash).values()) == nothing


def test_dispatched_tokens_and_fp8_swiglu_inputs_count_one_byte():
    bf16, fp8 = parts(set(), True), parts(set(), True, fp8=True)
    assert bf16["expert_inputs"] == 2 * S * H * K
    assert fp8["expert_inputs"] == 1 * S * H * K  # the FP8 tokens the dispatch delivered
    stored = parts(set(), True, fp8=True, fp8_act_input=True)
    assert stored["expert_act_inputs"] == S * FE * K * 2 * 1  # gate and up, one byte each
    assert fp8["expert_act_inputs"] == 2 * stored["expert_act_inputs"]


def recompute_seconds(modules: list[str]) -> float:
    flag = f"parallel.recompute_modules=[{','.join(modules)}]"
    result = simulate(
        spec("parallel.recompute=selective", flag, "training.attention_kernel=unfused")
    )
    return result.summary()["breakdown_s"].get("recompute", 0.0)


def test_more_modules_mean_fewer_bytes_more_recompute_time_and_flops():
    chain = ["layernorm", "moe_act", "mla_up_proj", "core_attn", "shared_experts", "mlp", "moe"]
    bytes_, seconds, flops = [], [], []
    for n in range(len(chain) + 1):
        chosen = chain[:n]
        s = spec(SELECTIVE, modules_flag(chosen), "training.attention_kernel=unfused")
        bytes_.append(estimate_stage_memory(s, 80e9, 0).activations_bytes)
        seconds.append(recompute_seconds(chosen))
        flops.append(step_flops(s).hardware)
    assert all(a > b for a, b in itertools.pairwise(bytes_))
    assert seconds[0] == 0 and all(a < b for a, b in itertools.pairwise(seconds))
    assert all(a <= b for a, b in itertools.pairwise(flops))
    # nothing recomputed: hardware = model FLOPs
    assert flops[0] == spec().parallel.global_batch_size * model_flops_per_sequence(MODEL)


def test_recompute_flops_are_the_programs_recomputed_matmuls():
    """Hardware minus model FLOPs equals the recompute-phase matmul FLOPs of the program."""
    for modules in (["mla_up_proj"], ["core_attn", "mlp", "moe"], ["shared_experts"]):
        one = ("cluster.num_gpus=1", "parallel.global_batch_size=1")
        s = spec(SELECTIVE, modules_flag(modules), *one)
        ops = chunk_ops(s, make_shard(s), range(MODEL.num_layers), True, True)
        program = sum(o.flops for o in ops.backward_input if o.phase == "recompute" and o.is_matmul)
        flops = step_flops(s)
        assert program == pytest.approx(flops.hardware - flops.model, rel=1e-9)


def test_the_deepseek_modules_recompute_their_ops():
    s = spec(SELECTIVE, DEEPSEEK, "cluster.num_gpus=1", "parallel.global_batch_size=1",
             "training.dtype=fp8")  # fmt: skip
    ops = chunk_ops(s, make_shard(s), range(MODEL.num_layers), True, True)
    names = {o.name for o in ops.backward_input if o.phase == "recompute"}
    assert {"norm1", "norm2", "mla_down_cast", "mla_latent_norm", "mla_q_up", "mla_kv_up",
            "rope", "expert_activation", "expert_fc2_cast"} <= names  # fmt: skip
    assert not names & {"flash_attention", "expert_fc1", "shared_fc1", "router", "mla_down"}


def test_dualpipe_holds_pp_plus_one_stage_microbatches_on_every_rank():
    """DeepSeek-V3 Table 2: DualPipe's activation memory is PP + 1 (stage-microbatch units)
    on every device, against 1F1B's PP on its first."""
    for pp, m in [(4, 8), (8, 16), (16, 32), (16, 64)]:
        assert {peak_inflight(a) for a in build_schedule("dualpipe", pp, m).values()} == {pp + 1}
        assert peak_inflight(build_schedule("1f1b", pp, m)[0]) == pp


def test_des_memory_peak_and_estimator_step_follow_the_modules():
    fp8_store = "training.activation_fp8_input_store=true"
    s = spec(SELECTIVE, DEEPSEEK, "parallel.pp=2", "parallel.ep=2", "cluster.num_gpus=4",
             "parallel.global_batch_size=8", fp8_store)  # fmt: skip
    result = simulate(s)
    for stage in range(2):  # pp is the outermost axis: stage r starts at global rank 2r
        estimate = estimate_stage_memory(s, 80e9, stage)
        timeline = memory_timeline(
            result.program, result.start_s, result.end_s, 2 * stage, estimate
        )
        assert max(b for _, b in timeline) == pytest.approx(estimate.peak_bytes)
    guess = Estimator().estimate(s).step_time_s
    assert guess == pytest.approx(result.step_time_s, rel=0.05)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["parallel.recompute=full", "parallel.recompute_modules=[layernorm]"],
         "parallel.recompute_modules=['layernorm'] needs parallel.recompute=selective "
         "(got 'full')"),
        ([SELECTIVE, "parallel.recompute_modules=[layernorm,attn]"],
         "'parallel.recompute_modules.1' must be 'core_attn', 'moe_act', 'layernorm', "
         "'mla_up_proj', 'mlp', 'moe' or 'shared_experts' (got 'attn')"),
        ([SELECTIVE, "parallel.recompute_modules=[mla_up_proj]"],
         "parallel.recompute_modules: 'mla_up_proj' needs multi-head latent attention (model.mla)"),
        ([SELECTIVE, "parallel.recompute_modules=[moe_act]"],
         "parallel.recompute_modules: 'moe_act' needs an MoE model (model.num_experts > 0)"),
        (["training.activation_fp8_input_store=true", "model.activation=gelu"],
         "training.activation_fp8_input_store=true needs model.activation=swiglu (got 'gelu')"),
    ],
)  # fmt: skip
def test_bad_recompute_modules_get_one_clear_line(overrides, message):
    args = [sys.executable, "-m", "simtrain", "run", "experiments/quickstart.yaml"]
    for o in overrides:
        args += ["--set", o]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
