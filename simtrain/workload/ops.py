"""Operators: the unit of work in a rank's program (one kernel, or one collective).

An :class:`Op` carries what the compute and network models need to time it (FLOPs, bytes of
memory traffic, GEMM shape, collective kind/group/size) and what the metrics need to account
for it (phase, layer, whether its FLOPs count as model FLOPs). It is plain frozen data so ops
of identical shape hash equal and are timed once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OpKind = Literal[
    "gemm",  # dense matrix multiply (M x K) @ (K x N), possibly batched
    "attention",  # fused (flash) attention core: QK^T, softmax, AV
    "elementwise",  # activation, dropout, residual add, bias, rotary, router softmax
    "norm",  # layer norm / RMS norm
    "embedding",  # token (and position) embedding lookup
    "loss",  # softmax cross-entropy over the vocabulary
    "optimizer",  # optimizer update of the local parameter shard
    "collective",  # all-reduce / all-gather / reduce-scatter / all-to-all / ...
    "p2p",  # pipeline send/recv
]
Phase = Literal["fwd", "bwd_input", "bwd_weight", "recompute", "optimizer"]
MATMUL_KINDS: frozenset[str] = frozenset({"gemm", "attention"})
COMM_KINDS: frozenset[str] = frozenset({"collective", "p2p"})


@dataclass(frozen=True, slots=True)
class Op:
    """One operator of a rank's program.

    Attributes:
        name: what it is, e.g. ``qkv``, ``mlp_fc1``, ``tp_all_reduce``.
        kind: operator family (selects the timing model).
        phase: forward, input-gradient, weight-gradient, recompute or optimizer.
        flops: floating-point operations executed by this rank.
        bytes_accessed: bytes read plus written in device memory.
        m, n, k: GEMM shape (output M x N, reduction K), 0 when not a GEMM.
        batch: independent GEMMs of that shape in one kernel (grouped/batched GEMM).
        comm: collective kind for communication ops (see ``network.base.CollectiveKind``).
        axis: mesh axis (or ``+``-joined axes) whose process group runs the collective.
        comm_bytes: collective size in the nccl-tests convention.
        causal: attention with a causal mask (the kernel skips masked blocks).
        overlap_ops: for communication, how many of the compute ops that follow it run while
            it is in flight; the next compute op waits for it.
        layer: 0-based transformer layer; -1 for the embedding and the optimizer,
            ``num_layers`` for the final norm, LM head and loss.
        dtype: precision the kernel runs at (``bf16``, ``fp8``, ``mxfp8``...); "" for the
            training dtype. Under FP8 training the linear-layer GEMMs carry the 8-bit format
            and attention, LM head and router carry ``bf16``.
        window: for attention, the most keys one query attends to (sliding-window attention;
            0 = every key up to ``n``). ``flops`` count ``m * min(n, window)`` pairs; a causal
            kernel executes about ``m*w - w*w/2`` of them (w = min(n, window)).
        sm_target: for a GEMM, launched for the SMs a concurrent collective leaves (the
            library is told the SM count, as TransformerEngine's communication-GEMM overlap
            does), so a persistent kernel does not push CTAs into a second round when the
            collective holds SMs (:mod:`simtrain.compute.gemm`).
        copy_engine: for communication, moved by the GPU's copy engines (DMA) rather than by
            a kernel on the SMs (PyTorch's symmetric-memory async TP pulls its chunks with
            ``cudaMemcpyAsync``): compute running next to it is not slowed.
        split_accumulator: for an FP8 GEMM, accumulation with periodic promotion of the
            partial sums to FP32 (cuBLASLt's fast accumulation off), as TransformerEngine and
            torchao run the input- and weight-gradient GEMMs; slower than the fast
            accumulation that GEMM benchmarks measure (``GemmCalibration.split_accumulator_speed``).
        strided: for a memory-bound op, a PyTorch elementwise kernel over a non-contiguous
            iteration (a strided view, a permuted copy or a broadcast operand): ATen runs its
            generic kernel with per-element offsets and scalar loads instead of the
            vectorised one, at ``ComputeCalibration.strided_memory_fraction`` of the
            bandwidth.
    """

    name: str
    kind: OpKind
    phase: Phase = "fwd"
    flops: float = 0.0
    bytes_accessed: float = 0.0
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    comm: str = ""
    axis: str = ""
    comm_bytes: float = 0.0
    causal: bool = False
    overlap_ops: int = 0
    layer: int = -1
    dtype: str = ""
    window: int = 0
    sm_target: bool = False
    copy_engine: bool = False
    split_accumulator: bool = False
    strided: bool = False

    @property
    def is_comm(self) -> bool:
        """True for collectives and point-to-point transfers."""
        return self.kind in COMM_KINDS

    @property
    def is_matmul(self) -> bool:
        """True for GEMMs and attention: the ops whose FLOPs count as model FLOPs."""
        return self.kind in MATMUL_KINDS
