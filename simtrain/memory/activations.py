"""Activation memory: bytes per layer (Korthikanti et al. 2022) and microbatches in flight.

Per transformer layer and microbatch, with 16-bit activations and 1-byte dropout masks,
Korthikanti's Table 2 (``docs/references/training-runs.md`` §2.4; a heads, b microbatch,
t tensor-parallel degree):

=============================  ==========================================
no parallelism                 s·b·h·(34 + 5·a·s/h)
tensor parallel                s·b·h·(10 + 24/t + 5·a·s/(h·t))
tensor + sequence parallel     s·b·h·(34/t + 5·a·s/(h·t))
TP + selective recompute       s·b·h·(10 + 24/t)
TP + SP + selective recompute  s·b·h·34/t
full recompute                 s·b·h·2 (2·s·b·h/t with SP)
minimal recompute (GPT, TP+SP) s·b·h·(6 + 2·(3 + 4))/t = s·b·h·20/t
=============================  ==========================================

:func:`layer_activation_bytes` computes these from their parts, so that they generalise:
10·s·b·h are the tensors outside the tensor-parallel region (two norm inputs 4, the QKV and
MLP inputs 2 + 2, two dropout masks 1 + 1), sharded by t only under SP; inside it, Q and K
(2·h_q + 2·h_kv), V (2·h_kv), the output-projection input (2·h_q) and the MLP (GELU: 4·f for
the GELU input and the second GEMM input; SwiGLU: 6·f for gate, up and their product), which
give 24·s·b·h/t for GPT (h_q = h_kv = h, f = 4h); and the attention core 5·a·s²·b/t (softmax
output 2, its dropout mask 1, dropout output 2), dropped by selective recompute (and by flash
attention, which never stores it). Context parallelism divides the sequence by cp (each rank
keeps its s/cp queries' scores against all s keys). An MoE layer replaces the MLP term by
top-k routed experts (times the capacity factor) plus the shared experts, and stores the
dispatched copies of its tokens (2·s·b·h per routed expert).

The same parts generalise to the other architectures: a parallel block keeps one block
input and one (shared norm) or two normalised inputs instead of two of each; ReLU keeps
only its output (2·f), squared ReLU its input and output (4·f), GeGLU what SwiGLU keeps;
multi-head latent attention keeps its latents whole on every TP rank; FP8 training keeps
linear-layer inputs in 8 bits.

``minimal`` recomputation (MaxText's remat_policy "minimal", docs/references/tpu.md §7) keeps
only the layer input and the outputs of the weight matmuls: Q, K and V, the MLP's first
GEMM(s) (two for gated units) inside the tensor-parallel region, and the output projection
and second MLP GEMM (h each, outside it); norms, activation functions and the attention core
are recomputed from them. MoE and MLA layers are estimated as under selective recomputation
(an upper bound: it keeps the same matmul outputs and more).
"""

from __future__ import annotations

from simtrain.parallel.schedules.base import Action
from simtrain.specs.model import ModelSpec
from simtrain.workload.moe import expert_load_factor

ACT_BYTES = 2  # activations are kept in 16 bits
MASK_BYTES = 1  # dropout masks are bytes


