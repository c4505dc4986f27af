"""Model states per rank: parameters held under tp/pp/ep, and their bytes by ZeRO stage.

Mixed-precision Adam keeps 16 bytes per parameter: 2 for the 16-bit weights, 2 for the 16-bit
gradients and 12 for the fp32 master weights, momentum and variance (DESIGN.md "Key
definitions"; ZeRO, Rajbhandari et al. 2020, §3). ZeRO shards them over the data-parallel
group of size N: stage 1 the 12 optimizer bytes, stage 2 also the gradients, stage 3 also the
weights. Example (ZeRO Figure 1, 7.5B parameters, N = 64): 120 GB replicated, then
(2+2+12/64)·7.5 = 31.4 GB, (2+14/64)·7.5 = 16.6 GB and 16/64·7.5 = 1.9 GB.
Other optimizers keep other optimizer bytes (:data:`simtrain.workload.optimizers.OPTIMIZERS`:
AdamW 12, Adafactor 4, Lion 8, 8-bit Adam about 6, momentum SGD 8).

Under FP8 training (TransformerEngine) every rank also keeps the 8-bit copies of its linear
layers' weights between microbatches, row-wise and column-wise (2 bytes per weight, plus the
block scales of MXFP8 and blockwise recipes); they are counted with the weights (breakdown
``weights.fp8_copies``). Under ZeRO-3 the copies are made per gathered layer and not kept.

What the software stack keeps on top comes from its framework profile: with
``sharding.fp8_all_gather`` (torchao's FP8 all-gather under FSDP) the gathered weights of the
linear layers are 1 byte per element instead of 2; without ``memory.fp8_weight_copies_kept``
(torchao's dynamic scaling) no 8-bit copies outlive their use. With
``sharding.param_shard_is_master`` (FSDP2) the shard is the fp32 master itself and its
gradient is fp32: no 16-bit shard under ZeRO-3, 4 bytes per sharded gradient. With
``sharding.pipeline_defers_grad_reduce`` (torch.distributed.pipelining with FSDP2) a pipeline
rank accumulates the unsharded gradients of all its parameters across the microbatches of a
step, in the gradient-reduction dtype when ``sharding.unsharded_grad_dtype`` is ``reduce``
(:func:`unsharded_grad_bytes`; breakdown ``gradients.unsharded_accumulation``).

Which parameters a pipeline rank holds: the layers of its model chunks (all layers split into
``pp * vpp`` contiguous chunks, earlier chunks taking the remainder; rank r holds chunks
``c * pp + r``; under DualPipe it holds stages r and pp-1-r of two model copies), the token
embedding on the rank that runs stage 0 and the LM head and final norm on the rank that runs the
last stage. Matrices are split over tp; norms, the output-projection bias and the position
table stay replicated (as in Megatron); routed experts are split over ep × etp, and sharded by
ZeRO over the expert-data-parallel group edp = tp·cp·dp/(ep·etp) instead of dp·cp.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.catalog.frameworks import get_framework
from simtrain.parallel.stages import chunk_layers
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.framework import GRAD_REDUCE_BYTES
from simtrain.specs.framework_resolve import effective_zero_stage, uses_bf16_optimizer
from simtrain.workload.counts import (
    attention_biases,
    attention_weights,
    mlp_matrices,
    mlp_params,
    norm_params,
)
from simtrain.workload.linear import CAST_BYTES_PER_ELEMENT
from simtrain.workload.optimizers import OPTIMIZERS
from simtrain.workload.primitives import FP8_DTYPES
from simtrain.workload.shard import fp8_recipe_in_effect

WEIGHT_BYTES = 2
GRAD_BYTES = 2
MASTER_BYTES = 4
"""Bytes of an fp32 master weight (and of a gradient kept in its dtype)."""
FP8_COPY_BYTES = {recipe: cast - 2 for recipe, cast in CAST_BYTES_PER_ELEMENT.items()}
"""Bytes per weight of the two 8-bit copies (and their scales): what a cast writes."""


@dataclass(frozen=True)
class ModelStateBytes:
    """Bytes of model state on one rank.

    Attributes:
        weights: 16-bit parameters.
        gradients: 16-bit gradients.
        optimizer: fp32 master weights and optimizer moments.
    """

    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        """Sum of the three."""
        return self.weights + self.gradients + self.optimizer

    def __add__(self, other: ModelStateBytes) -> ModelStateBytes:
        return ModelStateBytes(
            self.weights + other.weights,
            self.gradients + other.gradients,
            self.optimizer + other.optimizer,
        )


def model_state_bytes(
    num_params: float, zero_stage: int, shard_size: int, optimizer: str = "adam"
) -> ModelStateBytes:
    """Model-state bytes of ``num_params`` parameters under ZeRO ``zero_stage``.

    Args:
        num_params: parameters held by the rank before ZeRO sharding.
        zero_stage: 0 (replicated), 1 (optimizer sharded), 2 (+ gradients), 3 (+ weights).
        shard_size: ranks the states are sharded over (dp size or FSDP shard-group size).
        optimizer: a name in :data:`~simtrain.workload.optimizers.OPTIMIZERS` (``adam``:
            12 optimizer bytes per parameter).

    Examples:
        >>> round(model_state_bytes(7.5e9, 1, 64).total / 1e9, 1)
        31.4
    """
    n = shard_size
    return ModelStateBytes(
        weights=num_params * WEIGHT_BYTES / (n if zero_stage >= 3 else 1),
        gradients=num_params * GRAD_BYTES / (n if zero_stage >= 2 else 1),
        optimizer=num_params * OPTIMIZERS[optimizer].state_bytes / (n if zero_stage >= 1 else 1),
    )


@dataclass(frozen=True)
class RankParams:
    """Parameters one pipeline rank holds (after tp/ep splitting, before ZeRO).

    Attributes:
        dense: parameters replicated across the data-parallel group (everything but routed
            experts).
        experts: routed-expert parameters (replicated across the expert-data-parallel group).
        largest_layer: parameters of the rank's largest layer (ZeRO-3 gathers one at a time).
        layers: 0-based layers the rank holds (twice as many under DualPipe).
        linear_weights: weight-matrix elements of the rank's linear layers (attention, MLP,
            experts; not the embedding, LM head or router): what FP8 training casts.
        outside_layers: parameters outside the rank's transformer layers (token embedding,
            position table, final norm, LM head): an FSDP root unit's.
    """

    dense: float
    experts: float
    largest_layer: float
    layers: tuple[int, ...]
    linear_weights: float = 0.0
    outside_layers: float = 0.0


def rank_stages(pp: int, vpp: int, schedule: str, rank: int) -> tuple[int, ...]:
    """Model stages (chunks, in units of ``num_layers / (pp * vpp)``) held by ``rank``.

    Examples:
        >>> rank_stages(4, 2, "interleaved", 1)
        (1, 5)
        >>> rank_stages(4, 1, "dualpipe", 1)
        (1, 2)
    """
    if schedule == "dualpipe":
        return tuple(sorted({rank, pp - 1 - rank}))
    return tuple(c * pp + rank for c in range(vpp))


def rank_params(spec: ExperimentSpec, rank: int) -> RankParams:
    """Parameters held by pipeline rank ``rank`` under the spec's tp, pp, vpp and ep."""
    m, p = spec.model, spec.parallel
    num_stages = p.pp * p.vpp
    chunks = chunk_layers(m.num_layers, num_stages)
    stages = rank_stages(p.pp, p.vpp, p.pipeline_schedule, rank)
    layers = tuple(i for s in stages for i in chunks[s])
    dense = experts = largest = linear = 0.0
    h = m.hidden_size
    weights = attention_weights(m)
    split_biases, replicated_biases = attention_biases(m)
    attn = (weights.split + split_biases) / p.tp + weights.replicated + replicated_biases
    attn_linear = weights.split / p.tp + weights.replicated
    for layer in layers:
        layer_dense = attn + m.num_block_norms * norm_params(m)
        layer_experts = 0.0
        linear += attn_linear
        if m.is_moe_layer(layer):
            expert = mlp_params(m, m.expert_ffn_size)
            layer_experts = m.num_experts * expert / (p.ep * p.expert_tp)
            layer_dense += m.num_shared_experts * expert / p.tp + h * m.num_experts
            expert_matrices = mlp_matrices(m) * h * m.expert_ffn_size
            linear += expert_matrices * (
                m.num_experts / (p.ep * p.expert_tp) + m.num_shared_experts / p.tp
            )
        else:
            layer_dense += mlp_params(m, m.ffn_size) / p.tp
            linear += mlp_matrices(m) * h * m.ffn_size / p.tp
        dense += layer_dense
        experts += layer_experts
        largest = max(largest, layer_dense + layer_experts)
    in_layers = dense + experts
    # Under DualPipe the end ranks hold stage 0 of one copy and the last stage of the other.
    if 0 in stages:
        dense += m.vocab_size * h / p.tp
        dense += m.seq_length * h if m.position_embedding == "learned" else 0
        dense += norm_params(m) if m.embedding_norm else 0
    if num_stages - 1 in stages:
        dense += norm_params(m)
        # A tied head shares the embedding only when one stage holds both (Megatron keeps a
        # synchronised copy on the last stage otherwise).
        if not (m.tied_embeddings and num_stages == 1):
            dense += m.vocab_size * h / p.tp
    return RankParams(dense, experts, largest, layers, linear, dense + experts - in_layers)


