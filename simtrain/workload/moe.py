"""The MLP of a mixture-of-experts layer as Megatron-Core and DeepEP run it.

Each token is routed to ``top_k`` of ``num_experts`` experts. The experts of a stage are laid
out on their own grid (MoE parallel folding, :mod:`simtrain.parallel.layout`): expert
parallelism ``ep`` gives every rank ``num_experts / ep`` experts, expert tensor parallelism
``etp`` splits each expert's matrices. One layer, forward, on one rank:

1. router (a high-precision GEMM h -> num_experts), then softmax/sigmoid and top-k;
2. permute: the rank's routed token copies gathered into expert order;
3. dispatch over the expert-parallel group (when ep > 1):

   - ``alltoall`` (Megatron-Core's alltoall dispatcher): one all-to-all, a copy per routed
     expert, in 16 bits;
   - ``deepep`` (DeepSeek's DeepEP normal kernels): two hops pipelined: each token crosses
     the scale-out network once per destination *node*, to the GPU on its own rail, which
     forwards it over NVLink once per destination GPU. Both hops are all-to-alls on their own
     streams (``ep_inter``: the expert-parallel ranks on the same rail of other nodes;
     ``ep_intra``: those of the same node), so they run at once and the slower sets the
     time. Under FP8 training the dispatch moves FP8 data with one FP32 scale per 128
     values (DeepSeek-V3 §3.3); the combine stays in BF16;

4. with etp > 1, the received tokens are all-gathered over the expert-tensor-parallel group;
5. the rank's experts as grouped GEMMs (one kernel over its experts: ``batch`` = local
   experts, M = tokens per expert, priced by the per-shape GEMM model), and the activation;
6. with etp > 1, the partial outputs are reduce-scattered back; combine (the reverse
   all-to-all); unpermute (the weighted sum of each token's expert outputs);
7. shared experts: a dense MLP on every token, tensor-parallel over the attention's tp.

The backward mirrors it. The layer runs on the rank's own tokens: under sequence parallelism
(which Megatron-Core requires for expert parallelism with tp > 1) no tensor-parallel
collective bounds the layer; only without sequence parallelism and without expert
parallelism (each tp rank then holds every token) do the experts sit inside the block's
tensor-parallel region, split over tp, with its all-reduce.

The busiest rank sets the pace: its tokens per expert are the mean times the token-imbalance
factor, capped by the capacity factor when tokens beyond capacity are dropped; the all-to-alls
carry that load.
"""

from __future__ import annotations

import math

from simtrain.specs.model import ModelSpec
from simtrain.workload.branches import Branch, Tokens, activation_bytes
from simtrain.workload.linear import LinearOps, high_precision_linear, linear_layer
from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES, collective, memory_op
from simtrain.workload.shard import Shard

FP8_DISPATCH_BYTES = 1 + 4 / 128
"""Bytes per hidden value of an FP8 dispatch: E4M3 data and one FP32 scale per 128 values
(DeepSeek-V3 technical report §3.3, fine-grained 1x128 activation quantisation)."""
INDEX_BYTES = 4  # one int32 index (or FP32 probability) per routed copy


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


def bins_hit(picks: int, items: float, bins: float) -> float:
    """Expected bins holding at least one of ``picks`` distinct items drawn uniformly.

    ``items`` are spread evenly over ``bins`` (experts over GPUs or nodes).

    Examples:
        >>> round(bins_hit(8, 256, 8), 3)  # DeepSeek-V3's 8 experts over 8 nodes, no limit
        5.295
        >>> bins_hit(2, 8, 1)
        1.0
    """
    if bins <= 1:
        return 1.0
    per_bin = items / bins
    miss = 1.0
    for i in range(min(picks, math.floor(items))):
        miss *= max(0.0, (items - per_bin - i) / (items - i))
    return bins * (1.0 - miss)


