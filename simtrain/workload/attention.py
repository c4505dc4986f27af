"""The attention core (scores, softmax, values) as ops: fused flash kernel or unfused kernels.

Both variants count the same model FLOPs, 2·s_q·keys·(d_qk + d_v) per head per sequence
forward (QK^T and AV, without causal savings, as Megatron and PaLM count them; keys = s_kv,
or the sliding window when shorter; d_qk = d_v = d except under multi-head latent attention)
and twice that backward. They differ in what the hardware does:

- ``flash``: one fused kernel each way (FlashAttention); the score matrix never reaches HBM,
  and a causal kernel skips the masked blocks (the compute model accounts for that).
- ``unfused``: what Megatron-LM did in 2021 (Narayanan et al.) and Megatron-DeepSpeed still
  does without flash attention: a batched GEMM for QK^T, a fused scale-mask-softmax kernel,
  dropout on the probabilities, and a batched GEMM for AV; the b·a·s² score tensor is written
  and read several times, so long sequences become memory-bound. A sliding window only masks
  scores here: the GEMMs still compute every (query, key) pair. Megatron's fused softmax
  kernel only runs for some shapes (:func:`fused_softmax_runs`); otherwise the layer falls
  back to PyTorch's path: five kernels each way on an fp32 copy of the scores.
- ``torch``: plain PyTorch attention without Megatron's fused kernels (a model's own
  ``einsum``/softmax code, PyTorch's standard-attention benchmarks): separate layout copies,
  an additive causal mask on all scores, softmax and dropout kernels
  (:mod:`simtrain.workload.attention_torch`).

ALiBi adds a per-head linear bias to the scores. The flash kernel reads one bias row per head
and sequence (b·a·s_kv 16-bit values, BLOOM's broadcast ``alibi`` tensor); the unfused path
adds it as the C operand of a ``baddbmm``, which first expands the broadcast bias into the
score buffer and then reads it back: 2 · b·a·s_q·s_kv · 2 bytes more traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.workload.attention_torch import torch_attention_ops
from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES, collective, gemm, memory_op

MASK_BYTES = 1


def _bgemm(name: str, phase: str, m: int, n: int, k: int, batch: int, layer: int, dtype: str) -> Op:
    """A batched activation-by-activation GEMM (both operands are 16-bit activations)."""
    return gemm(name, phase, m, n, k, ACT_BYTES, layer, batch, dtype)


def _memory(name: str, phase: str, size_bytes: float, layer: int) -> Op:
    return memory_op(name, "elementwise", phase, size_bytes, layer)


def alibi_bias_bytes(batch_heads: int, s_kv: int) -> float:
    """Bytes of the ALiBi bias rows a fused kernel reads: one 16-bit row per head and sequence."""
    return float(batch_heads * s_kv * ACT_BYTES)


# Megatron's fused softmax kernel processes this many (batch x head) score matrices per CTA
# (4 warps of one row-batch each when the key length exceeds 128, two per warp below).
FUSED_SOFTMAX_BATCHES_PER_BLOCK = 4
FUSED_SOFTMAX_BATCHES_PER_BLOCK_SHORT = 8
FUSED_SOFTMAX_MAX_KEYS = 16384


def fused_softmax_runs(batch_heads: int, s_q: int, s_kv: int) -> bool:
    """Whether Megatron's fused scale-mask-softmax kernel takes these scores.

    ``FusedScaleMaskSoftmax.is_kernel_available`` requires 16 < s_kv <= 16,384, both
    lengths multiples of 4, and the batch x heads count a multiple of the kernel's batches
    per block; otherwise the scores go through PyTorch's softmax path
    (docs/references/frameworks.md §Megatron fused softmax).

    Examples:
        >>> fused_softmax_runs(16, 1024, 1024), fused_softmax_runs(2, 1024, 1024)
        (True, False)
    """
    per_block = (
        FUSED_SOFTMAX_BATCHES_PER_BLOCK_SHORT if s_kv <= 128 else FUSED_SOFTMAX_BATCHES_PER_BLOCK
    )
    return (
        16 < s_kv <= FUSED_SOFTMAX_MAX_KEYS
        and s_q % 4 == 0
        and s_kv % 4 == 0
        and batch_heads % per_block == 0
    )


def _softmax_ops(scores: int, layer: int) -> tuple[list[Op], list[Op]]:
    """Megatron's fused scale-mask-softmax kernels on ``scores`` elements.

    One kernel each way on the 16-bit scores: read and write forward; gradient, probabilities
    and result backward.
    """
    forward = [_memory("scale_mask_softmax", "fwd", 2 * scores * ACT_BYTES, layer)]
    backward = [_memory("scale_mask_softmax_bwd", "bwd_input", 3 * scores * ACT_BYTES, layer)]
    return forward, backward


def _torch_softmax_ops(scores: int, layer: int) -> tuple[list[Op], list[Op]]:
    """PyTorch's softmax path, taken when the fused kernel cannot run.

    With Megatron's fp32 softmax under query-key layer scaling: cast to fp32, scale, masked
    fill (reading the byte mask), softmax and cast back, and the autograd mirror of each
    backward (bytes per score element).
    """
    forward = (("cast_fp32", 6), ("scale", 8), ("mask_fill", 9), ("softmax", 8), ("cast", 6))
    backward = (("cast_fp32", 6), ("softmax", 12), ("mask_fill", 9), ("scale", 8), ("cast", 6))

    def op(name: str, phase: str, per: int) -> Op:
        # masked_fill's (b, 1, s, s) mask is broadcast over the heads: ATen's generic
        # elementwise kernel (Op.strided), forward and backward
        strided = name.startswith("torch_mask_fill")
        return memory_op(name, "elementwise", phase, per * scores, layer, strided=strided)

    fwd = [op(f"torch_{name}", "fwd", per) for name, per in forward]
    bwd = [op(f"torch_{name}_bwd", "bwd_input", per) for name, per in backward]
    return fwd, bwd


def attention_core(
    kernel: str,
    batch_heads: int,
    s_q: int,
    s_kv: int,
    head_dim: int,
    qkv_bytes: float,
    layer: int,
    dropout: bool = True,
    *,
    v_head_dim: int = 0,
    window: int = 0,
    alibi: bool = False,
    dtype: str = "",
) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Forward and backward ops of the attention core of one layer on one rank.

    Args:
        kernel: a fused family (``flash``...), ``unfused`` or ``torch``.
        batch_heads: microbatch size times the rank's query heads.
        s_q: query positions on this rank (sequence / cp).
        s_kv: key positions attended to (the full sequence).
        head_dim: query/key dimension of one head (d_qk).
        qkv_bytes: bytes of the rank's Q, K and V tensors.
        layer: transformer layer index.
        dropout: whether the (unfused) kernels apply dropout to the probabilities.
        v_head_dim: value dimension of one head (d_v); 0 for ``head_dim``.
        window: sliding window (most keys per query); 0 for none.
        alibi: whether linear biases are added to the scores.
        dtype: precision of the kernels ("" = training dtype; "bf16" under FP8 training).
    """
    d_v = v_head_dim or head_dim
    keys = min(s_kv, window) if window else s_kv
    flops = 2.0 * batch_heads * s_q * keys * (head_dim + d_v)
    out_bytes = batch_heads * s_q * d_v * ACT_BYTES
    if kernel == "torch":
        return torch_attention_ops(
            batch_heads,
            s_q,
            s_kv,
            head_dim,
            layer,
            v_head_dim=d_v,
            dropout=dropout,
            alibi=alibi,
            dtype=dtype,
        )
    if kernel != "unfused":  # a fused kernel (flash, flash3, cudnn)
        bias = alibi_bias_bytes(batch_heads, s_kv) if alibi else 0.0
        common = dict(
            kind="attention",
            causal=True,
            layer=layer,
            m=s_q,
            n=s_kv,
            k=head_dim,
            batch=batch_heads,
            dtype=dtype,
            window=window if window and window < s_kv else 0,
        )
        forward = Op(
            name="flash_attention",
            phase="fwd",
            flops=flops,
            bytes_accessed=float(qkv_bytes + out_bytes + bias),
            **common,
        )  # type: ignore[arg-type]
        backward = Op(
            name="flash_attention_bwd",
            phase="bwd_input",
            flops=2 * flops,
            bytes_accessed=float(2 * (qkv_bytes + 2 * out_bytes) + bias),
            **common,
        )  # type: ignore[arg-type]
        return (forward,), (backward,)
    scores = batch_heads * s_q * s_kv  # elements of the score / probability matrix
    fused = fused_softmax_runs(batch_heads, s_q, s_kv)
    softmax_f, softmax_b = (_softmax_ops if fused else _torch_softmax_ops)(scores, layer)
    dropout_bytes = scores * (2 * ACT_BYTES + MASK_BYTES)
    dropout_f = [_memory("attention_dropout", "fwd", dropout_bytes, layer)] if dropout else []
    dropout_b = (
        [_memory("attention_dropout_bwd", "bwd_input", dropout_bytes, layer)] if dropout else []
    )
    bias_f = [_memory("alibi_bias", "fwd", 2 * scores * ACT_BYTES, layer)] if alibi else []

    def bgemm(name: str, phase: str, m: int, n: int, k: int) -> Op:
        return _bgemm(name, phase, m, n, k, batch_heads, layer, dtype)

    d = head_dim
    forward_ops = (
        *bias_f,
        bgemm("attention_scores", "fwd", s_q, s_kv, d),
        *softmax_f,
        *dropout_f,
        bgemm("attention_values", "fwd", s_q, d_v, s_kv),
    )
    backward_ops = (
        bgemm("attention_values_dprobs", "bwd_input", s_q, s_kv, d_v),
        bgemm("attention_values_dvalues", "bwd_input", s_kv, d_v, s_q),
        *dropout_b,
        *softmax_b,
        bgemm("attention_scores_dquery", "bwd_input", s_q, d, s_kv),
        bgemm("attention_scores_dkey", "bwd_input", s_kv, d, s_q),
    )
    return forward_ops, backward_ops