def rank_model_states(spec: ExperimentSpec, rank: int) -> ModelStateBytes:
    """Model-state bytes of pipeline rank ``rank``.

    Dense parameters are sharded by ZeRO over dp·cp (or the hybrid shard group), routed
    experts over edp = tp·cp·dp/(ep·etp) (or the shard group if smaller).
    """
    p = spec.parallel
    params = rank_params(spec, rank)
    dp_cp = (p.dp or 1) * p.cp
    # Hybrid sharding shards only over the shard group (and experts over at most that).
    shard = p.zero_shard_group_size or dp_cp
    optimizer = spec.training.optimizer
    stage = effective_zero_stage(spec)
    states = model_state_bytes(params.dense, stage, shard, optimizer) + model_state_bytes(
        params.experts, stage, min(shard, p.expert_dp), optimizer
    )
    if stage >= 2 and get_framework(spec.training.framework).sharding.param_shard_is_master:
        # the shard is the fp32 master (counted with the optimizer); its gradient is fp32
        weights = 0.0 if stage == 3 else states.weights
        states = ModelStateBytes(
            weights, states.gradients * MASTER_BYTES / GRAD_BYTES, states.optimizer
        )
    if stage == 2 and fp8_gathers(spec):
        # the gathered (unsharded) linear weights are the 1-byte FP8 all-gather outputs
        saved = params.linear_weights * (WEIGHT_BYTES - FP8_GATHER_BYTES)
        states = ModelStateBytes(states.weights - saved, states.gradients, states.optimizer)
    return states


