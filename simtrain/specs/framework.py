"""FrameworkProfile: what a software stack does with the hardware (one data file per stack).

A profile is the *software* third of simtrain's knowledge (DESIGN.md "three kinds of
knowledge"): which kernels the stack runs, how it cuts and overlaps its communication, which
ZeRO stages and pipeline schedules it has, and what it keeps in memory. Hardware (catalog)
and calibration (how close to peak the kernels get) stay elsewhere. Profiles live as data
files in ``simtrain/catalog/frameworks/``; every field carries a source there, and fields fitted
on measured runs say so (``provenance: fitted``).

The switches an experiment can also set (``training.attention_kernel``,
``training.grad_reduce_dtype``, ``training.execution_mode``, ``parallel.overlap_grad_reduce``,
``parallel.grad_bucket_size_bytes``) take their default from the profile named by
``training.framework``; everything else here is read from the profile by the layers that model
it (program assembly, memory).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simtrain.specs.base import Spec, bounded
from simtrain.specs.calibration import AttentionKernel, ExecutionMode

DEFAULT_FRAMEWORK = "megatron-core"
"""Profile of experiments that name none: the behaviour simtrain had before profiles."""

GradReduceDtype = Literal["fp32", "bf16", "fp16"]
GRAD_REDUCE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2}
"""Bytes per gradient element in each gradient-reduction dtype."""
GatherGranularity = Literal["per_tensor", "per_unit", "per_bucket"]
Provenance = Literal["documented", "fitted", "assumed"]
CrossEntropy = Literal["fused", "vocab_parallel_fp32"]
"""How a stack computes its loss when it is not an eager chain (``FrameworkProfile``)."""


class FieldSource(Spec):
    """Where one profile value comes from."""

    provenance: Provenance
    """documented (the stack's docs, code defaults or papers), fitted (on measured runs, with
    a declared hold-out) or assumed (no source; a labelled guess)."""
    source: str = Field(min_length=1)
    """Citation: ``docs/references/frameworks.md §<section>``, or the fit command and split."""


class Overlaps(Spec):
    """Which communication the stack hides behind compute (declared per stack).

    Each is the default of a ``parallel.*`` switch; :mod:`simtrain.parallel.overlap` describes
    the one mechanism all of them use.
    """

    dp_grad_reduce: bool
    """Data-parallel gradient reduction issued in buckets during the backward pass."""
    dp_param_gather: bool
    """ZeRO-1/2 parameter all-gather after the optimizer overlapped with the next forward."""
    replica_grad_reduce: bool = True
    """Under hybrid sharding, each unit's all-reduce of gradient shards across the shard
    groups (across TPU slices over DCN in MaxText) runs behind the backward; false: the next
    unit's backward waits for it."""
    tp_comm: Literal["none", "wgrad", "gemm"]
    """Tensor-parallel communication: none (exposed), wgrad (the input-gradient all-reduce runs
    during the weight-gradient GEMM, Megatron's async TP) or gemm (chunked all-gather /
    reduce-scatter pipelined with the GEMMs, userbuffers / async TP)."""
    tp_comm_impl: Literal["userbuffers", "symmetric_memory"]
    """How ``tp_comm: gemm`` is realised (:func:`simtrain.parallel.overlap.tp_overlapped`):
    userbuffers (TransformerEngine: ring exchanges pipelined with every sequence-parallel
    GEMM's chunks) or symmetric_memory (PyTorch's async TP: Inductor's micro-pipeline pass
    fuses an all-gather with the matmuls it feeds and a reduce-scatter with the one matmul
    that produces it; a shard copy before each gather, a sum of the partials after each
    reduce-scatter, and reduce-scatters fed by a sum of matmuls left alone)."""
    ep_dispatch: bool
    """Expert all-to-all dispatch/combine hidden behind another microbatch's compute (a
    forward and a backward of different microbatches interleaved: combined 1F1B)."""
    pp_p2p: bool
    """Pipeline sends asynchronous, overlapped with compute; false: the sender waits for its
    send (batched, blocking send/receive)."""


