"""Assemble every simulated rank's program for one training step.

Inputs are the experiment spec, the pipeline schedule's action lists and the rank layout;
output is a :class:`~simtrain.parallel.program.Program` of tasks the engine replays:

- each schedule action (``F``/``B``/``W`` of a model chunk and microbatch) expands into the
  ops of that chunk's layers (:mod:`simtrain.workload.transformer`), cut into one compute
  task per layer and phase, with tensor/expert-parallel collectives as tasks on their own
  communication streams (``tp_comm``, ``ep_comm``);
- pipeline activations and gradients travel as point-to-point tasks on ``pp_comm``;
- data-parallel gradients are reduced in buckets on ``dp_comm`` as soon as the last
  microbatch's weight gradients of enough layers exist (overlapped with the rest of the
  backward), then the optimizer steps, then (ZeRO >= 1) updated parameters are all-gathered.

A communication op blocks the compute that consumes it, except that the weight-gradient GEMM
that directly follows an input-gradient collective runs concurrently with it (Megatron's
asynchronous tensor-parallel communication in the backward).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

from simtrain.catalog.frameworks import get_framework
from simtrain.gcpause import without_cyclic_gc
from simtrain.parallel.layout import RankLayout
from simtrain.parallel.overlap import TpCommImpl, feasible_steps, step_actions, tp_overlapped
from simtrain.parallel.program import Program, Task
from simtrain.parallel.schedules import Action, split_backwards, stage_rank
from simtrain.parallel.segments import SegmentPlan, segment_ops
from simtrain.parallel.sharding import with_param_gathers
from simtrain.parallel.stages import chunk_layers, recomputed_layers
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.framework import GRAD_REDUCE_BYTES
from simtrain.specs.framework_resolve import (
    all_reduces_grads,
    compiles_loss,
    effective_zero_stage,
    uses_bf16_optimizer,
)
from simtrain.workload.eager import EagerModules
from simtrain.workload.linear import weight_cast_op
from simtrain.workload.ops import Op
from simtrain.workload.optimizers import optimizer_op
from simtrain.workload.primitives import FP8_DTYPES, memory_op
from simtrain.workload.shard import fp8_recipe_in_effect
from simtrain.workload.transformer import (
    ACT_BYTES,
    LayerOps,
    Shard,
    embedding_ops,
    head_ops,
    layer_ops,
    per_op_recompute,
)

SHARD_AXIS = "dp_shard"  # pseudo-axis of a rank's ZeRO shard group (see _RankBuilder.group)
EP_HOPS = ("ep_intra", "ep_inter")  # pseudo-axes of a DeepEP dispatch's two hops (ep_hop_group)
Dep = int | str  # a task index, or the key of a point-to-point transfer resolved at the end


def comm_category(axis: str) -> str:
    """Time-breakdown category of a collective on ``axis``: its leading mesh axis.

    Examples:
        >>> comm_category("dp-cp"), comm_category("dp_shard"), comm_category("tp")
        ('dp_comm', 'dp_comm', 'tp_comm')
    """
    return f"{axis.split('-')[0].split('_')[0]}_comm"


@dataclass
class _RankBuilder:
    """Appends one rank's tasks; tracks what the next compute task has to wait for."""

    rank: int
    program: Program
    layout: RankLayout
    deps: dict[int, list[Dep]]
    instances: dict[str, int]
    dp_axis: str
    shard_size: int | None
    gpus_per_node: int = 1
    waiting: list[Dep] = field(default_factory=list)
    deferred: list[int] = field(default_factory=list)
    last_compute: int | None = None
    sync_next: bool = False  # the next compute task waits on the host for the device
    comm_seq: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    groups: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def add(self, task: Task, deps: Sequence[Dep]) -> int:
        """Append ``task``; a collective that a simulated peer already created is shared.

        Every simulated member of a collective adds its producers to the one task of that
        collective instance (same ``collective_key``), so a collective is one engine event
        however many of its members are simulated.
        """
        key = task.collective_key
        if key:
            shared = self.instances.get(key)
            if shared is not None:
                self.deps[shared].extend(deps)
                return shared
        index = self.program.add(task)
        self.deps[index] = list(deps)
        if key:
            self.instances[key] = index
        return index

    def group(self, axis: str) -> tuple[int, ...]:
        """The rank's process group along ``axis`` (cached: looked up once per axis).

        ``dp_shard`` is the rank's ZeRO shard group: a contiguous slice of the
        data-parallel group (all of it unless hybrid sharding sets a smaller size).
        ``ep_intra`` and ``ep_inter`` are the two hops of a DeepEP dispatch: the rank's
        expert-parallel peers in its node, and those on its rail in other nodes.
        """
        group = self.groups.get(axis)
        if group is None:
            if axis == SHARD_AXIS:
                group = shard_groups(self.group(self.dp_axis), self.rank, self.shard_size)[0]
            elif axis in EP_HOPS:
                group = ep_hop_group(self.group("ep"), self.rank, self.gpus_per_node, axis)
            else:
                group = tuple(self.layout.group_of(self.rank, axis))
            self.groups[axis] = group
        return group

    def comm(self, op: Op, label: str, microbatch: int) -> int:
        """Append a collective on the op's axis after the last compute task."""
        group = self.group(op.axis)
        seq = self.comm_seq[op.axis]
        self.comm_seq[op.axis] += 1
        producer = [self.last_compute] if self.last_compute is not None else []
        key = f"{op.axis}|{group[0]}|{seq}" if len(group) > 1 else ""
        shared = self.instances.get(key) if key else None
        if shared is not None:  # a simulated peer created this collective already
            self.deps[shared] += producer + self.waiting
            self.waiting = []
            return shared
        index = self.add(
            Task(
                rank=self.rank,
                stream=f"{op.axis}_comm",
                label=f"{label}:{op.name}",
                category=comm_category(op.axis),
                ops=(op,),
                group=group,
                collective_key=key,
                microbatch=microbatch,
            ),
            producer + self.waiting,
        )
        self.waiting = []
        return index

    def emit(self, plan: SegmentPlan, label: str, stage: int, microbatch: int) -> dict[int, int]:
        """Append a segment plan as tasks; return the last compute task of each layer."""
        blocks = self.emit_blocks(plan, label, stage, microbatch, None)
        while True:
            try:
                next(blocks)
            except StopIteration as done:
                return done.value

    def emit_blocks(
        self,
        plan: SegmentPlan,
        label: str,
        stage: int,
        microbatch: int,
        layer_done: Callable[[int, int], None] | None,
    ) -> Generator[None, None, dict[int, int]]:
        """:meth:`emit`, pausing before each compute task that waits for a collective.

        The pauses are where another microbatch's work can fill the gap (two-microbatch
        overlap). ``layer_done(layer, task)`` is called as each layer's last compute task is
        appended, before the collectives issued after it (a gradient hook's place in the
        issue order). Returns the last compute task of each layer.
        """
        last_of_layer: dict[int, int] = {}
        issued: dict[int, int] = {}  # segment position -> task index of its collective
        ends = _layer_ends(plan) if layer_done is not None else {}
        for position, seg in enumerate(plan.segments):
            if seg.is_comm:
                issued[position] = self.comm(seg.ops[0], label, microbatch)
                continue
            if seg.waits_for:
                yield
            phase = seg.ops[0].phase
            category = {"recompute": "recompute", "optimizer": "optimizer"}.get(phase, "compute")
            index = self.add(
                Task(
                    self.rank,
                    "compute",
                    label,
                    category,
                    seg.ops,
                    stage=stage,
                    microbatch=microbatch,
                    host_sync=self.sync_next,
                ),
                self.waiting + [issued[w] for w in seg.waits_for],
            )
            self.sync_next = False
            for layer in seg.layers:
                last_of_layer[layer] = index
            self.last_compute, self.waiting = index, []
            for layer in ends.get(position, ()):
                layer_done(layer, index)
        self.deferred += [issued[w] for w in plan.trailing]
        return last_of_layer

    def state(self) -> tuple[list[Dep], list[int], int | None]:
        """What the next compute task of the current flow waits for (to switch flows)."""
        return self.waiting, self.deferred, self.last_compute

    def resume(self, state: tuple[list[Dep], list[int], int | None]) -> None:
        """Continue a flow whose :meth:`state` was saved."""
        self.waiting, self.deferred, self.last_compute = state

    def settle(self) -> list[Dep]:
        """End of an action: return everything its successors must wait for."""
        self.waiting += self.deferred
        self.deferred = []
        tail = list(self.waiting)
        if self.last_compute is not None:
            tail.append(self.last_compute)
        return tail


