"""Plain PyTorch standard attention (``attention_kernel: torch``) as the eager kernels it runs.

What a PyTorch model without a fused attention kernel launches, op by op: the FlashAttention
repository's ``SelfAttention`` (``flash_attn/modules/mha.py``, the attention of its GPT model
with ``use_flash_attn=False``) and the "PyTorch" bars of its kernel benchmark
(``benchmarks/benchmark_flash_attention.py``, ``attention_pytorch``); see
docs/references/kernels.md §Standard attention. Unlike Megatron's ``unfused`` path (one
fused scale-mask-softmax kernel that generates the causal mask), every step is its own
kernel on the full ``s_q x s_kv`` score matrix:

- Q, K and V are strided views of the packed QKV projection; ``einsum`` copies each into
  the (batch x heads, sequence, head dim) layout of a batched GEMM, and K is first scaled by
  1/sqrt(d) (the benchmark folds the scale into ``baddbmm``'s alpha and pays it in the
  backward instead: the same bytes);
- a causal mask is an additive ``-10000`` matrix, built each call in fp32 (``full``,
  ``triu``, cast to 16 bits) and added to all scores, so the masked half costs a full
  read-add-write and the GEMMs still compute every (query, key) pair;
- softmax in the 16-bit activation dtype, dropout (when on) as ``native_dropout`` with a
  1-byte mask;
- the output is a permuted view that the output projection copies to (batch, sequence,
  hidden), and its gradient back.

Backward: the gradient of the output copied to the batched layout, the two GEMMs through V,
softmax backward (gradient, probabilities, result), dropout backward, the two GEMMs through
K and Q, the scale of dK, and ``unbind``'s backward stacking dQ, dK and dV into the packed
gradient. The add of the mask has no backward kernel (its gradient passes through).

The small per-element copies (bytes ∝ b·a·s·d) matter only at short sequences, where
they are d/s of the score traffic; the mask add matters at every length. Both run ATen's
generic elementwise kernel, not the vectorised one: ``gpu_kernel`` vectorises only when the
whole iteration is contiguous (``aten/src/ATen/native/cuda/CUDALoops.cuh``,
``gpu_kernel_impl_nocast``), and a strided view, a permuted copy or a broadcast mask makes
it non-contiguous: one scalar load per element and operand through an offset calculator
(``Op.strided``, priced at ``ComputeCalibration.strided_memory_fraction``).
"""

from __future__ import annotations

from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES, gemm, memory_op

MASK_BYTES = 1  # native_dropout's boolean keep-mask
FP32_BYTES = 4
# Bytes per score element of each kernel on the s_q x s_kv scores (16-bit unless noted).
MASK_ADD_BYTES = 3 * ACT_BYTES  # read scores and mask, write the sum
SOFTMAX_BYTES = 2 * ACT_BYTES  # read scores, write probabilities
SOFTMAX_BWD_BYTES = 3 * ACT_BYTES  # read gradient and probabilities, write gradient
DROPOUT_BYTES = 2 * ACT_BYTES + MASK_BYTES  # read, write, and the keep-mask (each way)
# The causal mask, once per call on s_q x s_kv (not per head): torch.full in fp32 (write),
# triu (read, write) and the cast to 16 bits (read fp32, write 16-bit).
CAUSAL_MASK_BUILD_BYTES = 3 * FP32_BYTES + FP32_BYTES + ACT_BYTES
COPY_BYTES = 2 * ACT_BYTES  # a layout copy or a scale: read and write one 16-bit element


# Kernels that iterate over a non-contiguous tensor (a strided view of the packed QKV, a
# permuted copy, the broadcast mask): ATen's generic elementwise loop (Op.strided).
STRIDED_KERNELS = frozenset(
    {
        "torch_key_scale",
        "torch_qkv_layout",
        "torch_causal_mask_add",
        "torch_output_layout",
        "torch_output_grad_layout",
        "torch_key_scale_bwd",
        "torch_qkv_grad_stack",
    }
)


def _memory(name: str, phase: str, size_bytes: float, layer: int) -> Op:
    strided = name in STRIDED_KERNELS
    return memory_op(name, "elementwise", phase, size_bytes, layer, strided=strided)