class ShardingBehaviour(Spec):
    """How the stack runs sharded data parallelism (ZeRO-2/3, FSDP)."""

    gather_granularity: GatherGranularity
    """Unit of the parameter all-gathers: per_tensor (one per weight tensor, DeepSpeed's
    per-module fetch), per_unit (one per wrapped block = transformer layer, FSDP's flat
    parameter or FSDP2's grouped all-gather) or per_bucket (tensors coalesced up to
    ``gather_bucket_bytes``)."""
    gather_bucket_bytes: float = bounded(gt=0, le=1 << 40, why="a terabyte per gather")
    """Bytes one coalesced gather holds under per_bucket."""
    prefetch_bytes: float = bounded(ge=0, le=1 << 40, why="a terabyte in flight")
    """Gathered bytes the stack may have in flight ahead of the op that needs them (FSDP: one
    unit; DeepSpeed: ``stage3_prefetch_bucket_size``); 0 = no prefetch."""
    prefetch_units: int = bounded(ge=0, le=8, why="8x FSDP's one unit ahead")
    """At most this many gathers in flight ahead of use (FSDP's rate limiter: 1 ahead)."""
    regather_for_recompute: bool
    """Under activation recomputation the parameters are gathered again for the recomputed
    forward (True) or the backward's gather serves both (False)."""
    reduce_scatter_granularity: Literal["per_unit", "per_bucket"]
    """ZeRO-3 gradient reduce-scatters: one per unit as its backward ends, or bucketed by
    ``parallel.grad_bucket_size_bytes``."""
    reduce_every_microbatch: bool
    """ZeRO-2/3 gradients are reduce-scattered after every microbatch's backward (FSDP without
    ``no_sync``, DeepSpeed's micro-step reduction) rather than once after the last."""
    zero2_param_gather: Literal["after_optimizer", "forward"]
    """Under ZeRO-2 the updated parameters are all-gathered after the optimizer step
    (DeepSpeed, Megatron's distributed optimizer) or unit by unit in the next step's first
    forward (FSDP SHARD_GRAD_OP, overlapped like ZeRO-3's gathers)."""
    pipeline_defers_grad_reduce: bool
    """Under pipeline parallelism the pipeline engine turns the gradient reduction and the
    post-backward reshard off for every microbatch but the last (torch.distributed.pipelining
    with FSDP2): a stage keeps its unsharded parameters and accumulates unsharded gradients
    of all its parameters until its last backward."""
    unsharded_grad_dtype: Literal["param", "reduce"]
    """Dtype of the unsharded gradients accumulated across microbatches while the reduction
    is off: the 16-bit compute dtype (param), or the gradient-reduction dtype (reduce: FSDP2
    upcasts them to its reduce_dtype, fp32 in torchtitan)."""
    fp8_all_gather: bool
    """Under FP8 training the weight shards of the linear layers are cast to FP8 before the
    all-gather, so a gathered (unsharded) weight holds 1 byte per element and is itself the
    FP8 operand (torchao's enable_fsdp_float8_all_gather); false: 16-bit gathers."""
    param_shard_is_master: bool
    """The sharded parameter is the fp32 master weight and its gradient is kept in that dtype
    (FSDP2: the original parameter is sharded as a DTensor and cast to the compute dtype by
    the all-gather; the reduce-scatter output becomes its fp32 gradient): under ZeRO-3 no
    16-bit shard exists, and under ZeRO-2/3 a sharded gradient holds 4 bytes per parameter;
    false: a 16-bit shard and a 16-bit sharded gradient beside the optimizer's master."""
    root_unsharded_through_step: bool
    """Under ZeRO-3 the parameters outside the wrapped blocks (the root unit: token embedding,
    final norm and LM head under torchtitan's wrapping) stay gathered from the forward to the
    end of the backward (FSDP2 does not reshard its root module after the forward); false:
    gathered and freed like a block."""
    gather_output_buffers: int = bounded(ge=0, le=8, why="8x FSDP2's two")
    """Flat all-gather output buffers, one gathered unit each, that the stack holds apart from
    the unsharded parameters they are copied into (FSDP2: two, on its all-gather streams,
    whose blocks the caching allocator gives to no other stream); 0 when the gathered buffer
    is the parameters' own storage (FSDP1's FlatParameter, DeepSpeed, Megatron). Above 0,
    every gather is also followed by that copy on the compute stream (the gathered bytes
    read and written, :func:`simtrain.parallel.sharding.copy_out_op`)."""
    separate_reduce_scatter_group: bool
    """The gradient reduce-scatters run on a process group of their own, so they overlap the
    parameter all-gathers (fairscale FSDP's ``process_group_reduce_scatter``); false: both go
    through the shard group's one NCCL communicator, which runs one collective at a time in
    issue order (PyTorch FSDP1 and FSDP2, Megatron-FSDP and DeepSpeed by default)."""