def destinations(model: ModelSpec, ep: int, nodes: int) -> tuple[float, float]:
    """Expected distinct destination (nodes, GPUs) of one token over an EP group.

    Under group-limited routing a token only reaches experts of ``moe_router_group_topk`` of
    the ``moe_router_num_groups`` groups (contiguous expert ranges, so whole nodes when the
    groups are as many as the nodes: DeepSeek-V3's "at most 4 nodes").

    Examples:
        >>> m = ModelSpec(num_layers=1, hidden_size=64, num_heads=4, vocab_size=10,
        ...               seq_length=8, num_experts=256, moe_top_k=8,
        ...               moe_router_num_groups=8, moe_router_group_topk=4)
        >>> [round(x, 2) for x in destinations(m, ep=64, nodes=8)]
        [3.63, 7.36]
    """
    k, experts = model.moe_top_k, float(model.num_experts)
    reach_nodes, reach_gpus = float(nodes), float(ep)
    groups, chosen = model.moe_router_num_groups, model.moe_router_group_topk
    if groups is not None and chosen is not None:
        share = min(1.0, chosen * max(1.0, nodes / groups) / nodes)
        reach_nodes, reach_gpus, experts = nodes * share, ep * share, experts * share
    return bins_hit(k, experts, reach_nodes), bins_hit(k, experts, reach_gpus)


def _dispatch(
    model: ModelSpec,
    shard: Shard,
    tokens: int,
    layer: int,
    phase: str,
    name: str,
    bytes_per_value: float,
) -> list[Op]:
    """The dispatch (or combine, or their gradients) of ``tokens`` local tokens."""
    h = model.hidden_size
    load = expert_load_factor(model)
    if shard.dispatcher == "alltoall":
        size = tokens * model.moe_top_k * load * h * bytes_per_value
        return [collective(name, "all_to_all", "ep", phase, size, layer)]
    nodes, per_node = shard.ep_nodes, shard.ep // shard.ep_nodes
    to_nodes, to_gpus = destinations(model, shard.ep, nodes)
    ops = []
    if nodes > 1:  # one RDMA copy per remote destination node, to the same rail
        remote = tokens * to_nodes * (nodes - 1) / nodes * load * h * bytes_per_value
        size = remote * nodes / (nodes - 1)
        ops.append(collective(f"{name}_rdma", "all_to_all", "ep_inter", phase, size, layer))
    if per_node > 1:  # one NVLink copy per destination GPU (from the rail GPU or locally)
        local = tokens * to_gpus * (per_node - 1) / per_node * load * h * bytes_per_value
        size = local * per_node / (per_node - 1)
        ops.append(collective(f"{name}_nvlink", "all_to_all", "ep_intra", phase, size, layer))
    return ops


