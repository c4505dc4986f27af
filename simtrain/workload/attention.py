"""The attention core (scores, softmax, values) as ops: fused flash kernel or unfused kernels.

Both variants count the same model FLOPs, 4·s_q·s_kv·d per head per sequence forward (QK^T
and AV, without causal savings, as Megatron and PaLM count them) and twice that backward.
They differ in what the hardware does:

- ``flash``: one fused kernel each way (FlashAttention); the score matrix never reaches HBM,
  and a causal kernel skips the masked blocks (the compute model accounts for that).
- ``unfused``: what Megatron-LM did in 2021 (Narayanan et al.) and Megatron-DeepSpeed still
  does without flash attention: a batched GEMM for QK^T, a fused scale-mask-softmax kernel,
  dropout on the probabilities, and a batched GEMM for AV; the b·a·s² score tensor is written
  and read several times, so long sequences become memory-bound.
"""

from __future__ import annotations

from simtrain.workload.ops import Op

ACT_BYTES = 2
MASK_BYTES = 1


def _bgemm(name: str, phase: str, m: int, n: int, k: int, batch: int, layer: int) -> Op:
    """A batched activation-by-activation GEMM (no weights involved)."""
    return Op(
        name=name,
        kind="gemm",
        phase=phase,  # type: ignore[arg-type]
        flops=2.0 * m * n * k * batch,
        bytes_accessed=float(batch * ACT_BYTES * (m * k + k * n + m * n)),
        m=m,
        n=n,
        k=k,
        batch=batch,
        layer=layer,
    )


def _memory(name: str, phase: str, size_bytes: float, layer: int) -> Op:
    return Op(
        name=name,
        kind="elementwise",
        phase=phase,  # type: ignore[arg-type]
        bytes_accessed=float(size_bytes),
        layer=layer,
    )


def attention_core(
    kernel: str,
    batch_heads: int,
    s_q: int,
    s_kv: int,
    head_dim: int,
    qkv_bytes: float,
    layer: int,
) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Forward and backward ops of the attention core of one layer on one rank.

    Args:
        kernel: ``flash`` or ``unfused``.
        batch_heads: microbatch size times the rank's query heads.
        s_q: query positions on this rank (sequence / cp).
        s_kv: key positions attended to (the full sequence).
        head_dim: dimension of one head.
        qkv_bytes: bytes of the rank's Q, K and V tensors.
        layer: transformer layer index.
    """
    flops = 4.0 * batch_heads * s_q * s_kv * head_dim
    out_bytes = batch_heads * s_q * head_dim * ACT_BYTES
    if kernel == "flash":
        common = dict(
            kind="attention", causal=True, layer=layer, m=s_q, n=s_kv, k=head_dim, batch=batch_heads
        )
        forward = Op(
            name="flash_attention",
            phase="fwd",
            flops=flops,
            bytes_accessed=float(qkv_bytes + out_bytes),
            **common,
        )  # type: ignore[arg-type]
        backward = Op(
            name="flash_attention_bwd",
            phase="bwd_input",
            flops=2 * flops,
            bytes_accessed=float(2 * (qkv_bytes + 2 * out_bytes)),
            **common,
        )  # type: ignore[arg-type]
        return (forward,), (backward,)
    scores = batch_heads * s_q * s_kv  # elements of the score / probability matrix
    forward_ops = (
        _bgemm("attention_scores", "fwd", s_q, s_kv, head_dim, batch_heads, layer),
        _memory("scale_mask_softmax", "fwd", 2 * scores * ACT_BYTES, layer),
        _memory("attention_dropout", "fwd", scores * (2 * ACT_BYTES + MASK_BYTES), layer),
        _bgemm("attention_values", "fwd", s_q, head_dim, s_kv, batch_heads, layer),
    )
    backward_ops = (
        _bgemm("attention_values_dprobs", "bwd_input", s_q, s_kv, head_dim, batch_heads, layer),
        _bgemm("attention_values_dvalues", "bwd_input", s_kv, head_dim, s_q, batch_heads, layer),
        _memory("attention_dropout_bwd", "bwd_input", scores * (2 * ACT_BYTES + MASK_BYTES), layer),
        _memory("scale_mask_softmax_bwd", "bwd_input", 3 * scores * ACT_BYTES, layer),
        _bgemm("attention_scores_dquery", "bwd_input", s_q, head_dim, s_kv, batch_heads, layer),
        _bgemm("attention_scores_dkey", "bwd_input", s_kv, head_dim, s_q, batch_heads, layer),
    )
    return forward_ops, backward_ops