class MemoryHabits(Spec):
    """What the stack keeps in device memory beyond model states and activations."""

    logits_bytes_per_element: float = bounded(
        ge=0, le=16, why="a 16-byte logit is beyond any stack's loss"
    )
    """Bytes per logit (per token and vocabulary entry) the loss holds at its peak, the end
    of its forward or the start of its backward: 4 for fp32 logits (Korthikanti et al. 2022:
    4·s·b·V/t), 2 for a fused cross-entropy working on the 16-bit logits, 12 for eager
    PyTorch's cross-entropy on upcast logits at its backward (the saved fp32 log-softmax,
    the nll_loss gradient and the log-softmax gradient, 4 bytes each)."""
    vocab_parallel_logits_bytes_per_element: float = bounded(
        ge=0, le=32, why="a 32-byte logit is beyond any stack's vocabulary-parallel loss"
    )
    """As ``logits_bytes_per_element`` when the vocabulary is split over TP (t > 1): what
    the stack's vocabulary-parallel cross-entropy holds per logit at its peak (Megatron: 4,
    fp32 logits; PyTorch's loss_parallel: 16, at its fused backward)."""
    loss_cached_bytes_per_element: float = bounded(
        ge=0, le=16, why="more than the largest loss tensor's 4 bytes per logit, four times"
    )
    """Bytes per logit the caching allocator holds reserved at the loss's peak beyond its
    live tensors: eager cross-entropy frees the 16-bit logits (2 bytes) before the backward,
    whose fp32 tensors (4 bytes per logit) cannot reuse that cached block, so it stays
    reserved; 0 for a fused loss."""
    tp_saves_gathered_inputs: bool
    """Under sequence parallelism the column-parallel linear layers (QKV, MLP input, LM head)
    keep their all-gathered, whole-sequence input for the weight gradient (PyTorch DTensor
    TP: the module input is redistributed to Replicate before the linear); false: the
    sequence shard is kept and gathered again in the backward (Megatron, Korthikanti et al.
    2022 §4.2.2)."""
    fp8_weight_copies_kept: bool
    """Under FP8 training (without ZeRO-3) the 8-bit copies of the linear layers' weights
    are kept between microbatches (Transformer Engine); false: cast at each use and freed
    (torchao's dynamic scaling)."""
    fp8_saves_8bit_inputs: bool
    """Under FP8 training the linear layers keep the 8-bit copies of their inputs for the
    backward (Transformer Engine); false: the 16-bit inputs (torchao's Float8Linear saves
    the high-precision input and casts it again in the backward)."""
    pipeline_keeps_stage_outputs: bool
    """The pipeline engine keeps each in-flight microbatch's stage output (the last layer's
    output, not an input of any checkpointed layer) for its backward
    (torch.distributed.pipelining's forward cache); false: the output's storage is freed once
    sent (Megatron's deallocate_output_tensor)."""
    pipeline_recv_buffers_per_microbatch: bool
    """The pipeline engine allocates a receive buffer for every microbatch of the step, for
    activations (on stages after the first) and for gradients (on stages before the last),
    and keeps them (torch.distributed.pipelining); false: a send and a receive buffer per
    direction in flight (Megatron's p2p communication)."""
    pipeline_keeps_last_outputs: bool
    """The last pipeline stage keeps every microbatch's output (the 16-bit logits) until the
    step returns (torch.distributed.pipelining's output_chunks, merged by ``step()``); false:
    each is freed after its loss backward."""
    unit_grads_materialised: bool
    """A unit's weight gradients are first materialised whole in the 16-bit compute dtype
    (autograd's ``.grad`` on the unsharded parameters) and then added into the deferred
    accumulator or copied into a reduce-scatter input of the unit's size in the reduction
    dtype, which lives until the next unit's reduction (FSDP2's post-backward and
    ``foreach_reduce``); false: the weight-gradient GEMMs write into the stack's gradient
    buffer, reduced in ``grad_bucket_size_bytes`` buckets (Megatron). When true the copy
    also costs time: under ZeRO-2/3 every backward that computes a unit's weight gradients
    ends with it, and the compute stream waits for it
    (:func:`simtrain.parallel.builder.with_grad_copy_in`)."""
    backward_buffers_after_loss: bool
    """The backward's prefetched gather and its gradient reduction are issued from the layers'
    backward hooks, after the loss backward, so they never coexist with the loss phase (FSDP2:
    explicit prefetch from a block's pre-backward, reduce-scatter from its post-backward);
    false: counted on top of it (a compiler may issue them earlier)."""
    final_norm_bytes_per_element: float = bounded(
        ge=0, le=16, why="four fp32 copies of the norm's input"
    )
    """Bytes the final norm (before the LM head) keeps per element of its input for the
    backward: 2 for a fused or compiled norm (its 16-bit input, Korthikanti et al. 2022), 6
    for an eager RMSNorm that upcasts (the fp32 copy of its input, 4, and the 16-bit
    normalised output its weight's gradient reads, 2)."""
    runtime_reserved_bytes: float = bounded(
        ge=0, le=16e9, why="16 GB, 5x a CUDA context with NCCL and cuBLAS workspaces"
    )
    """Memory the process holds outside the allocator's tensors: CUDA context, cuBLAS and
    NCCL workspaces."""
    allocator_overhead_fraction: float = bounded(
        ge=0, le=0.5, why="half the peak lost to fragmentation"
    )
    """Caching-allocator reserve over allocated bytes (fragmentation), as a fraction of the
    activations' and buffers' peak (the bytes that come and go during a step)."""
    near_limit_fraction: float = bounded(
        ge=0, le=0.25, why="a quarter of the capacity is no longer near the limit"
    )
    """Half-width of the near-limit band around the capacity, as a fraction of it: within
    it the verdict is 'near_limit' (may or may not fit) instead of a hard fits / out of
    memory, because the memory model is not more precise than that for the stack."""