def moe_branch(model: ModelSpec, shard: Shard, layer: int) -> Branch:
    """An MoE layer's MLP for one microbatch on one rank (see the module docstring)."""
    t = shard.tp
    if t > 1 and not shard.sp:
        return _replicated_moe(model, shard, layer)
    etp, ep = shard.expert_tp, shard.ep
    tokens = Tokens.of(model, shard).local  # the rank's own tokens
    h, k = model.hidden_size, model.moe_top_k
    fc1_width = 2 if model.is_gated else 1
    ffn = model.expert_ffn_size // etp
    local_experts = model.num_experts // ep
    per_expert = routed_tokens_per_expert(model, tokens, ep) * etp
    received = per_expert * local_experts  # token copies the rank's experts process
    router = high_precision_linear("router", tokens, h, model.num_experts, shard, layer, 4)
    fc1 = linear_layer("expert_fc1", per_expert, h, fc1_width * ffn, shard, layer, local_experts)
    fc2 = linear_layer("expert_fc2", per_expert, ffn, h, shard, layer, local_experts)
    act_bytes = activation_bytes(model, received, ffn)
    copies = tokens * k * expert_load_factor(model)
    # permute: read each token once, write its routed copies (and their indices); unpermute:
    # read the copies and their probabilities, write the weighted sum.
    permute = tokens * h * ACT_BYTES + copies * (h * ACT_BYTES + INDEX_BYTES)
    unpermute = copies * (h * ACT_BYTES + INDEX_BYTES) + tokens * h * ACT_BYTES
    topk_bytes = tokens * model.num_experts * 4 * 2  # FP32 scores: softmax/sigmoid, top-k
    dispatch_bytes = FP8_DISPATCH_BYTES if shard.fp8_dispatch else ACT_BYTES
    etp_gather: list[Op] = []
    etp_scatter: list[Op] = []
    grad_gather: list[Op] = []
    grad_scatter: list[Op] = []
    if etp > 1:  # the etp group's tokens for its experts' slices, and back
        size = received * h * ACT_BYTES
        etp_gather = [collective("expert_tp_all_gather", "all_gather", "etp", "fwd", size, layer)]
        etp_scatter = [
            collective("expert_tp_reduce_scatter", "reduce_scatter", "etp", "fwd", size, layer)
        ]
        grad_gather = [
            collective("expert_tp_grad_all_gather", "all_gather", "etp", "bwd_input", size, layer)
        ]
        grad_scatter = [
            collective(
                "expert_tp_grad_reduce_scatter", "reduce_scatter", "etp", "bwd_input", size, layer
            )
        ]
    fwd: list[Op] = [
        *router.forward,
        memory_op("router_topk", "elementwise", "fwd", topk_bytes, layer),
        memory_op("moe_permute", "elementwise", "fwd", permute, layer),
    ]
    bwd: list[Op] = []
    if ep > 1:
        fwd += _dispatch(model, shard, tokens, layer, "fwd", "moe_dispatch", dispatch_bytes)
        bwd += _dispatch(model, shard, tokens, layer, "bwd_input", "moe_combine_bwd", ACT_BYTES)
    fwd += [
        *etp_gather,
        *fc1.forward,
        memory_op("expert_activation", "elementwise", "fwd", act_bytes, layer),
        *fc2.forward,
        *etp_scatter,
    ]
    bwd += [
        *grad_gather,
        *fc2.dgrad,
        fc2.wgrad,
        memory_op("expert_activation_bwd", "elementwise", "bwd_input", 2 * act_bytes, layer),
        *fc1.dgrad,
        fc1.wgrad,
        *grad_scatter,
    ]
    if ep > 1:
        fwd += _dispatch(model, shard, tokens, layer, "fwd", "moe_combine", ACT_BYTES)
        bwd += _dispatch(model, shard, tokens, layer, "bwd_input", "moe_dispatch_bwd", ACT_BYTES)
    fwd.append(memory_op("moe_unpermute", "elementwise", "fwd", unpermute, layer))
    bwd.insert(0, memory_op("moe_unpermute_bwd", "elementwise", "bwd_input", unpermute, layer))
    bwd.append(memory_op("moe_permute_bwd", "elementwise", "bwd_input", permute, layer))
    shared_fwd, shared_bwd = _shared_experts(model, shard, layer)
    bwd = [*shared_bwd, *bwd, *router.dgrad, router.wgrad]
    return Branch(tuple([*fwd, *shared_fwd]), tuple(bwd), (), tp_local=True)