@dataclass(frozen=True)
class ChunkOps:
    """Ops of one model chunk for one microbatch, per action kind."""

    forward: tuple[Op, ...]
    first_forward: tuple[Op, ...]  # the step's first forward (ZeRO-2 under FSDP gathers here)
    backward: tuple[Op, ...]  # including weight gradients
    backward_input: tuple[Op, ...]  # without weight gradients (for schedules with W)
    weight: tuple[Op, ...]  # the weight gradients alone
    layer_elements: dict[int, int]  # local weight elements per layer (-1: input embedding)
    fp8_elements: int  # local weight elements of FP8 linear layers (cast once per step)
    # routed-expert weight elements per layer (part of layer_elements), reduced over edp
    expert_elements: dict[int, int] = field(default_factory=dict)

    @property
    def weight_elements(self) -> int:
        """Local weight elements of the chunk, for the optimizer and the parameter gather."""
        return sum(self.layer_elements.values())


def _recomputed(ops: Sequence[Op]) -> tuple[Op, ...]:
    from dataclasses import replace

    return tuple(replace(op, phase="recompute") for op in ops)


def _minimal_recompute(ops: LayerOps) -> list[Op]:
    """Forward ops that ``minimal`` recomputation re-runs: all but the weight matmuls.

    The outputs of the weight GEMMs (QKV, output projection, MLP) are kept; the attention
    core, norms and elementwise ops (activation function, residual adds, rotary) run again
    from them, in forward order (docs/references/tpu.md §7).
    """
    core = set(ops.attention_core)
    return [op for op in ops.forward if op in core or op.kind in ("norm", "elementwise")]


LayerCache = dict[int, tuple[LayerOps, tuple[Op, ...]]]
"""Layer -> (its ops, the forward ops its recomputation re-runs) under one spec and shard."""