def layer_activation_bytes(
    model: ModelSpec,
    micro_batch_size: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    cp: int = 1,
    moe_layer: bool = False,
    flash_attention: bool = False,
    fp8: bool = False,
) -> float:
    """Bytes one layer stores for one microbatch between its forward and its backward.

    Korthikanti's 5·a·s²·b term (softmax output, its dropout mask and the attention-dropout
    output) exists only for unfused attention: a flash kernel keeps no score matrix, like
    selective recomputation. Under FP8 training the inputs of linear layers are kept as
    their 8-bit (column-wise) copies, 1 byte instead of 2.

    Examples:
        GPT-3 175B shape (s=2048, h=12288, a=96), b=1, t=8 with SP and selective recompute:
        34·s·b·h/t bytes.

        >>> m = ModelSpec(num_layers=96, hidden_size=12288, num_heads=96, vocab_size=51200,
        ...               seq_length=2048)
        >>> layer_activation_bytes(m, 1, tp=8, sp=True, recompute="selective") == (
        ...     34 * 2048 * 12288 / 8)
        True
    """
    s, b, h = model.seq_length / cp, micro_batch_size, model.hidden_size
    sbh = s * b * h
    outside_tp = sp and tp > 1
    if recompute == "full":  # only each layer's input is kept
        return ACT_BYTES * sbh / (tp if outside_tp else 1)
    if recompute == "minimal" and not moe_layer and model.mla is None:
        # the layer input and the two row-parallel GEMM outputs; QKV and first-MLP outputs
        kv = model.kv_heads
        qkv = (model.num_heads + kv) * model.head_size + kv * model.v_head_size
        gated = model.activation not in ("relu", "gelu", "squared_relu")
        inside = qkv + (2 if gated else 1) * model.ffn_size
        return ACT_BYTES * (3 * sbh / (tp if outside_tp else 1) + s * b * inside / tp)
    gemm_in = 1 if fp8 else ACT_BYTES  # bytes of a stored linear-layer input
    masks = (2 if model.dropout else 0) * MASK_BYTES * sbh
    # norm inputs (the block input is shared by both norms of a parallel block) and the
    # normalised inputs of the two branches (one tensor when a parallel block shares a norm)
    if model.block == "parallel":
        replicated = ACT_BYTES * sbh + gemm_in * sbh * model.num_block_norms + masks
    else:
        replicated = 2 * ACT_BYTES * sbh + 2 * gemm_in * sbh + masks
    attention, unsharded = _attention_tensors(model, s * b, gemm_in)
    mlp = _mlp_tensors(model, s * b, gemm_in, moe_layer)
    sharded = attention + mlp
    if recompute != "selective" and not flash_attention:
        # softmax output (2 bytes), and with dropout its mask (1) and output (2)
        per_score = 5 if model.dropout else 2
        sharded += per_score * model.num_heads * s * model.seq_length * b
    return replicated / (tp if outside_tp else 1) + unsharded + sharded / tp


def _attention_tensors(model: ModelSpec, tokens: float, gemm_in: int) -> tuple[float, float]:
    """(TP-sharded, whole-on-every-rank) bytes the attention branch keeps for ``tokens``.

    Q and K (read by the score backward), V, and the output projection's input; under MLA
    also the latents the up-projections read and the norms' inputs (whole on every TP rank,
    as the down-projection is) and the shared rotary key.
    """
    heads, d_qk, d_v = model.num_heads, model.head_size, model.v_head_size
    mla = model.mla
    if mla is None:
        kv = model.kv_heads
        sharded = ACT_BYTES * ((heads + kv) * d_qk + kv * d_v) + gemm_in * heads * d_v
        return tokens * sharded, 0.0
    lora = mla.q_lora_rank + mla.kv_lora_rank
    unsharded = (ACT_BYTES + gemm_in) * lora + ACT_BYTES * mla.qk_rope_head_dim
    sharded = ACT_BYTES * heads * (2 * d_qk + d_v) + gemm_in * heads * d_v
    return tokens * sharded, tokens * unsharded


def _mlp_tensors(model: ModelSpec, tokens: float, gemm_in: int, moe_layer: bool) -> float:
    """Bytes the MLP (or experts) keeps for ``tokens``, before the TP split.

    Per hidden unit f: GELU and squared ReLU keep their input (16-bit) and fc2's input;
    ReLU only fc2's input (its output, whose sign is the gradient mask); gated units keep
    the gate and up outputs (16-bit) and their product (fc2's input). Experts add the
    dispatched copies of their tokens (fc1's input).
    """
    per_unit = gemm_in + {"relu": 0, "gelu": 1, "squared_relu": 1}.get(model.activation, 2) * (
        ACT_BYTES
    )
    if not moe_layer:
        return tokens * per_unit * model.ffn_size
    routed = model.moe_top_k * expert_load_factor(model)
    experts = routed + model.num_shared_experts
    return tokens * (
        per_unit * model.expert_ffn_size * experts + gemm_in * model.hidden_size * routed
    )


def peak_inflight(actions: list[Action], stages: set[int] | None = None) -> int:
    """Most (stage, microbatch) pairs of one rank whose F ran and whose B has not.

    The order of a rank's actions alone fixes this count (the engine's timings give the same
    peak: a rank's next forward starts only after its previous action ends).

    Examples:
        >>> from simtrain.parallel.schedules import build_schedule
        >>> [peak_inflight(acts) for acts in build_schedule("1f1b", 4, 8).values()]
        [4, 3, 2, 1]
    """
    count = peak = 0
    for a in actions:
        if stages is not None and a.stage not in stages:
            continue
        if a.kind == "F":
            count += 1
            peak = max(peak, count)
        elif a.kind == "B":
            count -= 1
    return peak
