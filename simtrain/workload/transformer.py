"""Operator sequences of a transformer under Megatron-style tensor and sequence parallelism.

For one microbatch on one rank this module lists, in execution order, the forward ops of a
layer, its backward ops (input gradient and weight gradient split, as zero-bubble schedules
need), and the ops of the embedding, the LM head with its loss, and the optimizer step.
Tensor-parallel collectives appear inline as ops of kind ``collective`` on axis ``tp``:

- without sequence parallelism, an all-reduce of the activations after the attention output
  projection and after the second MLP GEMM (forward), and of the input gradients of the QKV
  and first MLP GEMMs (backward);
- with sequence parallelism, those become reduce-scatters, and an all-gather precedes the
  QKV and first MLP GEMMs (forward); backward swaps the two.

A GEMM of output M x N and reduction K costs 2*M*N*K FLOPs; its backward costs the same for
the input gradient (M x K = dY @ W^T) and for the weight gradient (K x N = X^T @ dY).
Elementwise ops are memory-bound: their cost is the bytes they read and write.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.specs.model import ModelSpec
from simtrain.workload.attention import attention_core
from simtrain.workload.ops import Op

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
ACT_BYTES = 2  # activations and their gradients are kept in 16 bits (also under fp8 GEMMs)


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
    """

    micro_batch_size: int
    tp: int = 1
    sp: bool = False
    cp: int = 1
    ep: int = 1
    dtype: str = "bf16"
    attention: str = "flash"


def gemm(
    name: str, phase: str, m: int, n: int, k: int, dtype_bytes: int, layer: int, batch: int = 1
) -> Op:
    """A GEMM op with FLOPs 2*M*N*K*batch and bytes for reading A, B and writing C."""
    return Op(
        name=name,
        kind="gemm",
        phase=phase,  # type: ignore[arg-type]
        flops=2.0 * m * n * k * batch,
        bytes_accessed=float(batch * (dtype_bytes * (m * k + k * n) + ACT_BYTES * m * n)),
        m=m,
        n=n,
        k=k,
        batch=batch,
        layer=layer,
    )


def linear(
    name: str, tokens: int, n_in: int, n_out: int, dtype_bytes: int, layer: int, batch: int = 1
) -> tuple[Op, Op, Op]:
    """Forward, input-gradient and weight-gradient GEMMs of a linear layer y = x @ W."""
    return (
        gemm(name, "fwd", tokens, n_out, n_in, dtype_bytes, layer, batch),
        gemm(f"{name}_dgrad", "bwd_input", tokens, n_in, n_out, dtype_bytes, layer, batch),
        gemm(f"{name}_wgrad", "bwd_weight", n_in, n_out, tokens, dtype_bytes, layer, batch),
    )


def memory_op(
    name: str, kind: str, phase: str, bytes_accessed: float, layer: int, flops: float = 0.0
) -> Op:
    """A memory-bound op (norm, activation, dropout, residual...)."""
    return Op(
        name=name,
        kind=kind,
        phase=phase,
        flops=flops,  # type: ignore[arg-type]
        bytes_accessed=float(bytes_accessed),
        layer=layer,
    )


def tp_comm(name: str, comm: str, phase: str, size_bytes: float, layer: int) -> Op:
    """A tensor-parallel collective (nccl-tests size convention)."""
    return Op(
        name=name,
        kind="collective",
        phase=phase,  # type: ignore[arg-type]
        comm=comm,
        axis="tp",
        comm_bytes=float(size_bytes),
        layer=layer,
    )


