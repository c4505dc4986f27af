"""Model features change the op program as the architecture does: FLOPs, bytes, collectives."""

import pytest

from simtrain.metrics.flops import step_flops
from simtrain.parallel.builder import build_program
from simtrain.workload.attention import alibi_bias_bytes
from simtrain.workload.branches import Tokens
from simtrain.workload.shard import Shard
from simtrain.workload.transformer import layer_ops
from tests.conftest import GPT_TINY, LLAMA_TINY, make_experiment
from tests.workload.test_trace_flops import matmul_flops

MLA = {"q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32}
MLA |= {"qk_rope_head_dim": 16, "v_head_dim": 24}

FEATURES = {
    "parallel-1-norm": {**GPT_TINY, "block": "parallel"},
    "parallel-2-norms": {**GPT_TINY, "block": "parallel", "parallel_block_norms": 2},
    "alibi": {**GPT_TINY, "position_embedding": "alibi"},
    "no-positions": {**GPT_TINY, "position_embedding": "none"},
    "partial-rotary": {**GPT_TINY, "position_embedding": "rope", "rotary_fraction": 0.25},
    "relu": {**GPT_TINY, "activation": "relu"},
    "squared-relu": {**GPT_TINY, "activation": "squared_relu"},
    "geglu": {**LLAMA_TINY, "activation": "geglu"},
    "mqa": {**LLAMA_TINY, "num_kv_heads": 1},
    "sliding-window": {**LLAMA_TINY, "sliding_window": 48},
    "embedding-norm": {**GPT_TINY, "embedding_norm": True},
    "per-kind-biases": {**GPT_TINY, "qkv_bias": False, "mlp_bias": False, "norm_bias": False},
    "mla": {**LLAMA_TINY, "num_kv_heads": None, "mla": MLA},
    "mla-moe": {**LLAMA_TINY, "num_kv_heads": None, "mla": MLA, "num_experts": 4},
    "parallel-moe": {**LLAMA_TINY, "block": "parallel", "num_experts": 4, "moe_top_k": 2},
}
LAYOUTS = [
    (),
    ("parallel.tp=2", "parallel.sp=true"),
    ("parallel.pp=2", "parallel.tp=2", "parallel.sp=true"),
    ("parallel.cp=2", "parallel.cp_algorithm=all_gather"),
    ("parallel.cp=2", "parallel.cp_algorithm=ulysses"),
    ("training.dtype=fp8",),
    ("training.dtype=mxfp8", "cluster.accelerator=B200"),
]


def model_flops_match(spec) -> None:
    assert matmul_flops(build_program(spec)) == pytest.approx(step_flops(spec).model, rel=1e-3)


# Under TP wider than the key/value heads every rank computes the one K/V head (replicated
# work beyond the model FLOPs), so MQA is checked without TP.
CASES = [
    (feature, layout)
    for feature in FEATURES
    for layout in LAYOUTS
    if not (feature == "mqa" and "parallel.tp=2" in layout)
]


@pytest.mark.parametrize(
    ("feature", "layout"), CASES, ids=[f"{f}-{'-'.join(o) or 'dp'}" for f, o in CASES]
)
def test_op_flops_equal_the_closed_form(feature, layout):
    model = FEATURES[feature]
    if model.get("num_experts"):
        layout = (*layout, "parallel.ep=2")
    model_flops_match(make_experiment(*layout, model=model))


@pytest.mark.parametrize(
    "layout",
    [("parallel.tp=2",), ("parallel.cp=2",), ("training.attention_kernel=unfused",)],
    ids=["tp", "ring-cp", "unfused"],
)
@pytest.mark.parametrize("feature", ["parallel-1-norm", "alibi", "relu", "partial-rotary"])
def test_op_flops_equal_the_closed_form_in_other_layouts(feature, layout):
    model_flops_match(make_experiment(*layout, model=FEATURES[feature]))


def tp_comms(spec, phase: str, comm: str) -> list:
    ops = [op for t in build_program(spec).tasks for op in t.ops]
    return [op for op in ops if op.axis == "tp" and op.phase == phase and op.comm == comm]


@pytest.mark.parametrize(("block", "per_layer"), [("serial", 2), ("parallel", 1)])
def test_parallel_block_reduces_once_per_layer_forward(block, per_layer):
    spec = make_experiment("parallel.tp=2", model={**GPT_TINY, "block": block})
    layers = spec.model.num_layers
    microbatches = spec.parallel.num_microbatches
    reduces = [op for op in tp_comms(spec, "fwd", "all_reduce") if 0 <= op.layer < layers]
    assert len(reduces) == per_layer * layers * microbatches
    grads = [op for op in tp_comms(spec, "bwd_input", "all_reduce") if 0 <= op.layer < layers]
    assert len(grads) == per_layer * layers * microbatches


def test_parallel_block_with_sequence_parallelism_gathers_and_scatters_once():
    model = {**GPT_TINY, "block": "parallel"}
    shard = Shard(1, tp=2, sp=True)
    ops = layer_ops(make_experiment(model=model).model, shard, 0)
    forward = [op.comm for op in ops.forward if op.is_comm]
    assert forward == ["all_gather", "reduce_scatter"]
    # the shared input gradient is reduced once, while both input-projection wgrads run
    entry = next(op for op in ops.backward if op.comm == "reduce_scatter")
    assert entry.overlap_ops == 2


def test_alibi_adds_its_bias_bytes_and_no_rotary_ops():
    plain = make_experiment(model={**GPT_TINY, "position_embedding": "none"})
    alibi = make_experiment(model={**GPT_TINY, "position_embedding": "alibi"})
    shard = Shard(1)
    base, biased = layer_ops(plain.model, shard, 0), layer_ops(alibi.model, shard, 0)
    assert not any(op.name.startswith("rope") for op in (*biased.forward, *biased.backward))
    core = {op.name: op for op in base.forward if op.kind == "attention"}["flash_attention"]
    core_alibi = {op.name: op for op in biased.forward if op.kind == "attention"}["flash_attention"]
    heads, s = GPT_TINY["num_heads"], GPT_TINY["seq_length"]
    bias = alibi_bias_bytes(heads, s)
    assert bias == heads * s * 2
    assert core_alibi.bytes_accessed == core.bytes_accessed + bias
    assert core_alibi.flops == core.flops
    # the unfused path materialises the broadcast bias into the score buffer and reads it back
    unfused = layer_ops(alibi.model, Shard(1, attention="unfused"), 0)
    added = [op for op in unfused.forward if op.name == "alibi_bias"]
    assert len(added) == 1 and added[0].bytes_accessed == 2 * heads * s * s * 2


def test_rotary_fraction_scales_the_rope_bytes():
    full = {**GPT_TINY, "position_embedding": "rope"}
    quarter = {**full, "rotary_fraction": 0.25}

    def rope_bytes(model):
        spec = make_experiment(model=model)
        return sum(
            op.bytes_accessed
            for op in layer_ops(spec.model, Shard(1), 0).forward
            if op.name == "rope"
        )

    assert rope_bytes(quarter) == pytest.approx(rope_bytes(full) / 4)
    assert rope_bytes({**GPT_TINY, "position_embedding": "learned"}) == 0


def test_sliding_window_counts_window_keys_and_tells_the_kernel():
    model = {**LLAMA_TINY, "sliding_window": 32}
    spec = make_experiment(model=model)
    (core,) = [op for op in layer_ops(spec.model, Shard(1), 0).forward if op.kind == "attention"]
    heads, d, s = model["num_heads"], model["hidden_size"] // model["num_heads"], 128
    assert core.window == 32 and core.n == s
    assert core.flops == 4 * heads * s * 32 * d


def test_mla_down_projection_is_duplicated_without_sequence_parallelism():
    model = {**LLAMA_TINY, "num_kv_heads": None, "mla": MLA}
    spec = make_experiment("parallel.tp=2", model=model)
    latent = MLA["q_lora_rank"] + MLA["kv_lora_rank"] + MLA["qk_rope_head_dim"]
    tokens = spec.model.seq_length * spec.parallel.global_batch_size
    duplicate = 2 * tokens * spec.model.hidden_size * latent * 3 * spec.model.num_layers
    extra = matmul_flops(build_program(spec)) - step_flops(spec).model
    assert extra == pytest.approx(duplicate, rel=1e-9)  # one more copy on the second TP rank


def test_mla_gathers_latents_not_hidden_states_under_sequence_parallelism():
    model = {**LLAMA_TINY, "num_kv_heads": None, "mla": MLA}
    spec = make_experiment("parallel.tp=2", "parallel.sp=true", model=model)
    ops = layer_ops(spec.model, Shard(1, tp=2, sp=True), 0)
    gathers = [op for op in ops.forward if op.comm == "all_gather"]
    latent = MLA["q_lora_rank"] + MLA["kv_lora_rank"] + MLA["qk_rope_head_dim"]
    tokens = Tokens.of(spec.model, Shard(1, tp=2, sp=True)).full
    assert [op.name for op in gathers] == ["mla_latent_all_gather", "mlp_all_gather"]
    assert gathers[0].comm_bytes == tokens * latent * 2
    scatters = [op.name for op in ops.backward if op.comm == "reduce_scatter"]
    assert "mla_latent_grad_reduce_scatter" in scatters
    assert "attn_grad_reduce_scatter" not in scatters  # no h-wide input gradient to reduce


def test_mla_attention_uses_its_head_dimensions():
    model = {**LLAMA_TINY, "num_kv_heads": None, "mla": MLA}
    spec = make_experiment(model=model)
    (core,) = [op for op in layer_ops(spec.model, Shard(1), 0).forward if op.kind == "attention"]
    d_qk, d_v = MLA["qk_nope_head_dim"] + MLA["qk_rope_head_dim"], MLA["v_head_dim"]
    s, heads = 128, LLAMA_TINY["num_heads"]
    assert core.flops == 2 * heads * s * s * (d_qk + d_v)


def test_embedding_norm_adds_norm_ops_on_the_first_stage():
    spec = make_experiment("parallel.pp=2", model={**GPT_TINY, "embedding_norm": True})
    names = [op.name for t in build_program(spec).tasks for op in t.ops]
    assert names.count("embedding_norm") == spec.parallel.num_microbatches
    assert names.count("embedding_norm_bwd") == spec.parallel.num_microbatches
