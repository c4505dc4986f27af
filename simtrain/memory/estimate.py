"""Peak memory of a pipeline rank: model states + activations in flight + buffers, with a verdict.

The peak of a rank is reached when its schedule holds the most microbatches in flight (taken
from the schedule's action lists, :func:`~simtrain.memory.activations.peak_inflight`; 1F1B
gives p-i on stage i, GPipe m, interleaved p·(1 + (p-1)/(p·v)) on the first rank,
``docs/references/pipeline-theory.md`` §9). On top of the layers' activations come
Korthikanti's extra terms (docs/references/training-runs.md §2.4): the embedding dropout mask
on the rank of stage 0 (s·b·h per microbatch in flight, /t under SP) and the final norm,
output layer and fp32 logits on the rank of the last stage (4·s·b·h/t·(1 + V/h), for the one
microbatch between its forward and loss backward). Full recompute adds one layer's
rematerialised activations during a backward; on the last stage only what exceeds the loss
phase, which is over before any layer is recomputed.

Buffers: pipeline send/receive of activations and gradients (4·2·s·b·h, /t under SP), the
sequence-parallel all-gather buffer (2·s·b·h), the data-parallel bucket being reduced when
gradients are sharded (ZeRO >= 2), ZeRO-3 gathers of the current and the prefetched layer, and
the expert all-to-all send/receive buffers. The software stack (its framework profile) adds
what it keeps beyond that: the runtime's reserve (CUDA context, library workspaces) and the
caching allocator's fragmentation, the bytes its loss and final norm keep, and (FSDP2 with
torch.distributed.pipelining, docs/references/frameworks.md) the root unit gathered through
the step, the flat all-gather buffers held apart from the parameters, a receive buffer per
microbatch instead of the four per-transfer buffers, and the last stage's logits of every
microbatch; under such a hook-driven stack the backward's prefetched gather and gradient
bucket, like a layer's recomputation, count only beyond the loss phase.

The verdict has three values: ``fits``, ``near_limit`` (within the stack's memory-model
uncertainty of the capacity, either side) and ``oom``; only ``oom`` is out of memory
(``fits`` is False). It is a verdict, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from simtrain.catalog.frameworks import get_framework
from simtrain.memory.activations import ACT_BYTES, MASK_BYTES, layer_activation_bytes, peak_inflight
from simtrain.memory.model_states import (
    FP8_GATHER_BYTES,
    GRAD_BYTES,
    WEIGHT_BYTES,
    RankParams,
    defers_grad_reduce,
    fp8_copy_bytes,
    fp8_gathers,
    rank_model_states,
    rank_params,
    rank_stages,
    unsharded_grad_bytes,
)
from simtrain.parallel.overlap import step_actions
from simtrain.parallel.schedules import Action
from simtrain.parallel.stages import chunk_layers, recomputed_layers
from simtrain.specs.calibration import UNFUSED_KERNELS
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.framework import GRAD_REDUCE_BYTES
from simtrain.specs.framework_resolve import compiles_loss, effective_zero_stage
from simtrain.workload.primitives import FP8_DTYPES


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak memory of one pipeline rank.

    Attributes:
        stage: pipeline rank the estimate is for.
        weights_bytes: 16-bit parameters (after ZeRO-3 sharding), plus the 8-bit copies of
            the linear layers' weights under FP8 training.
        gradients_bytes: 16-bit gradients (after ZeRO-2 sharding).
        optimizer_bytes: fp32 master weights and moments (after ZeRO-1 sharding).
        activations_bytes: activations at the peak number of microbatches in flight.
        buffers_bytes: communication buffers.
        capacity_bytes: device memory.
        chunk_activation_bytes: layer activations of one (stage, microbatch) pair of this rank
            (what a forward allocates and its backward frees).
        inflight_microbatches: peak microbatches in flight on this rank, in units of one
            pipeline stage (num_layers / pp layers): an interleaved chunk counts 1/v.
        breakdown_bytes: bytes by finer item (``activations.layers``, ``buffers.pp_p2p``, ...).
        overhead_bytes: what the stack holds beyond tensors it allocates on purpose: runtime
            (CUDA context, library workspaces) and caching-allocator fragmentation.
        near_limit_bytes: half-width of the band around the capacity where the verdict is
            ``near_limit`` (the stack's memory-model uncertainty).
    """

    stage: int
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    buffers_bytes: float
    capacity_bytes: float
    chunk_activation_bytes: float
    inflight_microbatches: float
    breakdown_bytes: dict[str, float] = field(default_factory=dict)
    overhead_bytes: float = 0.0
    near_limit_bytes: float = 0.0

    @property
    def peak_bytes(self) -> float:
        """Sum of every category: the rank's peak."""
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.buffers_bytes
            + self.overhead_bytes
        )

    @property
    def verdict(self) -> str:
        """``fits``, ``near_limit`` or ``oom`` (see :func:`memory_verdict`)."""
        return memory_verdict(self.peak_bytes, self.capacity_bytes, self.near_limit_bytes)

    @property
    def fits(self) -> bool:
        """False only when the peak exceeds the capacity beyond the near-limit band."""
        return self.verdict != "oom"