def _shared_experts(model: ModelSpec, shard: Shard, layer: int) -> tuple[list[Op], list[Op]]:
    """Shared experts: a dense MLP on the rank's tokens, tensor-parallel over the tp group.

    Under sequence parallelism it gathers its input over tp and reduce-scatters its output,
    as a dense block's MLP does; its weight-gradient GEMM of fc1 runs while the input
    gradient is reduce-scattered.
    """
    if not model.num_shared_experts:
        return [], []
    t = shard.tp
    tok = Tokens.of(model, shard)
    h = model.hidden_size
    fc1_width = 2 if model.is_gated else 1
    sffn = model.expert_ffn_size * model.num_shared_experts // t
    s1 = linear_layer("shared_fc1", tok.full, h, fc1_width * sffn, shard, layer)
    s2 = linear_layer("shared_fc2", tok.full, sffn, h, shard, layer)
    shared_act = activation_bytes(model, tok.full, sffn)
    act = tok.full * h * ACT_BYTES
    entry: list[Op] = []
    exit_: list[Op] = []
    exit_grad: list[Op] = []
    entry_grad: list[Op] = []
    if t > 1:
        entry = [collective("shared_all_gather", "all_gather", "tp", "fwd", act, layer)]
        exit_ = [collective("shared_reduce_scatter", "reduce_scatter", "tp", "fwd", act, layer)]
        exit_grad = [
            collective("shared_grad_all_gather", "all_gather", "tp", "bwd_input", act, layer)
        ]
        entry_grad = [
            collective(
                "shared_grad_reduce_scatter",
                "reduce_scatter",
                "tp",
                "bwd_input",
                act,
                layer,
                overlap_ops=1,
            )
        ]
    fwd = [
        *entry,
        *s1.forward,
        memory_op("shared_activation", "elementwise", "fwd", shared_act, layer),
        *s2.forward,
        *exit_,
    ]
    bwd = [
        *exit_grad,
        *s2.dgrad,
        s2.wgrad,
        memory_op("shared_activation_bwd", "elementwise", "bwd_input", 2 * shared_act, layer),
        *s1.dgrad,
        *entry_grad,
        s1.wgrad,
    ]
    return fwd, bwd


def _replicated_moe(model: ModelSpec, shard: Shard, layer: int) -> Branch:
    """Experts inside the block's tensor-parallel region (tp > 1 without SP, ep = 1).

    Every tp rank holds every token (no sequence parallelism), routes them all and computes
    its 1/tp slice of every expert and shared expert; the block's all-reduce sums the slices.
    """
    t = shard.tp
    tokens = Tokens.of(model, shard).full
    h = model.hidden_size
    fc1_width = 2 if model.is_gated else 1
    ffn = model.expert_ffn_size // t
    experts = model.num_experts
    per_expert = routed_tokens_per_expert(model, tokens, 1)
    router = high_precision_linear("router", tokens, h, experts, shard, layer, 4)
    fc1 = linear_layer("expert_fc1", per_expert, h, fc1_width * ffn, shard, layer, experts)
    fc2 = linear_layer("expert_fc2", per_expert, ffn, h, shard, layer, experts)
    act_bytes = activation_bytes(model, per_expert * experts, ffn)
    topk_bytes = tokens * experts * 4 * 2
    fwd: list[Op] = [
        *router.forward,
        memory_op("router_topk", "elementwise", "fwd", topk_bytes, layer),
        *fc1.forward,
        memory_op("expert_activation", "elementwise", "fwd", act_bytes, layer),
        *fc2.forward,
    ]
    bwd: list[Op] = [
        *fc2.dgrad,
        fc2.wgrad,
        memory_op("expert_activation_bwd", "elementwise", "bwd_input", 2 * act_bytes, layer),
        *fc1.dgrad,
        fc1.wgrad,
    ]
    if model.num_shared_experts:
        sffn = model.expert_ffn_size * model.num_shared_experts // t
        s1 = linear_layer("shared_fc1", tokens, h, fc1_width * sffn, shard, layer)
        s2 = linear_layer("shared_fc2", tokens, sffn, h, shard, layer)
        shared_act = activation_bytes(model, tokens, sffn)
        fwd += _mlp_forward(s1, s2, shared_act, layer, "shared")
        bwd += [
            *s2.dgrad,
            s2.wgrad,
            memory_op("shared_activation_bwd", "elementwise", "bwd_input", 2 * shared_act, layer),
            *s1.dgrad,
            s1.wgrad,
        ]
    bwd += [*router.dgrad, router.wgrad]
    return Branch(tuple(fwd), tuple(bwd), ())


def _mlp_forward(fc1: LinearOps, fc2: LinearOps, act: float, layer: int, tag: str) -> list[Op]:
    return [
        *fc1.forward,
        memory_op(f"{tag}_activation", "elementwise", "fwd", act, layer),
        *fc2.forward,
    ]
