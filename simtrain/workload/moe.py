"""The MLP of a mixture-of-experts layer: router, all-to-all dispatch, grouped experts, combine.

Each rank routes its tokens to ``top_k`` of ``num_experts`` experts. With expert parallelism
``ep``, every rank holds ``num_experts / ep`` experts; tokens travel to their experts' ranks by
an all-to-all over the ep group (dispatch) and back (combine), in the forward and again,
reversed, in the backward. The experts of a rank run as one grouped GEMM. The busiest rank
sets the pace: its tokens per expert are the mean times the token-imbalance factor, capped
by the capacity factor when tokens beyond capacity are dropped.
"""

from __future__ import annotations

from simtrain.specs.model import ModelSpec
from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES, collective, linear, memory_op


def expert_load_factor(model: ModelSpec) -> float:
    """Busiest expert's load relative to the balanced one: imbalance, capped by capacity."""
    load = model.moe_token_imbalance
    if model.moe_capacity_factor is not None:
        load = min(load, model.moe_capacity_factor)
    return load


def routed_tokens_per_expert(model: ModelSpec, tokens: int, ep: int) -> int:
    """Tokens the busiest expert of a rank processes for ``tokens`` local tokens.

    Examples:
        >>> m = ModelSpec(num_layers=1, hidden_size=64, num_heads=4, vocab_size=10,
        ...               seq_length=8, num_experts=8, moe_top_k=2)
        >>> routed_tokens_per_expert(m, tokens=1024, ep=4)  # 1024*2/8 per expert per rank, x4
        1024
    """
    mean = tokens * model.moe_top_k / model.num_experts * ep
    return max(1, round(mean * expert_load_factor(model)))


def moe_mlp_ops(
    model: ModelSpec, tp: int, ep: int, layer: int, tokens: int, wb: int
) -> tuple[list[Op], list[Op]]:
    """Forward and backward ops of an MoE layer's MLP for ``tokens`` local tokens."""
    h = model.hidden_size
    gated = model.activation == "swiglu"
    ffn = model.expert_ffn_size // tp
    local_experts = model.num_experts // ep
    per_expert = routed_tokens_per_expert(model, tokens, ep)
    router = linear("router", tokens, h, model.num_experts, 4, layer)
    # Dispatch moves each routed token's hidden state once (top-k copies of every token).
    a2a_bytes = per_expert * local_experts * h * ACT_BYTES
    fc1 = linear(
        "expert_fc1", per_expert, h, (2 if gated else 1) * ffn, wb, layer, batch=local_experts
    )
    fc2 = linear("expert_fc2", per_expert, ffn, h, wb, layer, batch=local_experts)
    act_bytes = per_expert * local_experts * ffn * ACT_BYTES * (3 if gated else 2)
    topk_bytes = tokens * model.num_experts * 4 * 2
    fwd: list[Op] = [router[0], memory_op("router_topk", "elementwise", "fwd", topk_bytes, layer)]
    bwd: list[Op] = []
    if ep > 1:
        fwd.append(collective("moe_dispatch", "all_to_all", "ep", "fwd", a2a_bytes, layer))
        bwd.append(collective("moe_combine_bwd", "all_to_all", "ep", "bwd_input", a2a_bytes, layer))
    fwd += [fc1[0], memory_op("expert_activation", "elementwise", "fwd", act_bytes, layer), fc2[0]]
    bwd += [
        fc2[1],
        fc2[2],
        memory_op("expert_activation_bwd", "elementwise", "bwd_input", 2 * act_bytes, layer),
        fc1[1],
        fc1[2],
    ]
    if ep > 1:
        fwd.append(collective("moe_combine", "all_to_all", "ep", "fwd", a2a_bytes, layer))
        bwd.append(
            collective("moe_dispatch_bwd", "all_to_all", "ep", "bwd_input", a2a_bytes, layer)
        )
    if model.num_shared_experts:
        sffn = model.expert_ffn_size * model.num_shared_experts // tp
        s1 = linear("shared_fc1", tokens, h, (2 if gated else 1) * sffn, wb, layer)
        s2 = linear("shared_fc2", tokens, sffn, h, wb, layer)
        fwd += [s1[0], s2[0]]
        bwd += [s2[1], s2[2], s1[1], s1[2]]
    bwd += [router[1], router[2]]
    return fwd, bwd