@dataclass(frozen=True)
class LayerOps:
    """Ops of one transformer layer for one microbatch on one rank.

    Attributes:
        forward: forward ops in execution order (TP collectives inline).
        backward: backward ops in execution order (input gradients, each followed by the
            weight gradient it can overlap with).
        attention_core: the forward ops that selective recomputation re-runs.
    """

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    attention_core: tuple[Op, ...]


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
    fwd: list[Op] = []
    bwd: list[Op] = []

    def region_entry(tag: str) -> tuple[Op | None, Op | None]:
        """Forward/backward comm at the entry of a TP region (f operator; SP all-gather)."""
        if t == 1:
            return None, None
        if shard.sp:
            return (
                tp_comm(f"{tag}_all_gather", "all_gather", "fwd", act, layer),
                tp_comm(f"{tag}_grad_reduce_scatter", "reduce_scatter", "bwd_input", act, layer),
            )
        return None, tp_comm(f"{tag}_grad_all_reduce", "all_reduce", "bwd_input", act, layer)

    def region_exit(tag: str) -> tuple[Op | None, Op | None]:
        """Forward/backward comm at the exit of a TP region (g operator; SP reduce-scatter)."""
        if t == 1:
            return None, None
        if shard.sp:
            return (
                tp_comm(f"{tag}_reduce_scatter", "reduce_scatter", "fwd", act, layer),
                tp_comm(f"{tag}_grad_all_gather", "all_gather", "bwd_input", act, layer),
            )
        return tp_comm(f"{tag}_all_reduce", "all_reduce", "fwd", act, layer), None

    norm_bytes = 2 * sp_tokens * h * ACT_BYTES
    # bias + dropout + residual add: read two tensors, write one, write a 1-byte mask.
    bda_bytes = sp_tokens * h * (3 * ACT_BYTES + 1)

    # --- attention block ---
    fwd.append(memory_op("norm1", "norm", "fwd", norm_bytes, layer))
    entry_f, entry_b = region_entry("attn")
    qkv_f, qkv_d, qkv_w = linear("qkv", tokens, h, (heads + 2 * kv) * d, wb, layer)
    if entry_f:
        fwd.append(entry_f)
    fwd.append(qkv_f)
    core: list[Op] = []
    if model.position_embedding == "rope":
        core.append(
            memory_op(
                "rope", "elementwise", "fwd", 2 * tokens * (heads + kv) * d * ACT_BYTES, layer
            )
        )
    qkv_bytes = tokens * (heads + 2 * kv) * d * ACT_BYTES
    core_fwd, core_bwd = attention_core(
        shard.attention, b * heads, s, s * shard.cp, d, qkv_bytes, layer
    )
    core.extend(core_fwd)
    fwd.extend(core)
    out_f, out_d, out_w = linear("attn_out", tokens, heads * d, h, wb, layer)
    fwd.append(out_f)
    exit_f, exit_b = region_exit("attn")
    if exit_f:
        fwd.append(exit_f)
    fwd.append(memory_op("bias_dropout_add1", "elementwise", "fwd", bda_bytes, layer))

    # --- MLP block (dense or experts) ---
    fwd.append(memory_op("norm2", "norm", "fwd", norm_bytes, layer))
    mlp_fwd, mlp_bwd = _mlp_ops(model, shard, layer, tokens, wb)
    entry2_f, entry2_b = region_entry("mlp")
    exit2_f, exit2_b = region_exit("mlp")
    if entry2_f:
        fwd.append(entry2_f)
    fwd.extend(mlp_fwd)
    if exit2_f:
        fwd.append(exit2_f)
    fwd.append(memory_op("bias_dropout_add2", "elementwise", "fwd", bda_bytes, layer))

    # --- backward, reverse order; each dgrad is followed by its wgrad so that a TP
    # collective on the dgrad's output can overlap the wgrad (Megatron's async TP comm) ---
    bwd.append(memory_op("bias_dropout_add2_bwd", "elementwise", "bwd_input", bda_bytes, layer))
    if exit2_b:
        bwd.append(exit2_b)
    bwd.extend(mlp_bwd)
    if entry2_b:
        bwd.append(entry2_b)
    bwd.append(memory_op("norm2_bwd", "norm", "bwd_input", 2 * norm_bytes, layer))
    bwd.append(memory_op("bias_dropout_add1_bwd", "elementwise", "bwd_input", bda_bytes, layer))
    if exit_b:
        bwd.append(exit_b)
    bwd.extend([out_d, out_w])
    bwd.extend(core_bwd)
    if model.position_embedding == "rope":
        bwd.append(memory_op("rope_bwd", "elementwise", "bwd_input", core[0].bytes_accessed, layer))
    bwd.append(qkv_d)
    if entry_b:
        bwd.append(entry_b)
    bwd.append(qkv_w)
    bwd.append(memory_op("norm1_bwd", "norm", "bwd_input", 2 * norm_bytes, layer))
    return LayerOps(tuple(fwd), tuple(bwd), tuple(core))