def _layer(spec: ExperimentSpec, shard: Shard, layer: int) -> tuple[LayerOps, tuple[Op, ...]]:
    """A layer's ops and the forward ops its recomputation re-runs (if it is recomputed)."""
    ops = layer_ops(spec.model, shard, layer)
    recompute = spec.parallel.recompute
    if recompute == "full":
        return ops, _recomputed(ops.forward)
    if recompute == "selective":
        return ops, _recomputed(ops.recomputed(spec.parallel.selective_modules))
    if recompute == "minimal":
        return ops, _recomputed(_minimal_recompute(ops))
    if recompute == "per_op":
        return ops, _recomputed(per_op_recompute(spec.model, shard, layer, ops))
    return ops, ()


def chunk_ops(
    spec: ExperimentSpec,
    shard: Shard,
    layers: range,
    first: bool,
    last: bool,
    cache: LayerCache | None = None,
) -> ChunkOps:
    """Ops of one model chunk (``layers``; ``first``/``last``: it holds the embedding/head).

    The builder cuts these into every action's tasks; the analytical estimator
    (:mod:`simtrain.estimator`) times the same ops. ``cache`` keeps each layer's ops for
    other chunks of the same spec and shard (the estimator builds many).
    """
    model, recompute = spec.model, spec.parallel.recompute
    forward: list[Op] = []
    backward: list[Op] = []
    if first:
        emb_f, emb_b = embedding_ops(model, shard)
        forward += emb_f
    if cache is None:
        per_layer = [_layer(spec, shard, layer) for layer in layers]
    else:
        per_layer = []
        for layer in layers:
            found = cache.get(layer)
            if found is None:
                found = cache[layer] = _layer(spec, shard, layer)
            per_layer.append(found)
    for ops, _ in per_layer:
        forward += ops.forward
    if last:
        head = head_ops(model, shard)
        split = next(i for i, op in enumerate(head) if op.name == "cross_entropy") + 1
        forward += head[:split]
        backward += head[split:]
    full = recomputed_layers(layers, spec.parallel.recompute_layer_fraction)
    for layer, (ops, recomputed) in zip(reversed(layers), reversed(per_layer), strict=True):
        if recompute != "full" or layer in full:
            backward += recomputed
        backward += ops.backward
    if first:
        backward += emb_b
    embedding = 0
    if first:
        # The token table is a weight of its own unless the LM head on this same chunk is
        # tied to it (then the head's weight-gradient GEMM already counts it).
        positions = model.seq_length if model.position_embedding == "learned" else 0
        shared = model.tied_embeddings and last
        embedding = (
            (0 if shared else model.vocab_size // shard.tp) + positions
        ) * model.hidden_size
    profile = get_framework(spec.training.framework)
    tp_args = (shard.tp, model.num_layers, *tp_overlap_ways(spec))
    forward = tp_overlapped(forward, spec.parallel.tp_comm_overlap or "wgrad", *tp_args)
    backward = tp_overlapped(backward, spec.parallel.tp_comm_overlap or "wgrad", *tp_args)
    tensors = _layer_weight_tensors(backward)
    if embedding:
        tensors[-1].append(embedding)
    sharded = (spec.parallel.dp or 1) * spec.parallel.cp > 1
    stage = effective_zero_stage(spec)
    behaviour = profile.sharding
    if sharded and stage >= 2 and profile.memory.unit_grads_materialised:
        reduce_bytes = GRAD_REDUCE_BYTES[spec.training.grad_reduce_dtype]
        backward = with_grad_copy_in(backward, tensors, reduce_bytes)
    if uses_bf16_optimizer(spec):
        backward = with_fp32_grad_accumulation(backward, tensors)
    backward_input = [op for op in backward if op.phase != "bwd_weight"]
    weight = tuple(op for op in backward if op.phase == "bwd_weight")
    gathered_forward = forward
    if sharded and stage == 3:
        forward = gathered_forward = with_param_gathers(forward, tensors, SHARD_AXIS, behaviour)
        backward = with_param_gathers(backward, tensors, SHARD_AXIS, behaviour)
        backward_input = with_param_gathers(backward_input, tensors, SHARD_AXIS, behaviour)
    elif sharded and stage in (1, 2) and gathers_in_forward(spec):
        # FSDP SHARD_GRAD_OP, or ZeRO-1/2 with the gather overlapped with the forward:
        # gathered unit by unit in the step's first forward, then kept.
        gathered_forward = with_param_gathers(forward, tensors, SHARD_AXIS, behaviour)
    forward_ops = tuple(forward)
    return ChunkOps(
        forward=forward_ops,
        # one tuple when the first forward gathers nothing more (the estimator then walks it once)
        first_forward=forward_ops if gathered_forward is forward else tuple(gathered_forward),
        backward=tuple(backward),
        backward_input=tuple(backward_input),
        weight=weight,
        layer_elements={layer: sum(sizes) for layer, sizes in tensors.items()},
        expert_elements=_expert_weight_elements(backward),
        fp8_elements=sum(op.m * op.n * op.batch for op in weight if op.dtype in FP8_DTYPES),
    )


SEPARATE_PROJECTION_DGRADS = ("qkv_dgrad",)
"""Input-gradient GEMMs that sum several linears' in a stack with separate projections."""


def tp_overlap_ways(spec: ExperimentSpec) -> tuple[TpCommImpl, bool, frozenset[str]]:
    """How the stack overlaps TP communication: :func:`tp_overlapped`'s last three arguments.

    The implementation of ``tp_comm_overlap: gemm`` and whether the stack gathers FP8 inputs
    as 8-bit come from the framework profile (the latter only under the per-tensor
    ``current`` scaling torchao's Float8 tensor parallelism requires). Under
    ``symmetric_memory`` (torchtitan, whose Llama runs ``wq``/``wk``/``wv`` and a gated MLP's
    ``w1``/``w3`` as separate linears, docs/references/frameworks.md §Eager modules) the
    attention and gated-MLP input gradients are sums of matmuls, which the micro-pipeline
    pass does not fuse with their reduce-scatters.
    """
    profile = get_framework(spec.training.framework)
    impl = profile.overlaps.tp_comm_impl
    recipe = fp8_recipe_in_effect(spec.training.dtype, spec.training.fp8_recipe)
    fp8_gathers = profile.tp_fp8_all_gather and recipe == "current"
    summed: frozenset[str] = frozenset()
    if impl == "symmetric_memory":
        gated = ("mlp_fc1_dgrad",) if spec.model.is_gated else ()
        summed = frozenset((*SEPARATE_PROJECTION_DGRADS, *gated))
    return impl, fp8_gathers, summed


def with_grad_copy_in(
    ops: Sequence[Op], tensors: dict[int, list[int]], reduce_bytes: int
) -> list[Op]:
    """``ops`` with each unit's reduce-scatter copy-in after its last backward op.

    FSDP2's ``foreach_reduce`` copies a unit's 16-bit gradients into one flat
    reduce-scatter input in the reduction dtype (``torch._chunk_cat``, upcasting on the way)
    on its reduce-scatter stream, and the compute stream waits for that copy before it frees
    the gradients and goes on (docs/references/frameworks.md §FSDP2 copy-in and copy-out):
    2 + ``reduce_bytes`` bytes per weight element, once per backward that reduces. Under
    pipelining, where the reduction waits for the last microbatch, it stands for the upcast
    into the fp32 accumulator that FSDP2 runs instead (labelled approximation).

    Examples:
        >>> from simtrain.workload.primitives import memory_op
        >>> ops = [memory_op(n, "norm", "bwd_input", 1, layer) for n, layer in (("a", 1), ("b", 0))]
        >>> [(op.name, op.bytes_accessed) for op in with_grad_copy_in(ops, {1: [10], 0: [5]}, 4)]
        [('a', 1.0), ('grad_copy_in', 60.0), ('b', 1.0), ('grad_copy_in', 30.0)]
    """
    result: list[Op] = []
    for i, op in enumerate(ops):
        result.append(op)
        ends_layer = i + 1 == len(ops) or ops[i + 1].layer != op.layer
        elements = sum(tensors.get(op.layer, ()))
        if ends_layer and elements:
            size = elements * (ACT_BYTES + reduce_bytes)
            result.append(memory_op("grad_copy_in", "elementwise", "bwd_weight", size, op.layer))
    return result


FP32_GRAD_ACCUMULATION_BYTES = 18
"""Bytes per weight element of BF16_Optimizer's ``update_hp_grads``: the bf16 gradient read
and upcast into a new fp32 tensor (2 + 4), which is added into the fp32 accumulator (4 + 4
read, 4 written)."""


def with_fp32_grad_accumulation(ops: Sequence[Op], tensors: dict[int, list[int]]) -> list[Op]:
    """``ops`` (a chunk's backward) followed by BF16_Optimizer's fp32 gradient accumulation.

    After every microbatch's backward DeepSpeed's BF16_Optimizer adds the chunk's bf16
    gradients, parameter by parameter, into full-size fp32 copies (``update_hp_grads``,
    called by the pipeline engine after each backward and by the optimizer's own
    ``backward`` otherwise; docs/references/frameworks.md §DeepSpeed BF16 optimizer and
    pipeline engine): one memory-bound pass over the chunk's weights, at the end of its
    backward.

    Examples:
        >>> from simtrain.workload.primitives import memory_op
        >>> ops = [memory_op("a", "norm", "bwd_input", 1, 0)]
        >>> [(op.name, op.bytes_accessed) for op in with_fp32_grad_accumulation(ops, {0: [10]})]
        [('a', 1.0), ('fp32_grad_accumulation', 180.0)]
    """
    elements = sum(sum(sizes) for sizes in tensors.values())
    if not ops or not elements:
        return list(ops)
    size = elements * FP32_GRAD_ACCUMULATION_BYTES
    layer = ops[-1].layer
    return [*ops, memory_op("fp32_grad_accumulation", "elementwise", "bwd_weight", size, layer)]


def gathers_in_forward(spec: ExperimentSpec) -> bool:
    """Whether ZeRO-1/2 gathers updated parameters layer by layer in the next forward.

    FSDP's SHARD_GRAD_OP always does; Megatron's distributed optimizer does under
    ``--overlap-param-gather`` (``parallel.overlap_param_gather``); otherwise the gather
    follows the optimizer step.
    """
    stage = effective_zero_stage(spec)
    behaviour = get_framework(spec.training.framework).sharding
    if stage == 2 and behaviour.zero2_param_gather == "forward":
        return True
    return stage in (1, 2) and bool(spec.parallel.overlap_param_gather)


def make_shard(spec: ExperimentSpec) -> Shard:
    """How one rank's share of every layer is cut under the experiment's parallel settings."""
    p = spec.parallel
    ep_nodes = 1
    if p.ep > 1:  # nodes one expert-parallel group spans (ranks fill nodes in order)
        group = make_layout(spec).group_of(0, "ep")
        ep_nodes = len({rank // spec.cluster.gpus_per_node for rank in group})
    return Shard(
        p.micro_batch_size,
        p.tp,
        p.sp,
        p.cp,
        p.ep,
        spec.training.dtype,
        spec.training.attention_kernel,
        p.cp_algorithm,
        spec.training.fp8_recipe or "delayed",  # the default recipe of dtype fp8
        etp=p.expert_tp,
        dispatcher=p.moe_dispatcher,
        ep_nodes=ep_nodes,
        eager=eager_modules(spec),
        cross_entropy=get_framework(spec.training.framework).cross_entropy,
    )


def eager_modules(spec: ExperimentSpec) -> EagerModules:
    """Which of the model's modules run as eager kernel chains (:mod:`simtrain.workload.eager`).

    Under a profile with ``eager_modules``, all of them run eagerly, unless the experiment is
    compiled: torch.compile then fuses each transformer block, and the final norm and the
    loss, outside the blocks, stay eager (docs/references/frameworks.md §Eager modules); a
    stack that compiles its loss too leaves only the final norm eager (§Compiled loss).
    """
    if not get_framework(spec.training.framework).eager_modules:
        return "none"
    if spec.training.execution_mode != "compiled":
        return "all"
    return "norm" if compiles_loss(spec) else "head"


def p2p_op(spec: ExperimentSpec) -> Op:
    """The pipeline transfer of one microbatch's activations (or their gradients)."""
    p, model = spec.parallel, spec.model
    # Activations cross stages scattered over the TP group (Narayanan et al. §4.1) when the
    # stack does so; otherwise every TP rank sends the whole tensor.
    scatter = p.tp if get_framework(spec.training.framework).pipeline_scatter_gather else 1
    size = p.micro_batch_size * model.seq_length // p.cp * model.hidden_size * ACT_BYTES // scatter
    return Op(name="send_recv", kind="p2p", comm="send_recv", axis="pp", comm_bytes=size)


def make_layout(spec: ExperimentSpec) -> RankLayout:
    """The rank layout of the experiment's parallel degrees and order."""
    return RankLayout.from_spec(spec.parallel)


def _expert_weight_elements(ops: Sequence[Op]) -> dict[int, int]:
    """Local routed-expert weight elements per layer (replicated only over edp)."""
    per_layer: dict[int, int] = defaultdict(int)
    for op in ops:
        if op.kind == "gemm" and op.phase == "bwd_weight" and op.name.startswith("expert_"):
            per_layer[op.layer] += op.m * op.n * op.batch
    return dict(per_layer)


def _layer_weight_tensors(ops: Sequence[Op]) -> dict[int, list[int]]:
    """Local weight-tensor elements per layer, from the weight-gradient GEMMs in ``ops``."""
    per_layer: dict[int, list[int]] = defaultdict(list)
    for op in ops:
        if op.kind == "gemm" and op.phase == "bwd_weight":
            per_layer[op.layer].append(op.m * op.n * op.batch)
    return per_layer


class _StepAssembler:
    """Builds the program of one step rank by rank (internal to :func:`build_program`)."""

    def __init__(self, spec: ExperimentSpec, full: bool) -> None:
        p, model = spec.parallel, spec.model
        self.spec, self.p = spec, p
        self.layout = make_layout(spec)
        self.num_chunks = p.pp * p.vpp
        shard = make_shard(spec)
        self.fp8_recipe = shard.recipe
        self.chunks = [
            chunk_ops(spec, shard, layers, c == 0, c == self.num_chunks - 1)
            for c, layers in enumerate(chunk_layers(model.num_layers, self.num_chunks))
        ]
        self.schedule_name = p.pipeline_schedule if p.pp > 1 else "1f1b"
        self.actions_by_stage = step_actions(p)
        # each stage's steps: single actions, or forward-backward pairs that can run together
        self.steps_by_stage = feasible_steps(
            self.actions_by_stage, self.num_chunks, bool(p.overlap_ep_comm)
        )[0]
        world = self.layout.world_size
        ranks = (
            list(range(world))
            if full
            else [self.layout.rank({"pp": stage}) for stage in range(p.pp)]
        )
        self.program = Program(
            world_size=world,
            simulated_ranks=tuple(ranks),
            weights={r: (1 if full else world // p.pp) for r in ranks},
            syncs_on_p2p=not p.overlap_p2p_comm,
        )
        self.deps: dict[int, list[Dep]] = {}
        self.instances: dict[str, int] = {}  # collective key -> its one task
        self._segment_cache: dict[tuple[int, str, bool], SegmentPlan] = {}
        self.p2p: dict[str, int] = {}
        self.profile = get_framework(spec.training.framework)
        self.zero_stage = effective_zero_stage(spec)
        self.p2p_op = p2p_op(spec)
        self.grad_bytes = GRAD_REDUCE_BYTES[spec.training.grad_reduce_dtype]
        self.dp_axis = "dp-cp" if p.cp > 1 else "dp"

    def _segments(self, chunk: int, body: str, split_layers: bool) -> SegmentPlan:
        """Segments of one chunk's forward/backward/weight ops, cut once and shared."""
        key = (chunk, body, split_layers)
        cached = self._segment_cache.get(key)
        if cached is None:
            ops = getattr(self.chunks[chunk], body)
            cached = self._segment_cache[key] = segment_ops(ops, split_layers)
        return cached

    def build(self) -> Program:
        """Assemble all simulated ranks, then resolve cross-rank dependencies."""
        for rank in self.program.simulated_ranks:
            self._build_rank(rank)
        p2p = self.p2p
        for index, task_deps in self.deps.items():
            deps = tuple(p2p[d] if isinstance(d, str) else d for d in task_deps)
            self.program.tasks[index].deps = deps if len(deps) < 2 else tuple(dict.fromkeys(deps))
        return self.program

    def _send(
        self,
        rb: _RankBuilder,
        key: str,
        peer_chunk: int,
        label: str,
        chunk: int,
        mb: int,
        after: list[Dep],
    ) -> None:
        peer_stage = stage_rank(
            self.schedule_name, peer_chunk, mb, self.p.pp, self.p.num_microbatches
        )
        peer = rb.group("pp")[peer_stage]  # the pp group is ordered by stage
        op = self.p2p_op
        send = self.p2p[key] = rb.add(
            Task(
                rb.rank,
                "pp_comm",
                f"{label}:send",
                "pp_comm",
                (op,),
                group=(rb.rank, peer),
                stage=chunk,
                microbatch=mb,
            ),
            after,
        )
        if not self.p.overlap_p2p_comm:  # a blocking send: the sender's compute waits
            rb.waiting.append(send)

    def _build_rank(self, rank: int) -> None:
        p = self.p
        rb = _RankBuilder(
            rank,
            self.program,
            self.layout,
            self.deps,
            self.instances,
            self.dp_axis,
            p.zero_shard_group_size,
            self.spec.cluster.gpus_per_node,
        )
        stage = self.layout.coords(rank)["pp"]
        actions = self.actions_by_stage[stage]
        split = split_backwards(actions)
        sharding = self.profile.sharding
        # ZeRO-3 under FSDP reduce-scatters each unit (layer) as its backward ends.
        per_unit = self.zero_stage == 3 and sharding.reduce_scatter_granularity == "per_unit"
        bucket = 1 if per_unit else p.grad_bucket_size_bytes
        all_reduces = all_reduces_grads(self.spec)
        grads = _GradientReducer(
            rb,
            all_reduces,
            bucket,
            overlap_replica=p.overlap_replica_grad_reduce is not False,
            shares_gather_communicator=not sharding.separate_reduce_scatter_group,
        )
        # Routed experts are replicated only over the expert-data-parallel group.
        experts = _GradientReducer(
            rb,
            all_reduces,
            bucket,
            overlap_replica=p.overlap_replica_grad_reduce is not False,
            expert=True,
        )
        # FSDP and DeepSpeed reduce sharded gradients after every microbatch's backward.
        every_mb = self.zero_stage >= 2 and sharding.reduce_every_microbatch
        first_forward: dict[int, int] = {}  # chunk -> microbatch of its first forward
        # A stage's gradients are complete after the last action on this rank that computes
        # its weight gradients (a W, or a B that is not split); DualPipe holds two stages.
        last_grad_action = {
            a.stage: i
            for i, a in enumerate(actions)
            if a.kind == "W" or (a.kind == "B" and (a.stage, a.microbatch) not in split)
        }
        hooks = p.overlap_grad_reduce and max(len(grads.group), len(experts.group)) > 1
        # Transfers are keyed by pipeline (its first rank) so that, in full mode, a stage
        # waits for the send of its own pipeline replica.
        pipeline = rb.group("pp")[0]
        position_of = {action: i for i, action in enumerate(actions)}
        totals = {"elements": 0, "experts": 0, "fp8": 0}
        last_chunk = self.num_chunks - 1

        def run(action: Action) -> Iterator[None]:
            """Emit one action; pauses where a paired action may fill a wait."""
            chunk, mb, label = action.stage, action.microbatch, str(action)
            position = position_of[action]
            if action.kind == "F":
                if chunk > 0:
                    rb.waiting.append(f"{pipeline}:F{chunk - 1}:{mb}")
                body = "first_forward" if first_forward.setdefault(chunk, mb) == mb else "forward"
                # the first and last chunks load the microbatch's inputs and labels
                rb.sync_next = self.profile.syncs_on_batch_load and chunk in (0, last_chunk)
                yield from rb.emit_blocks(
                    self._segments(chunk, body, False), label, chunk, mb, None
                )
                tail = rb.settle()
                if chunk < self.num_chunks - 1:
                    self._send(rb, f"{pipeline}:F{chunk}:{mb}", chunk + 1, label, chunk, mb, tail)
                return
            if action.kind == "B" and chunk < self.num_chunks - 1:
                rb.waiting.append(f"{pipeline}:B{chunk + 1}:{mb}")
            split_w = (chunk, mb) in split
            body = "weight" if action.kind == "W" else "backward_input" if split_w else "backward"
            # the loss, on the last chunk, is read on the host before its backward
            rb.sync_next = self.profile.syncs_on_loss and action.kind == "B" and chunk == last_chunk
            owns_grads = last_grad_action[chunk] == position
            computes_grads = action.kind == "W" or not split_w
            reduces = owns_grads or (every_mb and computes_grads)
            segments = self._segments(chunk, body, reduces and hooks)
            ops = self.chunks[chunk]

            def reduce_layer(layer: int, task: int) -> None:
                """A layer's gradients are ready: its hook adds them to the buckets."""
                routed = ops.expert_elements.get(layer, 0)
                dense = ops.layer_elements.get(layer, 0) - routed
                grads.add(dense * self.grad_bytes, task, overlap=hooks)
                experts.add(routed * self.grad_bytes, task, overlap=hooks)

            yield from rb.emit_blocks(segments, label, chunk, mb, reduce_layer if reduces else None)
            rb.settle()
            if action.kind == "B" and chunk > 0:
                after = [rb.last_compute] if rb.last_compute is not None else []
                self._send(rb, f"{pipeline}:B{chunk}:{mb}", chunk - 1, label, chunk, mb, after)
            if owns_grads:
                totals["elements"] += ops.weight_elements
                totals["experts"] += sum(ops.expert_elements.values())
                totals["fp8"] += ops.fp8_elements
            if reduces:
                if every_mb:
                    grads.flush(rb.last_compute)
                    experts.flush(rb.last_compute)
                grads.release()
                experts.release()

        for step in self.steps_by_stage[stage]:
            _interleave(rb, [run(action) for action in step])
        expert_elements, fp8_elements = totals["experts"], totals["fp8"]
        dense_elements = totals["elements"] - expert_elements
        grads.flush(rb.last_compute)
        experts.flush(rb.last_compute)
        grads.release()
        experts.release()
        sharded = self.zero_stage >= 1
        updated = dense_elements / (len(grads.shard) if sharded else 1)
        updated += expert_elements / (len(experts.shard) if sharded else 1)
        rb.waiting += grads.tasks + experts.tasks
        step: tuple[Op, ...] = (optimizer_op(updated, self.spec.training.optimizer),)
        if fp8_elements:  # refresh the FP8 weight copies once per step
            step += (weight_cast_op(fp8_elements, self.fp8_recipe),)
        rb.emit(segment_ops(step, False), "optimizer", -1, -1)
        # ZeRO-3 gathers parameters layer by layer instead, and so does ZeRO-2 under FSDP
        # (in the next step's first forward).
        if self.zero_stage in (1, 2) and not gathers_in_forward(self.spec):
            grads.all_gather_params(dense_elements * ACT_BYTES, rb.last_compute)
            experts.all_gather_params(expert_elements * ACT_BYTES, rb.last_compute)


def _layer_ends(plan: SegmentPlan) -> dict[int, list[int]]:
    """The layers whose last compute segment is at each position of ``plan``."""
    last: dict[int, int] = {}
    for position, seg in enumerate(plan.segments):
        if not seg.is_comm:
            for layer in seg.layers:
                last[layer] = position
    ends: dict[int, list[int]] = defaultdict(list)
    for layer, position in last.items():
        ends[position].append(layer)
    return ends


def _interleave(rb: _RankBuilder, flows: list[Iterator[None]]) -> None:
    """Emit one action, or two actions interleaved (two-microbatch overlap).

    Each flow runs until it must wait for one of its collectives, then the other flow's
    next compute fills the wait (DualPipe's overlapped forward-backward chunks). Each flow
    keeps its own dependencies; afterwards the rank waits for what either left in flight.
    """
    if len(flows) == 1:
        for _ in flows[0]:
            pass
        return
    waiting, _, last = rb.state()
    states = [rb.state(), (list(waiting), [], last)]
    live = [True] * len(flows)
    current = 0
    while any(live):
        try:
            next(flows[current])
        except StopIteration:
            live[current] = False
        states[current] = rb.state()
        other = 1 - current
        if live[other]:
            current = other
            rb.resume(states[current])
    lasts = [state[2] for state in states if state[2] is not None]
    rb.resume(
        (
            states[0][0] + states[1][0],
            states[0][1] + states[1][1],
            max(lasts) if lasts else None,
        )
    )


@dataclass
class _GradientReducer:
    """Buckets one rank's gradients and issues their data-parallel reductions.

    One reducer serves the dense parameters (the data-parallel group), another the routed
    experts (``expert``: the expert-data-parallel group, edp ranks).
    ZeRO 0 (and DeepSpeed's BF16_Optimizer, which shards only the optimizer states) all-reduces
    each bucket over the data-parallel group (``all_reduces``). ZeRO >= 1 reduce-scatters it
    over the shard group and, under hybrid sharding, all-reduces the shard across the shard
    groups; updated parameters are all-gathered over the shard group.
    """

    rb: _RankBuilder
    all_reduces: bool
    bucket_size_bytes: float
    overlap_replica: bool = True
    expert: bool = False
    shares_gather_communicator: bool = False
    """The dense shard group's reduce-scatters and parameter gathers go through one
    communicator (``ShardingBehaviour.separate_reduce_scatter_group`` false): they queue on
    one stream in issue order, the gathers' (``dp_shard_comm``)."""
    pending_bytes: float = 0.0
    tasks: list[int] = field(default_factory=list)
    held: list[tuple[int | None, float]] = field(default_factory=list)
    """(reduce-scatter task, shard bytes) of the all-reduces across shard groups waiting
    for the end of the backward (not overlapped)."""
    issued: int = 0  # collectives issued: the sequence number in their collective keys
    group: tuple[int, ...] = ()
    shard: tuple[int, ...] = ()
    replica: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        size = self.rb.shard_size
        if self.expert:  # the expert-data-parallel group; hybrid shards at most over it
            self.group = self.rb.group("edp")
            size = min(size, len(self.group)) if size else None
        else:
            self.group = self.rb.group(self.rb.dp_axis)
        self.shard, self.replica = shard_groups(self.group, self.rb.rank, size)

    def add(self, size_bytes: float, after: int, overlap: bool) -> None:
        """Gradients of ``size_bytes`` are ready once task ``after`` ends."""
        self.pending_bytes += size_bytes
        if overlap and self.pending_bytes >= self.bucket_size_bytes:
            self.flush(after)

    def flush(self, after: int | None) -> None:
        """Reduce the pending bucket once task ``after`` ends."""
        size, self.pending_bytes = self.pending_bytes, 0.0
        if size <= 0 or len(self.group) == 1:
            return
        if self.all_reduces:
            self.tasks.append(self._collective("grad_all_reduce", "all_reduce", size, after))
            return
        last = after
        if len(self.shard) > 1:
            last = self._collective("grad_reduce_scatter", "reduce_scatter", size, after)
        if len(self.replica) > 1:
            shard_bytes = size / len(self.shard)
            if not self.overlap_replica:  # issued by release() once the backward is done
                self.held.append((last, shard_bytes))
                return
            last = self._across_shards(shard_bytes, last, None)
        if last is not None:
            self.tasks.append(last)

    def release(self) -> None:
        """Issue the held all-reduces across shard groups after the rank's last compute.

        Not overlapped: no compute runs beside them, the same as each layer's backward
        waiting for its reduction; each starts once the backward is done, on a stream of its
        own so that the reduce-scatters queued behind it still overlap.
        """
        for last, shard_bytes in self.held:
            self.tasks.append(self._across_shards(shard_bytes, last, self.rb.last_compute))
        self.held = []

    def _across_shards(self, shard_bytes: float, after: int | None, extra: int | None) -> int:
        """All-reduce a reduced shard over the replica group (hybrid sharding)."""
        return self._collective(
            "grad_all_reduce_across_shards",
            "all_reduce",
            shard_bytes,
            after,
            self.replica,
            extra_after=extra,
        )

    def all_gather_params(self, size_bytes: float, after: int | None) -> None:
        """ZeRO >= 1: gather the updated 16-bit parameters after the optimizer step."""
        if len(self.shard) > 1:
            self._collective("param_all_gather", "all_gather", size_bytes, after)

    def _collective(
        self,
        name: str,
        kind: str,
        size: float,
        after: int | None,
        group: tuple[int, ...] | None = None,
        extra_after: int | None = None,
    ) -> int:
        group = group if group is not None else (self.group if kind == "all_reduce" else self.shard)
        deps = [d for d in (after, extra_after) if d is not None]
        op = Op(
            name=name,
            kind="collective",
            phase="bwd_weight",
            comm=kind,
            axis=self.rb.dp_axis,
            comm_bytes=size,
        )
        seq, self.issued = self.issued, self.issued + 1
        tag = "edp" if self.expert else "dp"
        if extra_after is not None:
            stream = "dp_replica_comm"
        elif self.shares_gather_communicator and group == self.shard:
            stream = f"{SHARD_AXIS}_comm"
        else:
            stream = "dp_grad_comm"
        return self.rb.add(
            Task(
                self.rb.rank,
                stream,
                f"{tag}:{name}",
                "dp_comm",
                (op,),
                group=group,
                collective_key=f"{tag}|{group[0]}|{seq}|{name}",
            ),
            deps,
        )


def ep_hop_group(
    ep_group: tuple[int, ...], rank: int, gpus_per_node: int, hop: str
) -> tuple[int, ...]:
    """The expert-parallel peers of ``rank`` in its node (``ep_intra``) or on its rail.

    Ranks fill nodes in order, so rank // gpus_per_node is the node and rank % gpus_per_node
    the rail (the GPU's NIC).

    Examples:
        >>> ep_hop_group(tuple(range(16)), 5, 8, "ep_intra")
        (0, 1, 2, 3, 4, 5, 6, 7)
        >>> ep_hop_group(tuple(range(16)), 5, 8, "ep_inter")
        (5, 13)
    """
    if hop == "ep_intra":
        return tuple(r for r in ep_group if r // gpus_per_node == rank // gpus_per_node)
    return tuple(r for r in ep_group if r % gpus_per_node == rank % gpus_per_node)


def shard_groups(
    group: tuple[int, ...], rank: int, shard_size: int | None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The rank's ZeRO shard group and its replica group.

    The shard group is a contiguous slice of ``group``; the replica group holds the ranks
    with the same shard in the other slices.

    Examples:
        >>> shard_groups((0, 8, 16, 24), 16, 2)
        ((16, 24), (0, 16))
        >>> shard_groups((0, 8, 16, 24), 16, None)
        ((0, 8, 16, 24), (16,))
    """
    size = shard_size or len(group)
    position = group.index(rank)
    start = position // size * size
    return group[start : start + size], group[position % size :: size]


@without_cyclic_gc
def build_program(spec: ExperimentSpec, full: bool | None = None) -> Program:
    """Build the program of one training step.

    Args:
        spec: the experiment.
        full: simulate every rank (True) or one representative per pipeline stage (False:
            data-, tensor- and context-parallel peers run identical programs). Defaults to
            ``spec.simulation.full``.
    """
    return _StepAssembler(spec, spec.simulation.full if full is None else full).build()
