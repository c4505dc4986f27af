"""Operator sequences of a transformer layer under Megatron-style model parallelism.

For one microbatch on one rank this module lists, in execution order, the forward ops of a
layer, its backward ops (input gradient and weight gradient split, as zero-bubble schedules
need), and the ops of the embedding, the LM head with its loss, and the optimizer step.
Tensor-parallel collectives appear inline as ops of kind ``collective`` on axis ``tp``:

- without sequence parallelism, an all-reduce of the activations after the attention output
  projection and after the second MLP GEMM (forward), and of the input gradients of the QKV
  and first MLP GEMMs (backward, overlapped with the weight-gradient GEMM that follows);
- with sequence parallelism, those become reduce-scatters, and an all-gather precedes the
  QKV and first MLP GEMMs (forward); backward swaps the two.

Context-parallel attention (:mod:`simtrain.workload.attention`) and mixture-of-experts MLPs
(:mod:`simtrain.workload.moe`) add their collectives on axes ``cp`` and ``ep``. Elementwise
ops are memory-bound: their cost is the bytes they read and write.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.specs.model import ModelSpec
from simtrain.workload.attention import context_parallel_attention
from simtrain.workload.moe import moe_mlp_ops
from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES, DTYPE_BYTES, collective, linear, memory_op


@dataclass(frozen=True)
class Shard:
    """How one rank's share of a layer is cut.

    Attributes:
        micro_batch_size: sequences in the microbatch (b).
        tp: tensor-parallel degree.
        sp: sequence parallelism within the tensor-parallel group.
        cp: context-parallel degree (the rank holds seq_length / cp tokens of each sequence).
        ep: expert-parallel degree.
        dtype: GEMM input dtype (sets weight bytes read by GEMMs).
        attention: attention kernel, ``flash`` or ``unfused`` (see ``workload.attention``).
        cp_algorithm: context-parallel attention, ``ring``, ``all_gather`` or ``ulysses``.
    """

    micro_batch_size: int
    tp: int = 1
    sp: bool = False
    cp: int = 1
    ep: int = 1
    dtype: str = "bf16"
    attention: str = "flash"
    cp_algorithm: str = "ring"


def tp_comm(
    name: str, comm: str, phase: str, size_bytes: float, layer: int, overlap_ops: int = 0
) -> Op:
    """A tensor-parallel collective (nccl-tests size convention)."""
    return collective(name, comm, "tp", phase, size_bytes, layer, overlap_ops)


@dataclass(frozen=True)
class LayerOps:
    """Ops of one transformer layer for one microbatch on one rank.

    Attributes:
        forward: forward ops in execution order (collectives inline).
        backward: backward ops in execution order.
        attention_core: the forward ops that selective recomputation re-runs.
    """

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    attention_core: tuple[Op, ...]


def _tp_region(
    shard: Shard, tag: str, act_bytes: float, layer: int
) -> tuple[Op | None, Op | None, Op | None, Op | None]:
    """TP collectives around a column- then row-parallel pair of linear layers.

    Returns (forward entry, forward exit, backward exit-gradient, backward entry-gradient).
    The entry gradient overlaps the weight-gradient GEMM issued right after it.
    """
    if shard.tp == 1:
        return None, None, None, None
    if shard.sp:
        return (
            tp_comm(f"{tag}_all_gather", "all_gather", "fwd", act_bytes, layer),
            tp_comm(f"{tag}_reduce_scatter", "reduce_scatter", "fwd", act_bytes, layer),
            tp_comm(f"{tag}_grad_all_gather", "all_gather", "bwd_input", act_bytes, layer),
            tp_comm(
                f"{tag}_grad_reduce_scatter",
                "reduce_scatter",
                "bwd_input",
                act_bytes,
                layer,
                overlap_ops=1,
            ),
        )
    return (
        None,
        tp_comm(f"{tag}_all_reduce", "all_reduce", "fwd", act_bytes, layer),
        None,
        tp_comm(
            f"{tag}_grad_all_reduce", "all_reduce", "bwd_input", act_bytes, layer, overlap_ops=1
        ),
    )


def _present(*ops: Op | None) -> list[Op]:
    return [op for op in ops if op is not None]


def layer_ops(model: ModelSpec, shard: Shard, layer: int) -> LayerOps:
    """Forward and backward ops of 0-based ``layer`` for one microbatch on one rank."""
    t, b = shard.tp, shard.micro_batch_size
    s = model.seq_length // shard.cp
    tokens = b * s
    sp_tokens = tokens // t if shard.sp else tokens  # tokens held outside the TP region
    h, d = model.hidden_size, model.head_size
    heads, kv = model.num_heads // t, max(1, model.kv_heads // t)
    wb = DTYPE_BYTES[shard.dtype]
    act = tokens * h * ACT_BYTES  # one full activation tensor [b, s, h]
    norm_bytes = 2 * sp_tokens * h * ACT_BYTES
    # (bias +) dropout + residual add: read two tensors, write one (and a 1-byte mask).
    bda_bytes = sp_tokens * h * (3 * ACT_BYTES + (1 if model.dropout else 0))

    # --- attention block ---
    a_in, a_out, a_out_grad, a_in_grad = _tp_region(shard, "attn", act, layer)
    qkv_f, qkv_d, qkv_w = linear("qkv", tokens, h, (heads + 2 * kv) * d, wb, layer)
    out_f, out_d, out_w = linear("attn_out", tokens, heads * d, h, wb, layer)
    core_f, core_b = context_parallel_attention(
        shard.attention, shard.cp_algorithm, shard.cp, b, heads, kv, s, d, layer, model.dropout
    )
    rope: list[Op] = []
    if model.position_embedding == "rope":
        rope_bytes = 2 * tokens * (heads + kv) * d * ACT_BYTES
        rope = [memory_op("rope", "elementwise", "fwd", rope_bytes, layer)]
    core = (*rope, *core_f)

    # --- MLP block (dense or experts) ---
    m_in, m_out, m_out_grad, m_in_grad = _tp_region(shard, "mlp", act, layer)
    if model.is_moe_layer(layer):
        mlp_f, mlp_b = moe_mlp_ops(model, t, shard.ep, layer, tokens, wb)
        mlp_b = [*mlp_b, *_present(m_in_grad)]  # no weight-gradient GEMM left to overlap
    else:
        mlp_f, mlp_b = _dense_mlp_ops(model, t, layer, tokens, wb, m_in_grad)

    forward = [
        memory_op("norm1", "norm", "fwd", norm_bytes, layer),
        *_present(a_in),
        qkv_f,
        *core,
        out_f,
        *_present(a_out),
        memory_op("bias_dropout_add1", "elementwise", "fwd", bda_bytes, layer),
        memory_op("norm2", "norm", "fwd", norm_bytes, layer),
        *_present(m_in),
        *mlp_f,
        *_present(m_out),
        memory_op("bias_dropout_add2", "elementwise", "fwd", bda_bytes, layer),
    ]
    backward = [
        memory_op("bias_dropout_add2_bwd", "elementwise", "bwd_input", bda_bytes, layer),
        *_present(m_out_grad),
        *mlp_b,
        memory_op("norm2_bwd", "norm", "bwd_input", 2 * norm_bytes, layer),
        memory_op("bias_dropout_add1_bwd", "elementwise", "bwd_input", bda_bytes, layer),
        *_present(a_out_grad),
        out_d,
        out_w,
        *core_b,
        *[
            memory_op("rope_bwd", "elementwise", "bwd_input", op.bytes_accessed, layer)
            for op in rope
        ],
        qkv_d,
        *_present(a_in_grad),
        qkv_w,
        memory_op("norm1_bwd", "norm", "bwd_input", 2 * norm_bytes, layer),
    ]
    return LayerOps(tuple(forward), tuple(backward), tuple(core))


def _dense_mlp_ops(
    model: ModelSpec, tp: int, layer: int, tokens: int, wb: int, input_grad_comm: Op | None
) -> tuple[list[Op], list[Op]]:
    """Forward and backward ops of a dense MLP (GELU: 2 GEMMs; SwiGLU: gate+up fused, down)."""
    h = model.hidden_size
    gated = model.activation == "swiglu"
    ffn = model.ffn_size // tp
    fc1 = linear("mlp_fc1", tokens, h, (2 if gated else 1) * ffn, wb, layer)
    fc2 = linear("mlp_fc2", tokens, ffn, h, wb, layer)
    act_bytes = tokens * ffn * ACT_BYTES * (3 if gated else 2)
    forward = [fc1[0], memory_op("activation", "elementwise", "fwd", act_bytes, layer), fc2[0]]
    backward = [
        fc2[1],
        fc2[2],
        memory_op("activation_bwd", "elementwise", "bwd_input", 2 * act_bytes, layer),
        fc1[1],
        *_present(input_grad_comm),
        fc1[2],
    ]
    return forward, backward


def embedding_ops(model: ModelSpec, shard: Shard) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Forward and backward ops of the (vocabulary-parallel) input embedding."""
    tokens = shard.micro_batch_size * model.seq_length // shard.cp
    act = tokens * model.hidden_size * ACT_BYTES
    fwd: list[Op] = [memory_op("embedding", "embedding", "fwd", 2 * act, -1)]
    if shard.tp > 1:
        comm = "reduce_scatter" if shard.sp else "all_reduce"
        fwd.append(tp_comm(f"embedding_{comm}", comm, "fwd", act, -1))
    bwd = (memory_op("embedding_bwd", "embedding", "bwd_weight", 3 * act, -1),)
    return tuple(fwd), bwd


