"""Megatron's fused softmax runs only for some score shapes; otherwise PyTorch's five kernels."""

import pytest

from simtrain.workload.attention import attention_core, fused_softmax_runs


@pytest.mark.parametrize(
    ("batch_heads", "s_q", "s_kv", "runs"),
    [
        (16, 1024, 1024, True),  # vTrain tp 4, micro-batch 1: 16 heads / 4 x 1
        (2, 1024, 1024, False),  # tp 8, micro-batch 1: 2 score matrices, not a multiple of 4
        (4, 1024, 1024, True),
        (8, 128, 128, True),  # at <= 128 keys a block takes 8 matrices
        (4, 128, 128, False),
        (16, 16, 16, False),  # too short for the kernel
        (16, 32768, 32768, False),  # too long
        (16, 1026, 1026, False),  # lengths must be multiples of 4
    ],
)
def test_kernel_availability_follows_megatrons_rule(batch_heads, s_q, s_kv, runs):
    assert fused_softmax_runs(batch_heads, s_q, s_kv) is runs


def _softmax_ops(ops):
    return [op for op in ops if "softmax" in op.name or op.name.startswith("torch_")]


def test_fallback_issues_five_kernels_each_way_and_moves_more_bytes():
    """One fused kernel each way (4 and 6 bytes per score) against PyTorch's five (37 and 41)."""
    s = 1024
    fused_f, fused_b = attention_core("unfused", 4, s, s, 64, 0.0, 0)
    torch_f, torch_b = attention_core("unfused", 2, s, s, 64, 0.0, 0)
    assert [len(_softmax_ops(ops)) for ops in (fused_f, fused_b)] == [1, 1]
    assert [len(_softmax_ops(ops)) for ops in (torch_f, torch_b)] == [5, 5]
    per_score = [
        sum(op.bytes_accessed for op in _softmax_ops(ops)) / (batch * s * s)
        for ops, batch in ((fused_f, 4), (fused_b, 4), (torch_f, 2), (torch_b, 2))
    ]
    assert per_score == [4, 6, 37, 41]


def test_flash_attention_is_untouched_by_the_rule():
    fwd, bwd = attention_core("flash", 2, 1024, 1024, 64, 0.0, 0)
    assert [op.name for op in fwd + bwd] == ["flash_attention", "flash_attention_bwd"]
