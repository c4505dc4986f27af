"""torchtitan's eager modules and FSDP2's copies, in bytes (closed forms per mechanism)."""

import pytest

from simtrain.parallel.builder import chunk_ops, eager_modules, make_shard
from simtrain.workload import eager
from simtrain.workload.shard import Shard
from simtrain.workload.transformer import head_ops, layer_ops
from tests.conftest import LLAMA_TINY, make_experiment

H, Q_HEADS, KV_HEADS, HEAD_DIM, FFN = 256, 8, 2, 32, 688
TOKENS = 2 * 128  # micro-batch 2 x sequence 128


def llama(*overrides):
    return make_experiment(
        "parallel.micro_batch_size=2", "parallel.global_batch_size=32", *overrides, model=LLAMA_TINY
    )


def named(ops):
    found = {}
    for op in ops:
        found.setdefault(op.name, op.bytes_accessed)
    return found


@pytest.fixture(scope="module")
def fused_and_eager():
    spec = llama()
    shard = make_shard(spec)
    fused = layer_ops(spec.model, shard, 0)
    eager_ops = layer_ops(spec.model, Shard(2, eager="all"), 0)
    return fused, eager_ops


def test_eager_rmsnorm_is_36_bytes_forward_and_92_backward_per_element(fused_and_eager):
    fused, eager_ops = fused_and_eager
    f, e = named(fused.forward + fused.backward), named(eager_ops.forward + eager_ops.backward)
    assert f["norm1"] == 4 * TOKENS * H and f["norm1_bwd"] == 8 * TOKENS * H
    assert e["norm1"] == 36 * TOKENS * H and e["norm2_bwd"] == 92 * TOKENS * H


def test_eager_rope_repeat_kv_and_gradient_sums(fused_and_eager):
    fused, eager_ops = fused_and_eager
    f, e = named(fused.forward + fused.backward), named(eager_ops.forward + eager_ops.backward)
    rotated = TOKENS * (Q_HEADS + KV_HEADS) * HEAD_DIM
    assert f["rope"] == 4 * rotated and e["rope"] == e["rope_bwd"] == 20 * rotated
    # keys and values: read at the kv width, written at the query width (and back)
    expand = 2 * TOKENS * 2 * (Q_HEADS + KV_HEADS) * HEAD_DIM
    assert e["repeat_kv"] == e["repeat_kv_bwd"] == expand
    assert "repeat_kv" not in f
    # wq, wk, wv share an input: two 16-bit adds of its gradient; w1 and w3: one
    assert e["qkv_grad_sum"] == 2 * 6 * TOKENS * H and e["mlp_fc1_grad_sum"] == 6 * TOKENS * H
    # repeat_kv belongs to the attention core that selective recomputation re-runs
    assert "repeat_kv" in {op.name for op in eager_ops.attention_core}


def test_eager_swiglu_is_10_bytes_forward_and_18_backward(fused_and_eager):
    fused, eager_ops = fused_and_eager
    f, e = named(fused.forward + fused.backward), named(eager_ops.forward + eager_ops.backward)
    assert f["activation"] == 6 * TOKENS * FFN and f["activation_bwd"] == 12 * TOKENS * FFN
    assert e["activation"] == 10 * TOKENS * FFN and e["activation_bwd"] == 18 * TOKENS * FFN


def test_no_key_value_copy_without_grouped_queries():
    assert eager.kv_expand_bytes(TOKENS, 256, 256) == 0
    mha = {**LLAMA_TINY, "num_kv_heads": 8}
    spec = make_experiment(model=mha)
    names = {op.name for op in layer_ops(spec.model, Shard(1, eager="all"), 0).forward}
    assert "rope" in names and "repeat_kv" not in names


@pytest.mark.parametrize(
    ("mode", "norm", "loss", "loss_bwd"),
    [("none", 4, 12, 12), ("head", 36, 14, 22), ("norm", 36, 4, 4)],
)
def test_final_norm_and_loss_bytes(mode, norm, loss, loss_bwd):
    """Fused loss on fp32 logits, eager loss on upcast logits, compiled loss on 16-bit ones."""
    spec = llama()
    ops = named(head_ops(spec.model, Shard(2, eager=mode)))
    logits = TOKENS * spec.model.vocab_size
    assert ops["final_norm"] == norm * TOKENS * H
    assert ops["cross_entropy"] == loss * logits
    assert ops["cross_entropy_bwd"] == loss_bwd * logits


def test_head_mode_keeps_the_blocks_fused():
    spec = llama()
    assert named(layer_ops(spec.model, Shard(2, eager="head"), 0).forward)["norm1"] == (
        4 * TOKENS * H
    )


@pytest.mark.parametrize(
    ("framework", "mode", "expected"),
    [
        ("torchtitan", "eager", "all"),
        ("torchtitan", "compiled", "head"),
        ("torchtitan-2025", "eager", "all"),
        ("torchtitan-2025", "compiled", "norm"),
        ("megatron-core", "eager", "none"),
        ("megatron-core", "compiled", "none"),
        ("llm-foundry", "eager", "none"),
    ],
)
def test_profile_and_execution_mode_choose_the_eager_modules(framework, mode, expected):
    spec = llama(f"training.framework={framework}", f"training.execution_mode={mode}")
    assert eager_modules(spec) == expected


def _zero3(framework):
    spec = llama("parallel.zero_stage=3", f"training.framework={framework}")
    return chunk_ops(spec, make_shard(spec), range(2), True, True)


def test_fsdp2_copies_each_gathered_unit_out_on_the_compute_stream():
    ops = _zero3("torchtitan")
    for body in (ops.forward, ops.backward):
        gathers = [op for op in body if op.name == "param_all_gather"]
        copies = [op for op in body if op.name == "param_copy_out"]
        assert len(copies) == len(gathers) > 0
        for gather in gathers:
            # the copy of the gathered unit: its 16-bit bytes read and written once
            copy = next(c for c in copies if c.layer == gather.layer)
            assert copy.bytes_accessed == 2 * gather.comm_bytes
    assert not [op for op in _zero3("pytorch-fsdp1").forward if op.name == "param_copy_out"]


def test_fsdp2_copies_each_units_gradients_into_the_fp32_reduce_scatter_input():
    ops = _zero3("torchtitan")
    copies = {op.layer: op for op in ops.backward if op.name == "grad_copy_in"}
    # every unit: its 16-bit gradients read (2 bytes), the fp32 input written (4)
    for layer, elements in ops.layer_elements.items():
        assert copies[layer].bytes_accessed == 6 * elements
    # it belongs to the weight-gradient work (a split backward's W), after the layer's ops
    assert all(op.phase == "bwd_weight" for op in copies.values())
    assert not [op for op in ops.backward_input if op.name == "grad_copy_in"]
    last = [i for i, op in enumerate(ops.backward) if op.layer == 1]
    assert ops.backward[last[-1]].name == "grad_copy_in"
    assert not [op for op in _zero3("pytorch-fsdp1").backward if op.name == "grad_copy_in"]


def test_bf16_reduction_copies_four_bytes_per_element():
    spec = llama(
        "parallel.zero_stage=3", "training.framework=torchtitan", "training.grad_reduce_dtype=bf16"
    )
    ops = chunk_ops(spec, make_shard(spec), range(2), True, True)
    copy = next(op for op in ops.backward if op.name == "grad_copy_in" and op.layer == 0)
    assert copy.bytes_accessed == 4 * ops.layer_elements[0]