def head_ops(model: ModelSpec, shard: Shard) -> tuple[Op, ...]:
    """Final norm, LM head (vocabulary-parallel) and cross-entropy, forward then backward."""
    t = shard.tp
    tokens = shard.micro_batch_size * model.seq_length // shard.cp
    sp_tokens = tokens // t if shard.sp else tokens
    h, vocab = model.hidden_size, model.vocab_size // t
    wb = DTYPE_BYTES[shard.dtype]
    layer = model.num_layers  # the head comes after the last transformer layer
    act = tokens * h * ACT_BYTES
    ops: list[Op] = [memory_op("final_norm", "norm", "fwd", 2 * sp_tokens * h * ACT_BYTES, layer)]
    if t > 1 and shard.sp:
        ops.append(tp_comm("head_all_gather", "all_gather", "fwd", act, layer))
    head_f, head_d, head_w = linear("lm_head", tokens, h, vocab, wb, layer)
    # fp32 logits: written by the GEMM epilogue, read twice and written once by the loss.
    loss_bytes = tokens * vocab * 4 * 3
    ops += [
        head_f,
        memory_op("cross_entropy", "loss", "fwd", loss_bytes, layer),
        memory_op("cross_entropy_bwd", "loss", "bwd_input", loss_bytes, layer),
        head_d,
    ]
    if t > 1:
        comm = "reduce_scatter" if shard.sp else "all_reduce"
        ops.append(tp_comm(f"head_grad_{comm}", comm, "bwd_input", act, layer, overlap_ops=1))
    ops += [
        head_w,
        memory_op("final_norm_bwd", "norm", "bwd_input", 4 * sp_tokens * h * ACT_BYTES, layer),
    ]
    return tuple(ops)


def optimizer_op(num_params_local: float, optimizer: str) -> Op:
    """The optimizer update of ``num_params_local`` parameters on one rank (memory-bound).

    Mixed-precision Adam reads the fp32 gradient, master weight, momentum and variance
    (16 bytes), writes master weight, momentum and variance (12) and the 16-bit weight (2).
    """
    per_param = 30 if optimizer == "adam" else 14
    return memory_op(
        "optimizer_step",
        "optimizer",
        "optimizer",
        num_params_local * per_param,
        -1,
        flops=10.0 * num_params_local,
    )
