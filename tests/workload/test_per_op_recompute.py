"""torchtitan's per-operator selective checkpointing (``recompute: per_op``)."""

import pytest

from simtrain.errors import SpecError
from simtrain.memory.activations import layer_activation_bytes
from simtrain.parallel.builder import chunk_ops, make_shard
from simtrain.workload.counts import recompute_flops_per_sequence
from tests.conftest import LLAMA_TINY, make_experiment

H, HEADS, KV, D, FFN, SEQ = 256, 8, 2, 32, 688, 128


def spec(*overrides):
    return make_experiment(
        "parallel.recompute=per_op", "training.framework=torchtitan", *overrides, model=LLAMA_TINY
    )


def recomputed(ops):
    return [op for op in ops if op.phase == "recompute"]


def test_per_op_reruns_every_other_matmul_and_every_non_matmul_op():
    s = spec()
    ops = chunk_ops(s, make_shard(s), range(1), True, False)
    names = [op.name for op in recomputed(ops.backward)]
    # wk (2nd matmul), wo (4th) and w3 (6th) re-run; wq, wv, w1, w2 and the attention
    # output are kept; nothing after w2 is needed by the backward
    assert names == [
        "norm1",
        "k_proj",
        "rope",
        "repeat_kv",
        "attn_out",
        "bias_dropout_add1",
        "norm2",
        "mlp_up",
        "activation",
    ]


def test_per_op_reruns_the_sequence_parallel_gathers_but_not_the_reduce_scatters():
    s = spec("parallel.tp=2", "parallel.sp=true")
    ops = chunk_ops(s, make_shard(s), range(1), True, False)
    comms = [op.name for op in recomputed(ops.backward) if op.is_comm]
    assert comms == ["attn_all_gather", "mlp_all_gather"]


def test_per_op_recompute_flops_match_the_ops():
    s = spec()
    ops = chunk_ops(s, make_shard(s), range(2), True, False)
    gemm = sum(op.flops for op in recomputed(ops.backward) if op.kind == "gemm")
    tokens = SEQ  # micro-batch 1
    closed = 2 * tokens * 2 * (H * KV * D + HEADS * D * H + H * FFN)  # two layers
    assert gemm == closed
    assert recompute_flops_per_sequence(s.model, "per_op") == closed
    assert not [op for op in recomputed(ops.backward) if op.kind == "attention"]


def test_per_op_keeps_the_saved_outputs():
    s = spec()
    kept = layer_activation_bytes(s.model, 1, recompute="per_op")
    # layer input and w2's output (h each); Q, V, the attention output and w1's output
    assert kept == 2 * SEQ * (2 * H + 2 * HEADS * D + KV * D + FFN)
    assert kept < layer_activation_bytes(s.model, 1, recompute="none")
    assert kept > layer_activation_bytes(s.model, 1, recompute="full")


def test_per_op_needs_a_gated_serial_dense_layer():
    with pytest.raises(SpecError, match=r"recompute=per_op needs a dense, serial block"):
        make_experiment("parallel.recompute=per_op")  # the tiny GPT: GELU MLP
