"""ParallelSpec: how one training step is split over devices."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import field_validator

from simtrain.specs.base import MAX_DEVICES, MAX_DEVICES_WHY, MAX_LAYERS, Spec, bounded
from simtrain.specs.mesh import MeshSpec


class MeshAxis(str, Enum):
    """Names of the device-mesh axes, as Megatron-LM and torchtitan use them."""

    DP = "dp"
    FSDP = "fsdp"
    TP = "tp"
    SP = "sp"
    PP = "pp"
    VPP = "vpp"
    CP = "cp"
    EP = "ep"

    def __str__(self) -> str:
        return self.value


RANK_AXES = ("tp", "cp", "ep", "dp", "pp")
"""Axes a ``rank_order`` may name."""
PipelineScheduleName = Literal["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "dualpipe"]
RecomputeMode = Literal["none", "selective", "minimal", "per_op", "full"]
RecomputeModule = Literal[
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"
]
RECOMPUTE_MODULES: tuple[str, ...] = RecomputeModule.__args__
"""Submodules selective recomputation may re-run (Megatron-Core's ``--recompute-modules``)."""


class ParallelSpec(Spec):
    """Parallel degrees and batch shape.

    World size = dp * tp * pp * cp; for MoE layers the tp * cp * dp ranks of a stage are
    re-split into etp * ep * edp (expert tensor, expert and expert data parallelism).
    """

    dp: int | None = bounded(None, gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    """Data-parallel degree; omit to derive it from cluster.num_gpus / (tp * pp * cp)."""
    tp: int = bounded(1, gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    """Tensor-parallel degree (Megatron 1-D: column- then row-parallel linear layers)."""
    sp: bool = False
    """Sequence parallelism within the tensor-parallel group (norms and dropout sharded over
    the sequence; all-reduce becomes reduce-scatter + all-gather)."""
    pp: int = bounded(1, gt=0, le=MAX_LAYERS, why="a stage needs a layer")
    """Pipeline-parallel degree (number of stages)."""
    vpp: int = bounded(1, gt=0, le=MAX_LAYERS, why="a model chunk needs a layer")
    """Virtual stages (model chunks) per pipeline rank, for the interleaved schedule."""
    cp: int = bounded(1, gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    """Context-parallel degree (sequence split across ranks for attention)."""
    cp_algorithm: Literal["ring", "all_gather", "ulysses"] = "ring"
    """Context-parallel attention: ring (K/V passed around, overlapped with compute),
    all_gather (K/V gathered first, as Llama 3) or ulysses (all-to-all over heads)."""
    ep: int = bounded(1, gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    """Expert-parallel degree for MoE layers."""
    etp: int | None = bounded(None, gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    """Expert tensor-parallel degree: each routed expert's matrices split over etp ranks;
    omit for tp. With ep and edp it re-splits the tp x cp x dp ranks of a stage for the
    expert layers (Megatron-Core's MoE parallel folding), so ep * etp must divide
    tp * cp * dp."""
    edp: int | None = bounded(None, gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    """Expert data-parallel degree, tp * cp * dp / (ep * etp); omit to derive it (set, it
    must equal that)."""
    moe_dispatcher: Literal["alltoall", "deepep"] = "alltoall"
    """How tokens reach their experts: alltoall (one all-to-all over the expert-parallel
    group, a copy per routed expert, Megatron-Core's alltoall dispatcher) or deepep (two hops:
    one RDMA copy per destination node to the GPU on the same rail, then NVLink to each
    destination GPU, pipelined; FP8 dispatch under FP8 training; DeepSeek's DeepEP)."""
    zero_stage: Literal[0, 1, 2, 3] = 0
    """ZeRO stage of the data-parallel group: 0 replicated (DDP), 1 optimizer states sharded,
    2 plus gradients, 3 plus parameters (= FSDP full shard)."""
    zero_shard_group_size: int | None = bounded(None, gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    """Ranks one ZeRO/FSDP shard group spans; omit to shard over the whole data-parallel
    group (full shard). A smaller divisor of dp * cp gives hybrid sharding: states sharded
    inside each group (e.g. one node), gradients all-reduced across the groups."""
    micro_batch_size: int = bounded(
        1, gt=0, le=1 << 16, why="1000x the largest micro-batch published (64)"
    )
    """Sequences per microbatch on one data-parallel rank."""
    global_batch_size: int = bounded(
        gt=0, le=1 << 24, why="4000x the largest published batch (16M tokens = 4,096 sequences)"
    )
    """Sequences per optimizer step across all data-parallel ranks."""
    pipeline_schedule: PipelineScheduleName = "1f1b"
    """Pipeline schedule (used when pp > 1)."""
    recompute: RecomputeMode = "none"
    """Activation recomputation: none, selective (the submodules of ``recompute_modules``; by
    default the attention core), minimal (everything but the weight matmuls: attention core,
    norms, activation functions; their outputs are kept, as MaxText's remat_policy "minimal"
    does), per_op (torchtitan's per-operator selective checkpointing, ``selective_ac_option
    = "op"``: the attention core's output and every other weight matmul's output are kept,
    counted per block in forward order, so Q, V, the MLP gate and down projections are kept
    and K, the output projection, the MLP up projection and every non-matmul op re-run; a
    dense, serial, gated layer) or full (whole layer)."""
    recompute_modules: list[RecomputeModule] | None = None
    """With recompute=selective, the submodules whose activations are dropped in the forward
    and recomputed in the backward (Megatron-Core's ``--recompute-modules``; omit for
    ``[core_attn]``, Megatron-Core's default; ``[]`` keeps everything): core_attn (attention
    scores and softmax), layernorm (the outputs of the two block norms), mla_up_proj (MLA's
    latent norms, up-projections and rotary embedding: queries, keys and values), mlp (a
    dense MLP's internals), moe_act (the routed experts' activation-function output, the
    second GEMM's input), shared_experts (the shared experts' internals) or moe (the whole
    MoE layer, its dispatch and combine included)."""
    recompute_layer_fraction: float = bounded(1.0, gt=0, le=1, why="a fraction of the layers")
    """With recompute=full, the fraction of each pipeline chunk's layers that are recomputed,
    spread evenly (the others keep their activations): Megatron's --recompute-method block
    with --recompute-num-layers, torchtitan's selective layer checkpointing (every second
    layer = 0.5)."""
    overlap_grad_reduce: bool | None = None
    """Overlap the data-parallel gradient reduction with the backward pass (bucketed);
    default from the framework profile (always on under ZeRO-3)."""
    overlap_replica_grad_reduce: bool | None = None
    """Under hybrid sharding, overlap the all-reduce of gradient shards across shard groups
    with the backward (false: the next layer's backward waits for it); default from the
    framework profile (``overlaps.replica_grad_reduce``)."""
    overlap_param_gather: bool | None = None
    """ZeRO-1/2: all-gather the updated parameters layer by layer ahead of the next step's
    forward, each layer waiting for its own (Megatron's --overlap-param-gather), instead of
    after the optimizer step; default from the framework profile (``overlaps.dp_param_gather``)."""
    tp_comm_overlap: Literal["none", "wgrad", "gemm"] | None = None
    """Tensor-parallel communication: none (exposed), wgrad (the input-gradient reduction under
    the weight-gradient GEMM) or gemm (also every sequence-parallel all-gather/reduce-scatter
    pipelined in tp chunks with its GEMM, TransformerEngine userbuffers); default from the
    framework profile (``overlaps.tp_comm``)."""
    overlap_ep_comm: bool | None = None
    """Two-microbatch overlap: a forward and a backward of different microbatches run
    interleaved, so that the expert all-to-alls of one hide behind the other's compute
    (DualPipe's forward-backward chunks, Megatron-Core's combined 1F1B); default from the
    framework profile (``overlaps.ep_dispatch``), and on under DualPipe."""
    overlap_p2p_comm: bool | None = None
    """Pipeline sends run asynchronously (true) or the sender's next compute waits for its
    send (false, Megatron's blocking send/receive); default from the framework profile
    (``overlaps.pp_p2p``)."""
    grad_bucket_size_bytes: int | None = bounded(
        None, gt=0, le=8_000_000_000, why="50x Megatron-Core's 160 MB bucket"
    )
    """Gradient bucket size for the overlapped data-parallel reduction; default from the
    framework profile (Megatron-Core: 40M fp32 elements = 160 MB; PyTorch DDP: 25 MiB)."""
    rank_order: str = "tp-cp-ep-dp-pp"
    """Order of mesh axes from innermost (adjacent ranks) to outermost: distinct axes among
    tp, cp, ep, dp and pp joined by '-'."""
    mesh: MeshSpec | None = None
    """A MaxText/GSPMD named mesh (ici_fsdp, ici_tp, ici_dp inside a TPU slice; dcn_dp across
    slices) that sets tp, dp, zero_stage and zero_shard_group_size; omit to set those here."""

    @field_validator("rank_order")
    @classmethod
    def _axes_once(cls, value: str) -> str:
        """Each axis named once, and only known axes."""
        axes = value.split("-")
        if len(value) > 40 or len(set(axes)) != len(axes) or not set(axes) <= set(RANK_AXES):
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise ValueError(
                f"must join distinct axes among {', '.join(RANK_AXES)} with '-', e.g. "
                f"tp-cp-ep-dp-pp (got {shown!r})"
            )
        return value

    @property
    def num_microbatches(self) -> int:
        """Microbatches per data-parallel rank per step (gradient accumulation steps)."""
        assert self.dp is not None, "dp is resolved by ExperimentSpec"
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    @property
    def selective_modules(self) -> frozenset[str]:
        """Submodules that selective recomputation re-runs (empty unless recompute=selective).

        Examples:
            >>> p = ParallelSpec(global_batch_size=8, recompute="selective")
            >>> sorted(p.selective_modules)
            ['core_attn']
            >>> sorted(p.model_copy(update={"recompute_modules": []}).selective_modules)
            []
        """
        if self.recompute != "selective":
            return frozenset()
        return frozenset(
            ["core_attn"] if self.recompute_modules is None else self.recompute_modules
        )

    @property
    def expert_tp(self) -> int:
        """Expert tensor-parallel degree after applying the default (tp)."""
        return self.etp or self.tp

    @property
    def expert_dp(self) -> int:
        """Expert data-parallel degree: the tp * cp * dp ranks of a stage over ep * etp."""
        assert self.dp is not None, "dp is resolved by ExperimentSpec"
        return max(1, self.tp * self.cp * self.dp // (self.ep * self.expert_tp))

    @property
    def model_parallel_size(self) -> int:
        """Devices that together hold one model replica: tp * pp * cp."""
        return self.tp * self.pp * self.cp