def memory_verdict(peak_bytes: float, capacity_bytes: float, band_bytes: float) -> str:
    """``fits`` below capacity - band, ``oom`` above capacity + band, ``near_limit`` between.

    Near the limit the memory model cannot say (allocator fragmentation, workspaces and
    kernel choices move the real peak by a few GB), so neither a sweep nor a planner should
    throw such a layout away, and neither should a user trust it blindly.

    Examples:
        >>> [memory_verdict(p, 80e9, 4e9) for p in (70e9, 78e9, 83e9, 90e9)]
        ['fits', 'near_limit', 'near_limit', 'oom']
    """
    if peak_bytes > capacity_bytes + band_bytes:
        return "oom"
    if peak_bytes >= capacity_bytes - band_bytes:
        return "near_limit"
    return "fits"


def _activations(
    spec: ExperimentSpec, stage: int, actions: list[Action]
) -> tuple[dict[str, float], float, float]:
    m, p = spec.model, spec.parallel
    b, t = p.micro_batch_size, p.tp
    flash = spec.training.attention_kernel not in UNFUSED_KERNELS
    sp_div = t if p.sp and t > 1 else 1
    stages = rank_stages(p.pp, p.vpp, p.pipeline_schedule, stage)
    layers = rank_params(spec, stage).layers
    chunks = chunk_layers(m.num_layers, p.pp * p.vpp)
    full = frozenset().union(
        *(recomputed_layers(chunks[s], p.recompute_layer_fraction) for s in stages)
    )

    def mode(layer: int) -> str:
        return "none" if p.recompute == "full" and layer not in full else p.recompute

    habits = get_framework(spec.training.framework).memory
    # the linear layers' saved inputs are 8-bit only where the stack keeps FP8 copies of them
    fp8 = spec.training.dtype in FP8_DTYPES and habits.fp8_saves_8bit_inputs
    modules, fp8_act = p.selective_modules, spec.training.activation_fp8_input_store
    gathered = habits.tp_saves_gathered_inputs and p.sp and t > 1
    layer = partial(
        layer_activation_bytes, m, b, t, p.sp, cp=p.cp, flash_attention=flash, fp8=fp8,
        fp8_act_input=fp8_act, gathered_inputs=gathered,
    )  # fmt: skip
    per_layer = [
        layer(recompute=mode(i), moe_layer=m.is_moe_layer(i), modules=modules) for i in layers
    ]
    count = peak_inflight(actions)
    chunk = sum(per_layer) / len(stages)  # a (stage, microbatch) holds one chunk's layers
    items = {"activations.layers": count * chunk}
    sbh = m.seq_length / p.cp * b * m.hidden_size
    if 0 in stages and m.dropout:
        items["activations.embedding_dropout"] = (
            MASK_BYTES * sbh * peak_inflight(actions, {0}) / sp_div
        )
    if 0 in stages and m.embedding_norm:  # the norm's input, kept for its backward
        items["activations.embedding_norm"] = ACT_BYTES * sbh * peak_inflight(actions, {0}) / sp_div
    last = p.pp * p.vpp - 1
    if last in stages:
        # what the stack's loss keeps per logit at its peak (Korthikanti §4: 4 bytes, fp32
        # logits); a vocabulary split over TP runs the stack's vocabulary-parallel loss
        if t > 1:
            per_logit = habits.vocab_parallel_logits_bytes_per_element
        elif compiles_loss(spec):
            per_logit = COMPILED_LOSS_BYTES_PER_LOGIT
        else:
            per_logit = habits.logits_bytes_per_element
        logits = per_logit * _logits(spec, stage)
        # what the final norm keeps of its input and the LM head's input (whole when the
        # stack gathers it)
        norm = habits.final_norm_bytes_per_element * sbh / sp_div
        head_input = ACT_BYTES * sbh / (1 if gathered else sp_div)
        items["activations.output_layer"] = norm + head_input + logits
        if _keeps_last_outputs(spec):  # every microbatch's 16-bit logits, until step() returns
            items["activations.pipeline_outputs"] = (
                ACT_BYTES * p.num_microbatches * _logits(spec, stage)
            )
    if p.pp > 1 and habits.pipeline_keeps_stage_outputs:
        # each in-flight microbatch's stage output, kept by the engine for its backward
        sending = set(stages) - {last}
        if sending:
            items["activations.stage_outputs"] = (
                ACT_BYTES * sbh / sp_div * peak_inflight(actions, sending)
            )
    if p.recompute == "full" and layers:
        items["activations.recompute_working"] = max(
            layer(recompute="none", moe_layer=m.is_moe_layer(i)) for i in layers
        )
    return items, chunk, count / p.vpp