def torch_attention_ops(
    batch_heads: int,
    s_q: int,
    s_kv: int,
    head_dim: int,
    layer: int,
    *,
    v_head_dim: int = 0,
    dropout: bool = True,
    causal: bool = True,
    alibi: bool = False,
    contiguous_output: bool = True,
    dtype: str = "",
) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Forward and backward kernels of plain PyTorch attention on one rank (module docstring).

    Args:
        batch_heads: microbatch size times the rank's query heads.
        s_q: query positions.
        s_kv: key positions.
        head_dim: query/key dimension of one head.
        layer: transformer layer index.
        v_head_dim: value dimension of one head (0 for ``head_dim``).
        dropout: dropout on the probabilities.
        causal: add the causal mask to the scores.
        alibi: add the linear biases to the scores (one more read-add-write).
        contiguous_output: the output is copied to (batch, sequence, hidden) for the output
            projection and its gradient back (a model layer); False for a kernel benchmark
            that times the attention function alone on its permuted output.
        dtype: precision of the GEMMs ("" = training dtype).

    Examples:
        >>> fwd, bwd = torch_attention_ops(64, 1024, 1024, 64, 0, dropout=False)
        >>> [op.name for op in fwd if op.kind == "gemm"], len(bwd)
        (['attention_scores', 'attention_values'], 8)
    """
    d_v = v_head_dim or head_dim
    scores = batch_heads * s_q * s_kv
    q_elems = batch_heads * s_q * head_dim
    k_elems = batch_heads * s_kv * head_dim
    v_elems = batch_heads * s_kv * d_v
    out_elems = batch_heads * s_q * d_v

    def bgemm(name: str, phase: str, m: int, n: int, k: int) -> Op:
        return gemm(name, phase, m, n, k, ACT_BYTES, layer, batch_heads, dtype)

    def mem(name: str, phase: str, size: float) -> list[Op]:
        return [_memory(name, phase, size, layer)]

    forward = [
        *mem("torch_key_scale", "fwd", COPY_BYTES * k_elems),
        *mem("torch_qkv_layout", "fwd", COPY_BYTES * (q_elems + k_elems + v_elems)),
        bgemm("attention_scores", "fwd", s_q, s_kv, head_dim),
    ]
    if alibi:
        forward += mem("alibi_bias", "fwd", MASK_ADD_BYTES * scores)
    if causal:
        forward += mem("torch_causal_mask_build", "fwd", CAUSAL_MASK_BUILD_BYTES * s_q * s_kv)
        forward += mem("torch_causal_mask_add", "fwd", MASK_ADD_BYTES * scores)
    forward += mem("torch_softmax", "fwd", SOFTMAX_BYTES * scores)
    if dropout:
        forward += mem("attention_dropout", "fwd", DROPOUT_BYTES * scores)
    forward.append(bgemm("attention_values", "fwd", s_q, d_v, s_kv))
    if contiguous_output:
        forward += mem("torch_output_layout", "fwd", COPY_BYTES * out_elems)

    backward: list[Op] = []
    if contiguous_output:
        backward += mem("torch_output_grad_layout", "bwd_input", COPY_BYTES * out_elems)
    backward += [
        bgemm("attention_values_dprobs", "bwd_input", s_q, s_kv, d_v),
        bgemm("attention_values_dvalues", "bwd_input", s_kv, d_v, s_q),
    ]
    if dropout:
        backward += mem("attention_dropout_bwd", "bwd_input", DROPOUT_BYTES * scores)
    backward += mem("torch_softmax_bwd", "bwd_input", SOFTMAX_BWD_BYTES * scores)
    backward += [
        bgemm("attention_scores_dquery", "bwd_input", s_q, head_dim, s_kv),
        bgemm("attention_scores_dkey", "bwd_input", s_kv, head_dim, s_q),
    ]
    backward += mem("torch_key_scale_bwd", "bwd_input", COPY_BYTES * k_elems)
    backward += mem("torch_qkv_grad_stack", "bwd_input", COPY_BYTES * (q_elems + k_elems + v_elems))
    return tuple(forward), tuple(backward)
