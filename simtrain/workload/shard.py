"""How one rank's share of a layer is cut, and at which precision its kernels run."""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.specs.framework import CrossEntropy
from simtrain.workload.eager import EagerModules
from simtrain.workload.primitives import DTYPE_BYTES, FP8_DTYPES


def fp8_recipe_in_effect(dtype: str, fp8_recipe: str | None) -> str:
    """The FP8 scaling recipe a run uses: ``mxfp8``'s own, the chosen one, or ``delayed``.

    Examples:
        >>> fp8_recipe_in_effect("mxfp8", None), fp8_recipe_in_effect("fp8", None)
        ('mxfp8', 'delayed')
    """
    return "mxfp8" if dtype == "mxfp8" else fp8_recipe or "delayed"


@dataclass(frozen=True)
class Shard:
    """How one rank's share of a layer is cut.

    Attributes:
        micro_batch_size: sequences in the microbatch (b).
        tp: tensor-parallel degree.
        sp: sequence parallelism within the tensor-parallel group.
        cp: context-parallel degree (the rank holds seq_length / cp tokens of each sequence).
        ep: expert-parallel degree.
        dtype: training dtype; under ``fp8``/``mxfp8`` the linear layers run in that format
            and everything else in BF16 (TransformerEngine's recipe, see ``workload.linear``).
        attention: attention kernel, ``flash`` or ``unfused`` (see ``workload.attention``).
        cp_algorithm: context-parallel attention, ``ring``, ``all_gather`` or ``ulysses``.
        fp8_recipe: scaling recipe of fp8 linear layers: ``delayed``, ``current`` or
            ``blockwise`` (``mxfp8`` has its own block scaling).
        etp: expert tensor-parallel degree (0: the same as tp).
        dispatcher: how MoE tokens reach their experts, ``alltoall`` or ``deepep``.
        ep_nodes: nodes an expert-parallel group spans (for the two-hop dispatch).
        eager: which modules run as eager PyTorch kernel chains (``workload.eager``):
            none, the final norm (``norm``), the final norm and loss (``head``), or every
            norm, rotary embedding, gated activation and loss (``all``).
        cross_entropy: the stack's cross-entropy when it is not an eager chain: ``fused``
            or ``vocab_parallel_fp32`` (Megatron's autograd function over upcast logits, see
            ``workload.transformer.head_ops``).
    """

    micro_batch_size: int
    tp: int = 1
    sp: bool = False
    cp: int = 1
    ep: int = 1
    dtype: str = "bf16"
    attention: str = "flash"
    cp_algorithm: str = "ring"
    fp8_recipe: str = "delayed"
    etp: int = 0
    dispatcher: str = "alltoall"
    ep_nodes: int = 1
    eager: EagerModules = "none"
    cross_entropy: CrossEntropy = "fused"

    @property
    def expert_tp(self) -> int:
        """Expert tensor-parallel degree (``etp``; 0 means tp)."""
        return self.etp or self.tp

    @property
    def fp8_dispatch(self) -> bool:
        """Whether the expert dispatch moves FP8 data (DeepEP under FP8 training)."""
        return self.dispatcher == "deepep" and self.low_precision

    @property
    def low_precision(self) -> bool:
        """True when linear layers run in an 8-bit format."""
        return self.dtype in FP8_DTYPES

    @property
    def linear_dtype(self) -> str:
        """``Op.dtype`` of linear-layer GEMMs: the 8-bit format, or "" (the training dtype)."""
        return self.dtype if self.low_precision else ""

    @property
    def high_dtype(self) -> str:
        """``Op.dtype`` of attention, LM head and router: "bf16" under 8-bit training, else ""."""
        return "bf16" if self.low_precision else ""

    @property
    def linear_bytes(self) -> int:
        """Bytes per element of linear-layer GEMM inputs (weights and activations)."""
        return DTYPE_BYTES[self.dtype]

    @property
    def recipe(self) -> str:
        """The scaling recipe in effect (``mxfp8`` implies its own)."""
        return fp8_recipe_in_effect(self.dtype, self.fp8_recipe)