def _keeps_last_outputs(spec: ExperimentSpec) -> bool:
    """Whether the pipeline engine keeps the last stage's outputs (the logits) for the step."""
    habits = get_framework(spec.training.framework).memory
    return spec.parallel.pp > 1 and habits.pipeline_keeps_last_outputs


COMPILED_LOSS_BYTES_PER_LOGIT = 2 * ACT_BYTES
"""Bytes per logit a compiled cross-entropy holds at its peak: the 16-bit logits and their
16-bit gradient, written by the backward's generated kernel before the logits are freed
(no fp32 upcast is materialised; docs/references/frameworks.md §Compiled loss)."""


def _logits(spec: ExperimentSpec, stage: int) -> float:
    """Logits of one microbatch on pipeline rank ``stage``'s TP rank (0 off the last stage)."""
    m, p = spec.model, spec.parallel
    if p.pp * p.vpp - 1 not in rank_stages(p.pp, p.vpp, p.pipeline_schedule, stage):
        return 0.0
    return m.seq_length / p.cp * p.micro_batch_size * m.vocab_size / p.tp


def _gather_unit_bytes(spec: ExperimentSpec, params: RankParams) -> float:
    """One unit of a sharded-data-parallel all-gather: the rank's largest layer, gathered.

    16-bit, its linear weights in FP8 when the stack gathers them so.
    """
    unit = WEIGHT_BYTES * params.largest_layer
    if fp8_gathers(spec):  # the layer's linear weights arrive in FP8
        linear_per_layer = params.linear_weights / max(len(params.layers), 1)
        unit -= (WEIGHT_BYTES - FP8_GATHER_BYTES) * linear_per_layer
    return unit


def _pipeline_recv_bytes(spec: ExperimentSpec, stage: int, actions: list[Action]) -> float:
    """Receive buffers a stack that allocates one per microbatch keeps on pipeline rank ``stage``.

    For each model stage of the rank: an activation buffer per microbatch unless it is the
    first stage, less those of the microbatches in flight (the buffer is then the first
    layer's input, counted with the layers), and a gradient buffer per microbatch unless it
    is the last stage. Each holds one stage-boundary tensor (s·b·h, /t under SP).
    """
    m, p = spec.model, spec.parallel
    boundary = ACT_BYTES * m.seq_length / p.cp * p.micro_batch_size * m.hidden_size
    boundary /= p.tp if p.sp and p.tp > 1 else 1
    last = p.pp * p.vpp - 1
    buffers = 0
    for s in rank_stages(p.pp, p.vpp, p.pipeline_schedule, stage):
        if s != 0:
            buffers += p.num_microbatches - peak_inflight(actions, {s})
        if s != last:
            buffers += p.num_microbatches
    return buffers * boundary


