"""The two branches of a transformer block as ops: attention (MHA/GQA/MQA or MLA) and MLP.

A branch is what runs between the tensor-parallel entry of a block (its normalised input,
gathered over the TP group under sequence parallelism) and its exit (a row-parallel output
holding partial sums, reduced over the TP group). :mod:`simtrain.workload.transformer`
composes branches into a serial block (attention, reduce, MLP, reduce) or a parallel block
(both branches on one input, one reduction of their sum).

Attention covers multi-head, grouped-query and multi-query attention with rotary embedding
on a fraction of each head (``rope`` ops read and write the rotated dimensions of Q and K),
ALiBi (bias bytes in the attention core, no rotary ops), sliding windows, and multi-head
latent attention (DeepSeek-V2/V3, :func:`mla_branch`).
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.specs.model import ModelSpec
from simtrain.workload import eager
from simtrain.workload.attention import HeadShape, context_parallel_attention
from simtrain.workload.linear import linear_layer
from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES, collective, memory_op
from simtrain.workload.shard import Shard


@dataclass(frozen=True)
class Branch:
    """One branch of a block for one microbatch on one rank.

    Attributes:
        forward: ops from the branch input to its row-parallel output (TP partial sums).
        backward: ops from the output gradient down to the input projection's input gradient.
        weight_tail: the input projection's weight-gradient GEMMs; they run while the input
            gradient is reduced over the TP group (Megatron's asynchronous TP backward).
        core: forward ops that selective recomputation re-runs (the attention core).
        gathers_input: whether the branch needs its input whole over the TP group (an
            all-gather under sequence parallelism, and a reduction of the input gradient);
            MLA's down-projection runs on the rank's own tokens instead.
        tp_local: the branch runs on the rank's own (sequence-parallel) tokens and issues its
            own collectives, so the block adds no tensor-parallel entry or exit for it (an
            MoE layer under sequence parallelism).
    """

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    weight_tail: tuple[Op, ...]
    core: tuple[Op, ...] = ()
    gathers_input: bool = True
    tp_local: bool = False


@dataclass(frozen=True)
class Tokens:
    """Token counts of one microbatch on one rank.

    Attributes:
        seq: sequence positions on the rank (seq_length / cp).
        full: tokens inside the TP region (b · seq).
        local: tokens outside it (full / tp under sequence parallelism, else full).
    """

    seq: int
    full: int
    local: int

    @classmethod
    def of(cls, model: ModelSpec, shard: Shard) -> Tokens:
        """Tokens of one microbatch of ``model`` on a rank cut by ``shard``."""
        seq = model.seq_length // shard.cp
        full = shard.micro_batch_size * seq
        return cls(seq, full, full // shard.tp if shard.sp and shard.tp > 1 else full)


def _rope(
    model: ModelSpec, tokens: int, q_heads: int, k_heads: int, layer: int, eager_rope: bool = False
) -> list[Op]:
    """Rotary embedding: read and write the rotated dimensions of the rank's Q and K heads.

    Eager (torchtitan's complex-number rotation): upcast, complex multiply and cast back
    (:data:`simtrain.workload.eager.ROPE_BYTES` per rotated element).
    """
    if model.rotary_dim == 0:
        return []
    elements = tokens * (q_heads + k_heads) * model.rotary_dim
    size = elements * (eager.ROPE_BYTES if eager_rope else 2 * ACT_BYTES)
    return [memory_op("rope", "elementwise", "fwd", size, layer)]


def _rope_bwd(rope: list[Op]) -> list[Op]:
    return [
        memory_op("rope_bwd", "elementwise", "bwd_input", op.bytes_accessed, op.layer)
        for op in rope
    ]


def _head_shape(model: ModelSpec, shard: Shard, heads: int, kv_heads: int) -> HeadShape:
    return HeadShape(
        heads=heads,
        kv_heads=kv_heads,
        d_qk=model.head_size,
        d_v=model.v_head_size,
        window=model.sliding_window or 0,
        alibi=model.position_embedding == "alibi",
        dropout=model.dropout,
        dtype=shard.high_dtype,
    )


def attention_branch(model: ModelSpec, shard: Shard, layer: int) -> Branch:
    """Multi-head, grouped-query or multi-query attention: fused QKV, core, output projection."""
    t, tok = shard.tp, Tokens.of(model, shard)
    h, d = model.hidden_size, model.head_size
    heads, kv = model.num_heads // t, max(1, model.kv_heads // t)
    qkv = linear_layer("qkv", tok.full, h, (heads + 2 * kv) * d, shard, layer)
    out = linear_layer("attn_out", tok.full, heads * d, h, shard, layer)
    core_f, core_b = context_parallel_attention(
        shard.attention,
        shard.cp_algorithm,
        shard.cp,
        shard.micro_batch_size,
        _head_shape(model, shard, heads, kv),
        tok.seq,
        layer,
    )
    eager_ops = shard.eager == "all"
    rope = _rope(model, tok.full, heads, kv, layer, eager_ops)
    expand: list[Op] = []
    expand_bwd: list[Op] = []
    grad_sum: list[Op] = []
    if eager_ops:
        # torchtitan: repeat_kv copies keys and values to every query head; the separate
        # wq, wk and wv take the same input, whose gradient autograd sums (two adds).
        size = eager.kv_expand_bytes(tok.full, heads * d, kv * d)
        if size:
            expand = [memory_op("repeat_kv", "elementwise", "fwd", size, layer)]
            expand_bwd = [memory_op("repeat_kv_bwd", "elementwise", "bwd_input", size, layer)]
        sum_bytes = 2 * eager.GRAD_SUM_BYTES * tok.full * h
        grad_sum = [memory_op("qkv_grad_sum", "elementwise", "bwd_input", sum_bytes, layer)]
    core = (*rope, *expand, *core_f)
    return Branch(
        forward=(*qkv.forward, *core, *out.forward),
        backward=(
            *out.dgrad,
            out.wgrad,
            *core_b,
            *expand_bwd,
            *_rope_bwd(rope),
            *qkv.dgrad,
            *grad_sum,
        ),
        weight_tail=(qkv.wgrad,),
        core=core,
    )


def mla_branch(model: ModelSpec, shard: Shard, layer: int) -> Branch:
    """Multi-head latent attention (DeepSeek-V2/V3) on one rank.

    The down-projection to the query latent, the KV latent and the shared rotary key
    (h -> q_lora + kv_lora + rope) is held whole by every TP rank (Megatron-Core runs it
    duplicated) and applied to the rank's own tokens: under sequence parallelism to its
    sequence shard, whose latents are then all-gathered (far fewer bytes than gathering the
    h-wide input); without it, to every token (each TP rank repeats it). The latents are
    normalised, then up-projected column-parallel by heads to queries (nope + rope parts),
    keys (nope) and values; the rotary key is shared by all heads. Backward, the latent
    gradients are partial sums over the TP group: reduce-scattered (SP) or all-reduced before
    the down-projection's gradients, while the up-projections' weight gradients run.
    """
    mla = model.mla
    if mla is None:
        raise ValueError("mla_branch needs a model with multi-head latent attention")
    t, tok = shard.tp, Tokens.of(model, shard)
    h, heads = model.hidden_size, model.num_heads // t
    d_qk, d_v = model.head_size, model.v_head_size
    latent = mla.q_lora_rank + mla.kv_lora_rank + mla.qk_rope_head_dim
    down = linear_layer("mla_down", tok.local, h, latent, shard, layer)
    q_up = linear_layer("mla_q_up", tok.full, mla.q_lora_rank, heads * d_qk, shard, layer)
    kv_width = heads * (mla.qk_nope_head_dim + d_v)
    kv_up = linear_layer("mla_kv_up", tok.full, mla.kv_lora_rank, kv_width, shard, layer)
    out = linear_layer("attn_out", tok.full, heads * d_v, h, shard, layer)
    norm_bytes = 2 * tok.full * (mla.q_lora_rank + mla.kv_lora_rank) * ACT_BYTES
    latent_bytes = tok.full * latent * ACT_BYTES
    gather: list[Op] = []
    grad_comm: list[Op] = []
    if t > 1:
        up_wgrads = 2  # the latent gradient is reduced while both up-projection wgrads run
        if shard.sp:
            gather = [
                collective("mla_latent_all_gather", "all_gather", "tp", "fwd", latent_bytes, layer)
            ]
            grad_comm = [
                collective(
                    "mla_latent_grad_reduce_scatter",
                    "reduce_scatter",
                    "tp",
                    "bwd_input",
                    latent_bytes,
                    layer,
                    overlap_ops=up_wgrads,
                )
            ]
        else:
            grad_comm = [
                collective(
                    "mla_latent_grad_all_reduce",
                    "all_reduce",
                    "tp",
                    "bwd_input",
                    latent_bytes,
                    layer,
                    overlap_ops=up_wgrads,
                )
            ]
    core_f, core_b = context_parallel_attention(
        shard.attention,
        shard.cp_algorithm,
        shard.cp,
        shard.micro_batch_size,
        _head_shape(model, shard, heads, heads),
        tok.seq,
        layer,
    )
    rope = _rope(model, tok.full, heads, 1, layer)  # every head's rope query, one shared key
    core = (*rope, *core_f)
    forward = (
        *down.forward,
        *gather,
        memory_op("mla_latent_norm", "norm", "fwd", norm_bytes, layer),
        *q_up.forward,
        *kv_up.forward,
        *core,
        *out.forward,
    )
    backward = (
        *out.dgrad,
        out.wgrad,
        *core_b,
        *_rope_bwd(rope),
        *kv_up.dgrad,
        *q_up.dgrad,
        memory_op("mla_latent_norm_bwd", "norm", "bwd_input", 2 * norm_bytes, layer),
        *grad_comm,
        kv_up.wgrad,
        q_up.wgrad,
        *down.dgrad,
        down.wgrad,
    )
    return Branch(forward, backward, (), core, gathers_input=False)


def activation_bytes(model: ModelSpec, tokens: int, ffn: int) -> float:
    """Bytes the MLP activation reads and writes forward.

    f values in and f out (2·f 16-bit values per token), or gate and up in and their product
    out when gated (3·f).
    """
    return tokens * ffn * ACT_BYTES * (3 if model.is_gated else 2)


def mlp_branch(model: ModelSpec, shard: Shard, layer: int) -> Branch:
    """A dense MLP: fc1 (gate and up fused when gated), activation, fc2."""
    t, tok = shard.tp, Tokens.of(model, shard)
    h, ffn = model.hidden_size, model.ffn_size // t
    fc1 = linear_layer("mlp_fc1", tok.full, h, (2 if model.is_gated else 1) * ffn, shard, layer)
    fc2 = linear_layer("mlp_fc2", tok.full, ffn, h, shard, layer)
    act = activation_bytes(model, tok.full, ffn)
    act_bwd = 2 * act
    grad_sum: list[Op] = []
    if shard.eager == "all" and model.is_gated:
        # torchtitan's w2(silu(w1(x)) * w3(x)): separate kernels, and w1 and w3 take the
        # same input, whose gradient autograd sums (one add).
        act = tok.full * ffn * eager.SWIGLU_FWD_BYTES
        act_bwd = tok.full * ffn * eager.SWIGLU_BWD_BYTES
        sum_bytes = eager.GRAD_SUM_BYTES * tok.full * h
        grad_sum = [memory_op("mlp_fc1_grad_sum", "elementwise", "bwd_input", sum_bytes, layer)]
    return Branch(
        forward=(
            *fc1.forward,
            memory_op("activation", "elementwise", "fwd", act, layer),
            *fc2.forward,
        ),
        backward=(
            *fc2.dgrad,
            fc2.wgrad,
            memory_op("activation_bwd", "elementwise", "bwd_input", act_bwd, layer),
            *fc1.dgrad,
            *grad_sum,
        ),
        weight_tail=(fc1.wgrad,),
    )
