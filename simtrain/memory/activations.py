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

``per_op`` recomputation (torchtitan's per-operator selective checkpointing) keeps the layer
input and the outputs of the operators its policy saves: Q and V (the first and third
projections), the attention output, the MLP gate (w1) and the down projection (w2, outside the
tensor-parallel region); the rest re-runs from them.

``selective`` recomputation drops, per submodule named in ``parallel.recompute_modules``
(Megatron-Core's ``--recompute-modules``; :data:`DROPPED_BY`), the parts that submodule's
forward recreates in the backward from what stays kept: ``core_attn`` the attention scores
(Korthikanti's selective recomputation, the default); ``layernorm`` the two norm outputs
(their inputs stay); ``mla_up_proj`` the normalised latents and the queries, keys and values
(the latents stay); ``mlp`` a dense MLP's activation input and output; ``moe_act`` the routed
experts' activation output (fc2's input; fc1's output stays); ``shared_experts`` the shared
experts' activation input and output; ``moe`` every expert part, dispatched tokens included.
Removing a module from the list adds back exactly its parts.
"""

from __future__ import annotations

from simtrain.parallel.schedules.base import Action
from simtrain.specs.model import ModelSpec
from simtrain.workload.moe import expert_load_factor

ACT_BYTES = 2  # activations are kept in 16 bits
MASK_BYTES = 1  # dropout masks are bytes


DROPPED_BY: dict[str, tuple[str, ...]] = {
    "core_attn": ("attention_scores",),
    "layernorm": ("norm_outputs",),
    "mla_up_proj": ("mla_latent_norm_outputs", "attention_qkv"),
    "mlp": ("mlp_act_inputs", "mlp_act_outputs"),
    "moe_act": ("expert_act_outputs",),
    "shared_experts": ("shared_act_inputs", "shared_act_outputs"),
    "moe": (
        "expert_inputs",
        "expert_act_inputs",
        "expert_act_outputs",
        "shared_act_inputs",
        "shared_act_outputs",
    ),
}
"""The parts of :func:`layer_activation_parts` each selective recompute module drops."""


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
    modules: frozenset[str] | None = None,
    fp8_act_input: bool = False,
    gathered_inputs: bool = False,
) -> float:
    """Bytes one layer stores for one microbatch between its forward and its backward.

    The sum of :func:`layer_activation_parts` (same arguments).

    Examples:
        GPT-3 175B shape (s=2048, h=12288, a=96), b=1, t=8 with SP and selective recompute:
        34·s·b·h/t bytes.

        >>> m = ModelSpec(num_layers=96, hidden_size=12288, num_heads=96, vocab_size=51200,
        ...               seq_length=2048)
        >>> layer_activation_bytes(m, 1, tp=8, sp=True, recompute="selective") == (
        ...     34 * 2048 * 12288 / 8)
        True
    """
    parts = layer_activation_parts(
        model, micro_batch_size, tp, sp, recompute, cp, moe_layer, flash_attention, fp8,
        modules, fp8_act_input, gathered_inputs,
    )  # fmt: skip
    return sum(parts.values())


def layer_activation_parts(
    model: ModelSpec,
    micro_batch_size: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    cp: int = 1,
    moe_layer: bool = False,
    flash_attention: bool = False,
    fp8: bool = False,
    modules: frozenset[str] | None = None,
    fp8_act_input: bool = False,
    gathered_inputs: bool = False,
) -> dict[str, float]:
    """Bytes one layer stores for one microbatch on one rank, by named part.

    Korthikanti's 5·a·s²·b term (``attention_scores``: softmax output, its dropout mask and
    the attention-dropout output) exists only for unfused attention: a flash kernel keeps no
    score matrix. Under FP8 training the inputs of linear layers are kept as their 8-bit
    (column-wise) copies, 1 byte instead of 2 (for the experts' inputs, the FP8 tokens the
    dispatch delivered); with ``fp8_act_input`` the SwiGLU inputs too.

    ``selective`` recomputation drops the parts of each module in ``modules``
    (:data:`DROPPED_BY`; None means ``{"core_attn"}``, Korthikanti's selective
    recomputation): the module's forward re-runs in the backward from what is still kept.

    Args:
        model: the model.
        micro_batch_size: sequences per microbatch (b).
        tp: tensor-parallel degree (t).
        sp: sequence parallelism (the parts outside the tensor-parallel region split by t).
        recompute: ``none``, ``selective``, ``minimal``, ``per_op`` or ``full``.
        cp: context-parallel degree (the sequence split by cp).
        moe_layer: the layer's MLP is a mixture of experts.
        flash_attention: a fused attention kernel (no score matrix).
        fp8: FP8 training (8-bit copies of linear-layer inputs).
        modules: selective recompute modules (only with ``recompute="selective"``).
        fp8_act_input: SwiGLU inputs kept in FP8.
        gathered_inputs: under SP, the column-parallel linears keep their all-gathered
            (whole-sequence) input rather than their shard (PyTorch DTensor TP): the two
            normalised inputs count s·b·h each instead of s·b·h/t.
    """
    s, b, h = model.seq_length / cp, micro_batch_size, model.hidden_size
    sbh = s * b * h
    rep = tp if sp and tp > 1 else 1  # what divides the parts outside the TP region
    if recompute == "full":  # only each layer's input is kept
        return {"layer_input": ACT_BYTES * sbh / rep}
    if recompute == "minimal" and not moe_layer and model.mla is None:
        # the layer input and the two row-parallel GEMM outputs; QKV and first-MLP outputs
        kv = model.kv_heads
        qkv = (model.num_heads + kv) * model.head_size + kv * model.v_head_size
        gated = model.activation not in ("relu", "gelu", "squared_relu")
        inside = qkv + (2 if gated else 1) * model.ffn_size
        return {"matmul_outputs": ACT_BYTES * (3 * sbh / rep + s * b * inside / tp)}
    if recompute == "per_op":
        # layer input and w2's output (h each, outside the TP region); Q, V, the attention
        # output and w1's output inside it
        heads, kv, d = model.num_heads, model.kv_heads, model.head_size
        inside = 2 * heads * d + kv * model.v_head_size + model.ffn_size
        return {"saved_outputs": ACT_BYTES * (2 * sbh / rep + s * b * inside / tp)}
    gemm_in = 1 if fp8 else ACT_BYTES  # bytes of a stored linear-layer input
    # norm inputs (the block input is shared by both norms of a parallel block) and the
    # normalised inputs of the two branches (one tensor when a parallel block shares a norm)
    parallel = model.block == "parallel"
    parts = {
        "norm_inputs": (1 if parallel else 2) * ACT_BYTES * sbh / rep,
        "norm_outputs": (model.num_block_norms if parallel else 2)
        * gemm_in
        * sbh
        / (1 if gathered_inputs else rep),
    }
    if model.dropout:
        parts["dropout_masks"] = 2 * MASK_BYTES * sbh / rep
    parts |= _attention_parts(model, s * b, gemm_in, tp)
    act_in = 1 if fp8_act_input else ACT_BYTES
    parts |= _mlp_parts(model, s * b, gemm_in, act_in, moe_layer, tp)
    if not flash_attention:
        # softmax output (2 bytes), and with dropout its mask (1) and output (2)
        per_score = 5 if model.dropout else 2
        parts["attention_scores"] = per_score * model.num_heads * s * model.seq_length * b / tp
    if recompute == "selective":
        dropped = modules if modules is not None else frozenset({"core_attn"})
    elif recompute == "minimal":  # MoE and MLA layers: estimated as under selective
        dropped = frozenset({"core_attn"})
    else:
        dropped = frozenset()
    for module in dropped:
        if module == "mla_up_proj" and model.mla is None:
            continue
        for part in DROPPED_BY[module]:
            parts.pop(part, None)
    return parts


def _attention_parts(model: ModelSpec, tokens: float, gemm_in: int, tp: int) -> dict[str, float]:
    """Bytes the attention branch keeps for ``tokens`` on one rank, by part.

    Q and K (read by the score backward) and V, split over TP by heads, and the output
    projection's input; under MLA also the latents (the latent norms' inputs) with the shared
    rotary key, and the normalised latents the up-projections read, whole on every TP rank
    (as the down-projection is).
    """
    heads, d_qk, d_v = model.num_heads, model.head_size, model.v_head_size
    output = {"attention_output": tokens * gemm_in * heads * d_v / tp}
    mla = model.mla
    if mla is None:
        kv = model.kv_heads
        qkv = ACT_BYTES * ((heads + kv) * d_qk + kv * d_v)
        return {"attention_qkv": tokens * qkv / tp} | output
    lora = mla.q_lora_rank + mla.kv_lora_rank
    return {
        "mla_latents": tokens * ACT_BYTES * (lora + mla.qk_rope_head_dim),
        "mla_latent_norm_outputs": tokens * gemm_in * lora,
        "attention_qkv": tokens * ACT_BYTES * heads * (2 * d_qk + d_v) / tp,
    } | output


def _mlp_parts(
    model: ModelSpec, tokens: float, gemm_in: int, act_in: int, moe_layer: bool, tp: int
) -> dict[str, float]:
    """Bytes the MLP (or experts) keeps for ``tokens`` on one rank, by part.

    Per hidden unit f, the activation function's input: GELU and squared ReLU their input
    (16-bit), gated units the gate and up outputs (``act_in`` bytes each), ReLU nothing (its
    output's sign is the gradient mask); and its output, fc2's input. Experts add the
    dispatched copies of their tokens (fc1's input); shared experts read the normalised
    input the norm already keeps.
    """
    act_units = {"relu": 0, "gelu": 1, "squared_relu": 1}.get(model.activation, 2)
    unit_in = act_units * (act_in if model.is_gated else ACT_BYTES)
    if not moe_layer:
        width = tokens * model.ffn_size / tp
        return {"mlp_act_inputs": width * unit_in, "mlp_act_outputs": width * gemm_in}
    routed = model.moe_top_k * expert_load_factor(model)
    width = tokens * model.expert_ffn_size / tp
    parts = {
        "expert_inputs": tokens * gemm_in * model.hidden_size * routed / tp,
        "expert_act_inputs": width * unit_in * routed,
        "expert_act_outputs": width * gemm_in * routed,
    }
    if model.num_shared_experts:
        shared = model.num_shared_experts
        parts["shared_act_inputs"] = width * unit_in * shared
        parts["shared_act_outputs"] = width * gemm_in * shared
    return parts


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