class FrameworkProfile(Spec):
    """One software stack at one era (see the module docstring)."""

    name: str = Field(min_length=1)
    """Profile name, e.g. ``megatron-lm-2021``; also the data file's stem."""
    description: str
    """What the stack is and which versions the profile describes."""
    execution_mode: ExecutionMode
    """Default execution mode: eager (kernels issued one by one from Python), cuda_graphs
    (captured and replayed) or compiled (XLA / torch.compile)."""
    eager_modules: bool
    """The model's RMSNorm, rotary embedding, gated activation, grouped-query key/value
    expansion and cross-entropy are plain PyTorch modules run eagerly (torchtitan's Llama):
    each is a chain of unfused ATen kernels with fp32 upcasts, and its autograd backward
    another, sized in :mod:`simtrain.workload.eager`; the fp32 upcasts and extra passes over
    HBM cost time. Under ``execution_mode: compiled`` the transformer blocks are fused and
    only the final norm and the loss (outside the compiled blocks) stay eager. False: fused
    kernels (Transformer Engine, Apex, Megatron's fused ops, XLA)."""
    compiles_loss: bool
    """Under ``execution_mode: compiled`` the stack compiles its loss function too (torchtitan
    from 2025): the cross-entropy on upcast logits becomes generated kernels that read the
    16-bit logits and write their 16-bit gradient, so no fp32 copy of the logits is kept.
    False: the loss stays outside what is compiled (torchtitan 2024: eager, fp32 logits)."""
    cross_entropy: CrossEntropy
    """The loss when it is not an eager chain (``eager_modules``): ``fused`` (kernels that
    write the fp32 logits once and read them twice) or ``vocab_parallel_fp32`` (Megatron's
    vocabulary-parallel cross-entropy as an autograd function of unfused ATen kernels on
    upcast logits: about three times the memory traffic, sized in
    :mod:`simtrain.workload.transformer`)."""
    syncs_on_batch_load: bool
    """The host reads a device value when it loads each microbatch (Megatron's
    ``broadcast_data`` copies the batch's tensor shapes back with ``.cpu()``), so on the first
    and last pipeline stage, which load the inputs and the labels, it waits for the device
    to finish the previous work before issuing the microbatch's forward."""
    syncs_on_loss: bool
    """The host reads the loss before issuing the backward (DeepSpeed's ``engine.backward``
    logs ``loss.mean().item()``), so on the last pipeline stage it waits for the forward."""
    tp_fp8_all_gather: bool
    """Under FP8 training with per-tensor current scaling, the tensor-parallel all-gathers
    move the 8-bit copy of their input, cast before gathering (torchao's Float8 tensor
    parallelism); false: 16-bit, unless ``tp_comm: gemm`` (TransformerEngine's userbuffers
    and PyTorch's async TP gather 8-bit)."""
    attention_kernel: AttentionKernel
    """Default attention implementation."""
    attention_kernels: tuple[AttentionKernel, ...]
    """Attention implementations the stack has."""
    dtypes: tuple[Literal["bf16", "fp16", "fp8", "mxfp8"], ...]
    """Training dtypes the stack supports."""
    grad_reduce_dtype: GradReduceDtype
    """Default dtype of the data-parallel gradient reduction."""
    grad_bucket_size_bytes: int = bounded(
        gt=0, le=8_000_000_000, why="50x Megatron-Core's 160 MB bucket"
    )
    """Default gradient bucket of the overlapped data-parallel reduction."""
    zero_stages: tuple[Literal[0, 1, 2, 3], ...]
    """ZeRO stages (sharded data parallelism) the stack implements."""
    bf16_optimizer_shards_states: bool
    """With bf16 and no ZeRO (or ZeRO-1 under its pipeline engine), the stack trains with
    DeepSpeed's BF16_Optimizer: fp32 states sharded over the data-parallel group like ZeRO-1,
    every microbatch's gradients added into full-size fp32 copies, which are all-reduced
    after the backward (:func:`simtrain.specs.framework_resolve.uses_bf16_optimizer`)."""
    pipeline_schedules: tuple[str, ...]
    """Pipeline schedules the stack implements (checked when pp > 1)."""
    tp_comm_overlaps: tuple[Literal["none", "wgrad", "gemm"], ...]
    """Tensor-parallel communication overlaps the stack implements (``parallel.tp_comm_overlap``,
    checked when tp > 1); the default, ``overlaps.tp_comm``, is one of them."""
    pipeline_scatter_gather: bool
    """Pipeline activations cross stages scattered over the TP group and re-gathered on the
    other side (Narayanan et al. 2021 §4.1), instead of whole on every TP rank."""
    overlaps: Overlaps
    """Which communication the stack overlaps with compute."""
    sharding: ShardingBehaviour
    """ZeRO-2/3 / FSDP behaviour (used when ``parallel.zero_stage`` is 2 or 3)."""
    memory: MemoryHabits
    """What the stack keeps in memory."""
    sources: dict[str, FieldSource] = Field(exclude=True)
    """Source of every field, keyed by its dotted name (``sharding.prefetch_bytes``)."""

    @model_validator(mode="after")
    def _every_field_has_a_source(self) -> FrameworkProfile:
        """Every value field (dotted for nested sections) must name its source."""
        missing = [name for name in profile_field_names() if name not in self.sources]
        unknown = sorted(set(self.sources) - set(profile_field_names()))
        problems = []
        if missing:
            problems.append(f"'sources' must cover every field (missing: {', '.join(missing)})")
        if unknown:
            problems.append(f"'sources' names unknown fields ({', '.join(unknown)})")
        if self.attention_kernel not in self.attention_kernels:
            problems.append(
                f"'attention_kernel' must be one of attention_kernels "
                f"{list(self.attention_kernels)} (got {self.attention_kernel!r})"
            )
        if self.overlaps.tp_comm not in self.tp_comm_overlaps:
            problems.append(
                f"'overlaps.tp_comm' must be one of tp_comm_overlaps "
                f"{list(self.tp_comm_overlaps)} (got {self.overlaps.tp_comm!r})"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def field_value(self, dotted: str) -> object:
        """The value of a (possibly nested) field by its dotted name.

        Examples:
            >>> from simtrain.catalog.frameworks import get_framework
            >>> get_framework("pytorch-fsdp1").field_value("sharding.gather_granularity")
            'per_unit'
        """
        value: object = self
        for part in dotted.split("."):
            value = getattr(value, part)
        return value


_SECTIONS = {"overlaps": Overlaps, "sharding": ShardingBehaviour, "memory": MemoryHabits}
_UNSOURCED = ("name", "description", "sources")


def profile_field_names() -> list[str]:
    """Dotted names of every value field of a profile, in declaration order."""
    names: list[str] = []
    for name in FrameworkProfile.model_fields:
        if name in _UNSOURCED:
            continue
        section = _SECTIONS.get(name)
        if section is None:
            names.append(name)
        else:
            names += [f"{name}.{sub}" for sub in section.model_fields]
    return names
