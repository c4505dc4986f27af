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
from simtrain.workload.branches import Branch, Tokens, activation_bytes
from simtrain.workload.linear import high_precision_linear, linear_layer
from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES, collective, memory_op
from simtrain.workload.shard import Shard


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


def moe_branch(model: ModelSpec, shard: Shard, layer: int) -> Branch:
    """An MoE layer's MLP for one microbatch on one rank.

    The router stays in high precision (an FP32 GEMM, BF16-class kernel under FP8 training);
    routed and shared experts are linear layers at the training precision (FP8 under an FP8
    recipe, with their casts). Expert activations follow the model's activation.
    """
    t, ep = shard.tp, shard.ep
    tokens = Tokens.of(model, shard).full
    h = model.hidden_size
    fc1_width = 2 if model.is_gated else 1
    ffn = model.expert_ffn_size // t
    local_experts = model.num_experts // ep
    per_expert = routed_tokens_per_expert(model, tokens, ep)
    router = high_precision_linear("router", tokens, h, model.num_experts, shard, layer, 4)
    # Dispatch moves each routed token's hidden state once (top-k copies of every token).
    a2a_bytes = per_expert * local_experts * h * ACT_BYTES
    fc1 = linear_layer("expert_fc1", per_expert, h, fc1_width * ffn, shard, layer, local_experts)
    fc2 = linear_layer("expert_fc2", per_expert, ffn, h, shard, layer, local_experts)
    act_bytes = activation_bytes(model, per_expert * local_experts, ffn)
    topk_bytes = tokens * model.num_experts * 4 * 2
    fwd: list[Op] = [
        *router.forward,
        memory_op("router_topk", "elementwise", "fwd", topk_bytes, layer),
    ]
    bwd: list[Op] = []
    if ep > 1:
        fwd.append(collective("moe_dispatch", "all_to_all", "ep", "fwd", a2a_bytes, layer))
        bwd.append(collective("moe_combine_bwd", "all_to_all", "ep", "bwd_input", a2a_bytes, layer))
    fwd += [
        *fc1.forward,
        memory_op("expert_activation", "elementwise", "fwd", act_bytes, layer),
        *fc2.forward,
    ]
    bwd += [
        *fc2.dgrad,
        fc2.wgrad,
        memory_op("expert_activation_bwd", "elementwise", "bwd_input", 2 * act_bytes, layer),
        *fc1.dgrad,
        fc1.wgrad,
    ]
    if ep > 1:
        fwd.append(collective("moe_combine", "all_to_all", "ep", "fwd", a2a_bytes, layer))
        bwd.append(
            collective("moe_dispatch_bwd", "all_to_all", "ep", "bwd_input", a2a_bytes, layer)
        )
    if model.num_shared_experts:
        sffn = model.expert_ffn_size * model.num_shared_experts // t
        s1 = linear_layer("shared_fc1", tokens, h, fc1_width * sffn, shard, layer)
        s2 = linear_layer("shared_fc2", tokens, sffn, h, shard, layer)
        shared_act = activation_bytes(model, tokens, sffn)
        fwd += [
            *s1.forward,
            memory_op("shared_activation", "elementwise", "fwd", shared_act, layer),
            *s2.forward,
        ]
        bwd += [
            *s2.dgrad,
            s2.wgrad,
            memory_op("shared_activation_bwd", "elementwise", "bwd_input", 2 * shared_act, layer),
            *s1.dgrad,
            s1.wgrad,
        ]
    bwd += [*router.dgrad, router.wgrad]
    return Branch(tuple(fwd), tuple(bwd), ())