FP8_GATHER_BYTES = 1
"""Bytes per element of a weight gathered in FP8 (its per-tensor scale is negligible)."""


def fp8_gathers(spec: ExperimentSpec) -> bool:
    """Whether sharded-data-parallel gathers of linear weights carry FP8 (1 byte per element).

    True under FP8 training with ZeRO-2/3 when the stack casts the shards before gathering
    (the profile's ``sharding.fp8_all_gather``).
    """
    return (
        spec.training.dtype in FP8_DTYPES
        and effective_zero_stage(spec) >= 2
        and get_framework(spec.training.framework).sharding.fp8_all_gather
    )


def defers_grad_reduce(spec: ExperimentSpec) -> bool:
    """Whether pipeline ranks accumulate unsharded gradients over the step's microbatches.

    Under pipeline parallelism with more than one microbatch and ZeRO-2/3, when the stack's
    pipeline engine defers the reduction to the last microbatch (profile
    ``sharding.pipeline_defers_grad_reduce``).
    """
    p = spec.parallel
    return (
        p.pp > 1
        and p.num_microbatches > 1
        and effective_zero_stage(spec) >= 2
        and get_framework(spec.training.framework).sharding.pipeline_defers_grad_reduce
    )


def unsharded_grad_bytes(spec: ExperimentSpec, rank: int) -> float:
    """Unsharded gradients pipeline rank ``rank`` accumulates across a step's microbatches.

    Under pipeline parallelism with ZeRO-2/3, a stack whose pipeline engine defers the
    gradient reduction to the last microbatch (profile ``sharding.pipeline_defers_grad_reduce``)
    holds one unsharded gradient per parameter of the rank until its last backward, in the
    reduction dtype (``unsharded_grad_dtype: reduce``, FSDP2) or in 16 bits (``param``).
    DeepSpeed's BF16_Optimizer accumulates every microbatch's gradients into a full-size fp32
    copy of the rank's parameters, with or without a pipeline (:func:`uses_bf16_optimizer`):
    4 bytes per parameter beside the bf16 gradients.
    Zero otherwise (gradients reduced microbatch by microbatch, or no pipeline). A rank
    holding P parameters (after TP) keeps 4·P bytes under FSDP2 with fp32 reduction: Llama 3.1
    405B on pp = 8, tp = 8 puts about 6.2e9 parameters on a rank, 25 GB.
    """
    if uses_bf16_optimizer(spec):
        params = rank_params(spec, rank)
        return MASTER_BYTES * (params.dense + params.experts)
    if not defers_grad_reduce(spec):
        return 0.0
    sharding = get_framework(spec.training.framework).sharding
    if sharding.unsharded_grad_dtype == "reduce":
        per_param = GRAD_REDUCE_BYTES[spec.training.grad_reduce_dtype or "fp32"]
    else:
        per_param = GRAD_BYTES
    params = rank_params(spec, rank)
    return per_param * (params.dense + params.experts)


def fp8_copy_bytes(spec: ExperimentSpec, rank: int) -> float:
    """Bytes of the 8-bit weight copies pipeline rank ``rank`` keeps under FP8 training.

    Zero without FP8, under ZeRO-3 (each gathered layer is cast, used and freed), when the
    weights are gathered in FP8 (the gathered weight is the copy), and for a stack that casts
    at each use (profile ``memory.fp8_weight_copies_kept`` false).
    """
    training = spec.training
    if training.dtype not in FP8_DTYPES or effective_zero_stage(spec) == 3:
        return 0.0
    if fp8_gathers(spec) or not get_framework(training.framework).memory.fp8_weight_copies_kept:
        return 0.0
    recipe = fp8_recipe_in_effect(training.dtype, training.fp8_recipe)
    return rank_params(spec, rank).linear_weights * FP8_COPY_BYTES[recipe]