def _buffers(spec: ExperimentSpec, stage: int, actions: list[Action]) -> dict[str, float]:
    m, p = spec.model, spec.parallel
    sbh = m.seq_length / p.cp * p.micro_batch_size * m.hidden_size
    sp_div = p.tp if p.sp and p.tp > 1 else 1
    profile = get_framework(spec.training.framework)
    sharding = profile.sharding
    items: dict[str, float] = {}
    if p.pp > 1 and profile.memory.pipeline_recv_buffers_per_microbatch:
        items["buffers.pp_recv"] = _pipeline_recv_bytes(spec, stage, actions)
    elif p.pp > 1:  # send and receive, activations and gradients
        items["buffers.pp_p2p"] = 4 * ACT_BYTES * sbh / sp_div
    if p.sp and p.tp > 1:
        items["buffers.sp_all_gather"] = ACT_BYTES * sbh
    zero = effective_zero_stage(spec)
    params = rank_params(spec, stage)
    unit_params = params.largest_layer
    deferred = defers_grad_reduce(spec)
    if p.zero_stage >= 2 and (p.dp or 1) * p.cp > 1:
        bucket = float(p.grad_bucket_size_bytes)
        if profile.memory.unit_grads_materialised and not deferred:
            # the unit's reduce-scatter input, in the reduction dtype
            bucket = GRAD_REDUCE_BYTES[spec.training.grad_reduce_dtype or "fp32"] * unit_params
        items["buffers.dp_bucket"] = bucket
    if profile.memory.unit_grads_materialised and zero >= 2:
        # the 16-bit gradients of the unit whose backward runs, before they are reduced
        items["buffers.unit_grads"] = GRAD_BYTES * unit_params
    if zero == 3:
        # The layer being computed plus what the stack prefetches (FSDP: one unit ahead;
        # DeepSpeed: up to its prefetch bucket).
        unit = _gather_unit_bytes(spec, params)
        ahead = sharding.prefetch_units * unit
        if sharding.gather_granularity != "per_unit":
            ahead = min(ahead, sharding.prefetch_bytes)
        items["buffers.zero3_gather"] = unit
        if ahead:
            items["buffers.zero3_prefetch"] = ahead
        if sharding.root_unsharded_through_step:
            # embedding, final norm and LM head stay gathered in 16 bits for the step
            items["buffers.zero3_root"] = WEIGHT_BYTES * params.outside_layers
    gathers_in_step = zero == 3 or (zero == 2 and sharding.zero2_param_gather == "forward")
    if gathers_in_step and sharding.gather_output_buffers:
        items["buffers.gather_outputs"] = sharding.gather_output_buffers * _gather_unit_bytes(
            spec, params
        )
    if p.ep > 1 and m.is_moe:
        items["buffers.ep_all_to_all"] = 2 * ACT_BYTES * sbh * m.moe_top_k / sp_div
    return items


BACKWARD_BUFFERS = ("buffers.zero3_prefetch", "buffers.dp_bucket", "buffers.unit_grads")
"""Buffers of the layers' backward that a hook-driven stack issues only after the loss: the
next layer's prefetched gather, the gradient bucket being reduced and the 16-bit gradients
of the unit whose backward runs."""


def _one_phase_at_a_time(
    spec: ExperimentSpec,
    activations: dict[str, float],
    buffers: dict[str, float],
    loss_cache: float,
) -> None:
    """Count what only the layers' backward holds only beyond the loss phase (in place).

    The loss (logits, the LM head's and final norm's inputs, and the allocator's cached
    logits block) lives from the end of a microbatch's forward until the LM head's backward;
    a layer's recomputation starts after that, in the blocks the loss freed, and so do the
    backward's prefetched gather and gradient reduction under a stack that issues them from
    the layers' backward hooks (profile ``memory.backward_buffers_after_loss``). The two
    phases never coexist on a rank, so the peak holds the larger of them, not their sum: the
    backward's items (the recomputation first) fill the loss phase's bytes first.
    """
    backward = ["activations.recompute_working"]
    if get_framework(spec.training.framework).memory.backward_buffers_after_loss:
        backward += BACKWARD_BUFFERS
    room = activations.get("activations.output_layer", 0.0) + loss_cache
    for key in backward:
        items = activations if key.startswith("activations.") else buffers
        if not room or key not in items:
            continue
        excess = items[key] - room
        room = max(0.0, room - items[key])
        if excess > 0:
            items[key] = excess
        else:
            del items[key]


