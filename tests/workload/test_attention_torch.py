"""Plain PyTorch attention's kernels: closed-form bytes per score and what differs from
Megatron's path."""

import pytest

from simtrain.workload.attention import attention_core
from simtrain.workload.attention_torch import (
    CAUSAL_MASK_BUILD_BYTES,
    MASK_ADD_BYTES,
    torch_attention_ops,
)

BH, S, D = 32, 2048, 64


def _bytes(ops, kind="elementwise"):
    return sum(op.bytes_accessed for op in ops if op.kind == kind)


def test_the_causal_mask_adds_one_read_add_write_forward_and_nothing_backward():
    causal_f, causal_b = torch_attention_ops(BH, S, S, D, 0, dropout=False, causal=True)
    full_f, full_b = torch_attention_ops(BH, S, S, D, 0, dropout=False, causal=False)
    extra = _bytes(causal_f) - _bytes(full_f)
    assert extra == MASK_ADD_BYTES * BH * S * S + CAUSAL_MASK_BUILD_BYTES * S * S
    assert _bytes(causal_b) == _bytes(full_b)


def test_same_gemms_as_megatrons_path_and_same_model_flops():
    torch_f, torch_b = torch_attention_ops(BH, S, S, D, 0)
    mega_f, mega_b = attention_core("unfused", BH, S, S, D, 0.0, 0)
    gemms = [(op.name, op.m, op.n, op.k, op.batch) for op in torch_f + torch_b if op.kind == "gemm"]
    assert gemms == [
        (op.name, op.m, op.n, op.k, op.batch) for op in mega_f + mega_b if op.kind == "gemm"
    ]


@pytest.mark.parametrize("s", [512, 2048, 8192])
def test_layout_copies_are_d_over_s_of_the_score_traffic(s):
    """Per element of Q, K, V and the output: 20 bytes forward (Q, K, V copies, K's scale,
    the output copy) and 20 backward (the output gradient copy, dK's scale, the dQKV stack),
    i.e. 40·d/s bytes per score on top of the score kernels (no dropout, no mask)."""
    fwd, bwd = torch_attention_ops(BH, s, s, D, 0, dropout=False, causal=False)
    scores = BH * s * s
    score_bytes = 4 + 6  # softmax forward, softmax backward
    per_score = (_bytes(fwd) + _bytes(bwd)) / scores
    assert per_score == pytest.approx(score_bytes + 40 * D / s)


def test_dropout_costs_five_bytes_per_score_each_way():
    with_f, with_b = torch_attention_ops(BH, S, S, D, 0, dropout=True)
    without_f, without_b = torch_attention_ops(BH, S, S, D, 0, dropout=False)
    assert _bytes(with_f) - _bytes(without_f) == 5 * BH * S * S
    assert _bytes(with_b) - _bytes(without_b) == 5 * BH * S * S


def test_the_kernel_is_reachable_through_attention_core():
    fwd, _ = attention_core("torch", BH, S, S, D, 0.0, 0)
    assert any(op.name == "torch_causal_mask_add" for op in fwd)


def test_megatrons_fallback_masks_with_the_generic_kernel_only():
    """Megatron's softmax fallback masks in place with a (b, 1, s, s) mask broadcast over
    the heads (and so does its backward); its casts, scale and softmax are contiguous."""
    fwd, bwd = attention_core("unfused", 2, 1024, 1024, 64, 0.0, 0)
    strided = sorted(op.name for op in fwd + bwd if op.strided)
    assert strided == ["torch_mask_fill", "torch_mask_fill_bwd"]