@dataclass(frozen=True)
class HeadShape:
    """The attention heads one rank runs, and how they attend.

    Attributes:
        heads: the rank's query heads.
        kv_heads: the rank's key/value heads (``heads`` under MLA).
        d_qk: query/key dimension per head.
        d_v: value dimension per head.
        window: sliding window (0 = none).
        alibi: ALiBi biases on the scores.
        dropout: attention dropout (unfused kernels).
        dtype: kernel precision ("" = training dtype).
    """

    heads: int
    kv_heads: int
    d_qk: int
    d_v: int
    window: int = 0
    alibi: bool = False
    dropout: bool = True
    dtype: str = ""


def context_parallel_attention(
    kernel: str,
    algorithm: str,
    cp: int,
    micro_batch_size: int,
    shape: HeadShape,
    s_local: int,
    layer: int,
) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Attention core of one layer on one rank under context parallelism of degree ``cp``.

    The rank holds ``s_local = seq / cp`` tokens (with causal load balancing: 2·cp chunks,
    two per rank, so every rank has the same share of the causal work). Algorithms:

    - ``all_gather`` (Llama 3): all-gather K and V over the cp group, attend with the local
      queries to the whole sequence; the backward reduce-scatters dK and dV.
    - ``ring`` (ring attention): K/V blocks travel around the ring in cp - 1 steps; each step's
      transfer overlaps the attention on the block received before (the backward also passes
      dK/dV, so twice the bytes). Not with a sliding window (the spec rejects it).
    - ``ulysses`` (DeepSpeed-Ulysses): an all-to-all turns sequence shards into head shards
      (Q, K, V), attention runs on the whole sequence with heads / cp heads, and a second
      all-to-all turns the output back.

    Returns:
        Forward and backward ops (collectives on axis ``cp`` included, in order).
    """
    heads, d_qk, d_v = shape.heads, shape.d_qk, shape.d_v
    extra = dict(v_head_dim=d_v, window=shape.window, alibi=shape.alibi, dtype=shape.dtype)
    b = micro_batch_size
    kv_local = b * s_local * shape.kv_heads * (d_qk + d_v) * ACT_BYTES  # this rank's K and V
    qkv_local = b * s_local * heads * d_qk * ACT_BYTES + kv_local
    seq = s_local * cp
    if cp == 1 or algorithm == "all_gather":
        fwd, bwd = attention_core(
            kernel, b * heads, s_local, seq, d_qk, qkv_local, layer, shape.dropout, **extra
        )
        if cp == 1:
            return fwd, bwd
        gather = _collective("cp_kv_all_gather", "all_gather", "fwd", kv_local * cp, layer)
        scatter = _collective(
            "cp_dkv_reduce_scatter", "reduce_scatter", "bwd_input", kv_local * cp, layer
        )
        return (gather, *fwd), (*bwd, scatter)
    if algorithm == "ulysses":
        fwd, bwd = attention_core(
            kernel, b * heads // cp, seq, seq, d_qk, qkv_local, layer, shape.dropout, **extra
        )
        out_local = b * s_local * heads * d_v * ACT_BYTES
        return (
            (
                _collective("cp_qkv_all_to_all", "all_to_all", "fwd", qkv_local, layer),
                *fwd,
                _collective("cp_out_all_to_all", "all_to_all", "fwd", out_local, layer),
            ),
            (
                _collective("cp_dout_all_to_all", "all_to_all", "bwd_input", out_local, layer),
                *bwd,
                _collective("cp_dqkv_all_to_all", "all_to_all", "bwd_input", qkv_local, layer),
            ),
        )
    # Ring: one block of attention per ring step, the next block's transfer in flight.
    block_fwd, block_bwd = attention_core(
        kernel, b * heads, s_local, s_local, d_qk, qkv_local / cp, layer, shape.dropout, **extra
    )
    return (
        _ring(block_fwd, cp, kv_local, "fwd", layer),
        _ring(block_bwd, cp, 2 * kv_local, "bwd_input", layer),
    )


def _ring(
    block: tuple[Op, ...], cp: int, step_bytes: float, phase: str, layer: int
) -> tuple[Op, ...]:
    """Attention in cp blocks; a transfer of the next block is in flight during each block.

    A transfer is issued before the block it overlaps (``overlap_ops``); the block after
    waits for it.
    """
    ops: list[Op] = []
    for step in range(cp):
        if step < cp - 1:
            ops.append(
                collective(
                    "cp_ring_send_recv",
                    "send_recv",
                    "cp",
                    phase,
                    step_bytes,
                    layer,
                    overlap_ops=len(block),
                )
            )
        ops.extend(block)
    return tuple(ops)


def _collective(name: str, comm: str, phase: str, size: float, layer: int) -> Op:
    return collective(name, comm, "cp", phase, size, layer)