def _mlp_ops(
    model: ModelSpec, shard: Shard, layer: int, tokens: int, wb: int
) -> tuple[list[Op], list[Op]]:
    """Forward and backward ops of the MLP of ``layer``: dense, or router + experts."""
    h, t = model.hidden_size, shard.tp
    gated = model.activation == "swiglu"
    fwd: list[Op] = []
    bwd: list[Op] = []
    if not model.is_moe_layer(layer):
        ffn = model.ffn_size // t
        fc1 = linear("mlp_fc1", tokens, h, (2 if gated else 1) * ffn, wb, layer)
        fc2 = linear("mlp_fc2", tokens, ffn, h, wb, layer)
        act_bytes = tokens * ffn * ACT_BYTES * (3 if gated else 2)
        fwd += [fc1[0], memory_op("activation", "elementwise", "fwd", act_bytes, layer), fc2[0]]
        bwd += [
            fc2[1],
            fc2[2],
            memory_op("activation_bwd", "elementwise", "bwd_input", 2 * act_bytes, layer),
            fc1[1],
            fc1[2],
        ]
        return fwd, bwd

    # Mixture of experts: router, dispatch all-to-all over ep, grouped expert GEMMs, combine.
    ffn = model.expert_ffn_size // t
    local_experts = model.num_experts // shard.ep
    routed_tokens = tokens * model.moe_top_k * model.moe_capacity_factor
    per_expert = max(1, round(routed_tokens / model.num_experts * shard.ep))
    router = linear("router", tokens, h, model.num_experts, 4, layer)
    a2a_bytes = routed_tokens * h * ACT_BYTES
    fwd += [
        router[0],
        memory_op("router_topk", "elementwise", "fwd", tokens * model.num_experts * 4 * 2, layer),
    ]
    bwd_tail = [router[1], router[2]]
    if shard.ep > 1:
        fwd.append(
            Op(
                name="moe_dispatch",
                kind="collective",
                phase="fwd",
                comm="all_to_all",
                axis="ep",
                comm_bytes=a2a_bytes,
                layer=layer,
            )
        )
    fc1 = linear(
        "expert_fc1", per_expert, h, (2 if gated else 1) * ffn, wb, layer, batch=local_experts
    )
    fc2 = linear("expert_fc2", per_expert, ffn, h, wb, layer, batch=local_experts)
    act_bytes = per_expert * local_experts * ffn * ACT_BYTES * (3 if gated else 2)
    fwd += [fc1[0], memory_op("expert_activation", "elementwise", "fwd", act_bytes, layer), fc2[0]]
    if model.num_shared_experts:
        sffn = model.expert_ffn_size * model.num_shared_experts // t
        s1 = linear("shared_fc1", tokens, h, (2 if gated else 1) * sffn, wb, layer)
        s2 = linear("shared_fc2", tokens, sffn, h, wb, layer)
        fwd += [s1[0], s2[0]]
        bwd_shared = [s2[1], s2[2], s1[1], s1[2]]
    else:
        bwd_shared = []
    if shard.ep > 1:
        fwd.append(
            Op(
                name="moe_combine",
                kind="collective",
                phase="fwd",
                comm="all_to_all",
                axis="ep",
                comm_bytes=a2a_bytes,
                layer=layer,
            )
        )
        bwd.append(
            Op(
                name="moe_combine_bwd",
                kind="collective",
                phase="bwd_input",
                comm="all_to_all",
                axis="ep",
                comm_bytes=a2a_bytes,
                layer=layer,
            )
        )
    bwd += [
        fc2[1],
        fc2[2],
        memory_op("expert_activation_bwd", "elementwise", "bwd_input", 2 * act_bytes, layer),
        fc1[1],
        fc1[2],
    ]
    if shard.ep > 1:
        bwd.append(
            Op(
                name="moe_dispatch_bwd",
                kind="collective",
                phase="bwd_input",
                comm="all_to_all",
                axis="ep",
                comm_bytes=a2a_bytes,
                layer=layer,
            )
        )
    bwd += bwd_shared + bwd_tail
    return fwd, bwd


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
        ops.append(tp_comm(f"head_grad_{comm}", comm, "bwd_input", act, layer))
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