def _schedule(spec: ExperimentSpec) -> dict[int, list[Action]]:
    """Every pipeline rank's actions; one stage is gradient accumulation whatever the schedule."""
    return step_actions(spec.parallel)


def estimate_stage_memory(
    spec: ExperimentSpec,
    capacity_bytes: float,
    stage: int,
    schedule: dict[int, list[Action]] | None = None,
) -> MemoryEstimate:
    """Peak memory of pipeline rank ``stage`` (0-based); ``schedule`` saves rebuilding it."""
    actions = (schedule or _schedule(spec))[stage]
    states = rank_model_states(spec, stage)
    fp8_copies = fp8_copy_bytes(spec, stage)
    unsharded_grads = unsharded_grad_bytes(spec, stage)
    activations, chunk, inflight = _activations(spec, stage, actions)
    buffers = _buffers(spec, stage, actions)
    habits = get_framework(spec.training.framework).memory
    # a kept 16-bit logits tensor is never freed into the cache: it is counted live instead;
    # a compiled loss frees no 16-bit block before allocating larger fp32 ones
    if _keeps_last_outputs(spec) or (spec.parallel.tp == 1 and compiles_loss(spec)):
        cached = 0.0
    else:
        cached = habits.loss_cached_bytes_per_element
    loss_cache = cached * _logits(spec, stage)
    _one_phase_at_a_time(spec, activations, buffers, loss_cache)
    transient = sum(activations.values()) + sum(buffers.values())
    overhead = {
        "overhead.runtime": habits.runtime_reserved_bytes,
        "overhead.allocator": habits.allocator_overhead_fraction * transient,
        "overhead.loss_cache": loss_cache,
    }
    overhead = {k: v for k, v in overhead.items() if v > 0}
    breakdown = {
        "weights": states.weights,
        **({"weights.fp8_copies": fp8_copies} if fp8_copies else {}),
        "gradients": states.gradients,
        **({"gradients.unsharded_accumulation": unsharded_grads} if unsharded_grads else {}),
        "optimizer": states.optimizer,
        **activations,
        **buffers,
        **overhead,
    }
    return MemoryEstimate(
        stage=stage,
        weights_bytes=states.weights + fp8_copies,
        gradients_bytes=states.gradients + unsharded_grads,
        optimizer_bytes=states.optimizer,
        activations_bytes=sum(activations.values()),
        buffers_bytes=sum(buffers.values()),
        capacity_bytes=capacity_bytes,
        chunk_activation_bytes=chunk,
        inflight_microbatches=inflight,
        breakdown_bytes=breakdown,
        overhead_bytes=sum(overhead.values()),
        near_limit_bytes=habits.near_limit_fraction * capacity_bytes,
    )


def estimate_memory(
    spec: ExperimentSpec, capacity_bytes: float, stage: int | None = None
) -> MemoryEstimate:
    """Peak memory of one pipeline rank, or of the worst rank when ``stage`` is None.

    Args:
        spec: a validated experiment (``parallel.dp`` resolved).
        capacity_bytes: device memory, e.g. the catalog's ``hbm_capacity_bytes``.
        stage: pipeline rank, or None for the rank with the highest peak.
    """
    if stage is not None:
        return estimate_stage_memory(spec, capacity_bytes, stage)
    schedule = _schedule(spec)
    estimates = [
        estimate_stage_memory(spec, capacity_bytes, r, schedule) for r in range(spec.parallel.pp)
    ]
    return max(estimates, key=lambda e: e.peak_bytes)
