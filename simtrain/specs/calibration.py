"""ComputeCalibration: how close to its peak one accelerator's kernels get, as data.

A calibration is the measured side of the compute model (DESIGN.md, "three kinds of
knowledge"): the catalog says what a part can do (peak FLOP/s, HBM bandwidth, SM count), a
calibration says what its GEMM, attention and memory-bound kernels reach in practice and what
issuing them costs the host. Calibrations are data files (``simtrain/catalog/calibrations``)
with their provenance: fitted on named measurements with a declared hold-out, inherited from
another part, or an explicit assumption.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from simtrain.specs.base import Spec, bounded

ExecutionMode = Literal["eager", "cuda_graphs", "compiled"]
Provenance = Literal["fitted", "inherited", "assumed"]
AttentionKernel = Literal["unfused", "torch", "flash", "flash1", "flash3", "cudnn"]
"""Attention implementations: ``unfused`` (Megatron's batched GEMMs + fused scale-mask-softmax
and dropout kernels, the score matrix in HBM), ``torch`` (plain PyTorch: layout copies, an
additive causal mask, softmax and dropout as separate kernels on the score matrix),
``flash`` (FlashAttention-2), ``flash1`` (FlashAttention v1, flash-attn 1.x), ``flash3``
(FlashAttention-3, Hopper) and ``cudnn`` (cuDNN fused attention, as Transformer Engine uses
it)."""
UNFUSED_KERNELS: frozenset[str] = frozenset({"unfused", "torch"})
"""Attention kernels that materialise the score matrix in HBM (the others are fused)."""


class GemmCalibration(Spec):
    """Parameters of the per-shape GEMM model (:mod:`simtrain.compute.gemm`)."""

    ceiling: dict[str, float]
    """Fraction of the dense peak that the best-shaped GEMM reaches, per dtype (a dtype not
    listed uses the ``bf16`` value)."""
    tile_shapes: tuple[tuple[int, int], ...] = Field(min_length=1)
    """Output tiles (rows, columns) the GEMM library chooses among, largest first; each side
    1 to 1,024 (GEMM libraries' CTA tiles are 16 to 256)."""
    tile_reuse_penalty: float = bounded(
        ge=0, le=100, why="100 already leaves only the largest tile"
    )
    """How much a smaller tile loses to lower operand reuse: a tile of ``tm x tn`` runs at
    ``1 / (1 + p·128·(1/tm + 1/tn))`` relative to the largest tile (0: all tiles equal)."""
    k_half: float = bounded(ge=0, le=65536, why="longer than any training GEMM's reduction")
    """Reduction length K at which the main loop reaches half speed (prologue, epilogue and
    pipeline fill amortised over K)."""
    max_split_k: int = bounded(8, ge=1, le=64, why="libraries split K at most a few dozen ways")
    """Largest split of K over CTAs the library uses for short, deep GEMMs."""
    persistent: bool = False
    """Whether the library's kernels are persistent: one CTA per SM of the whole device, each
    with a fixed share of the tiles, so a collective holding SMs pushes the CTAs it displaces
    into a second round (:mod:`simtrain.compute.gemm`)."""
    split_accumulator_speed: float = bounded(
        1.0, gt=0, le=1, why="promoting partial sums never speeds a GEMM up"
    )
    """Speed of an FP8 GEMM with split accumulation (partial sums promoted to FP32 at
    intervals, cuBLASLt's fast accumulation off) relative to the fast-accumulation GEMMs the
    ceiling is measured on; 1 where the part has no such mode or it costs nothing."""

    @field_validator("tile_shapes")
    @classmethod
    def _tiles_in_range(cls, tiles: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
        bad = [t for t in tiles if not all(1 <= side <= 1024 for side in t)]
        if bad:
            raise ValueError(f"'gemm.tile_shapes' sides must be 1..1024 (got {bad[0]})")
        return tiles


class AttentionCalibration(Spec):
    """Achieved fraction of the 16-bit peak of one fused attention kernel family.

    Efficiency rises with sequence length as ``e_max · s / (s + s_half)`` (per-block prologue
    and, for causal masks, the partly masked diagonal blocks), with ``e_max`` depending on the
    head dimension (interpolated linearly between the listed ones, clamped at the ends).
    """

    forward: dict[int, float]
    """Asymptotic forward efficiency by head dimension."""
    backward: dict[int, float]
    """Asymptotic backward efficiency by head dimension."""
    seq_half: float = bounded(ge=0, le=1e6, why="a million tokens: beyond any context length")
    """Sequence length at which a non-causal kernel reaches half its asymptotic efficiency."""
    causal_seq_half: float = bounded(
        ge=0, le=1e6, why="a million tokens: beyond any context length"
    )
    """The same for a causal kernel (FLOPs counted as executed: the masked half skipped)."""
    source: str = ""
    """Where the kernel figures come from."""


class HostCalibration(Spec):
    """Host (CPU) cost of issuing work in one execution mode.

    The host issues every kernel and collective of a rank in program order and may run ahead
    of the device; when kernels are shorter than their issue cost, the host sets the pace.
    """

    per_kernel_s: float = bounded(ge=0, le=1e-2, why="10 ms per kernel is 100x eager PyTorch")
    """Host time to dispatch and launch one operator of the forward pass, the recomputation
    or the optimizer: the model's Python code runs for each (module calls, framework dispatch,
    autograd bookkeeping, the launch call; an operator may be a few framework kernels)."""
    backward_per_kernel_s: float | None = bounded(
        None, ge=0, le=1e-2, why="10 ms per kernel is 100x eager PyTorch"
    )
    """Host time to issue one operator of the backward pass (input or weight gradient). The
    backward graph runs on PyTorch's autograd engine, whose C++ threads issue each node's
    kernels without running the model's Python code
    (docs/references/frameworks.md §Host issue cost); None: the same as ``per_kernel_s``."""
    per_collective_s: float = bounded(
        ge=0, le=1e-2, why="10 ms per collective is 100x an eager issue"
    )
    """Host time to issue one collective or point-to-point transfer."""


class FitRecord(Spec):
    """How a fitted calibration was obtained, so anyone can re-run and check it."""

    command: str
    """The command that produced the numbers."""
    dataset: str
    """What was measured (with its citation in docs/references)."""
    fit_rows: str
    """Which rows the fit used (the rule, declared before fitting)."""
    held_out_rows: str
    """Which rows were held out, and the rule that chose them."""
    date: str
    """When the fit was run (ISO date)."""
    error: str
    """Error on the fit rows and on the held-out rows."""


class ComputeCalibration(Spec):
    """Every efficiency constant of the compute model for one accelerator family."""

    name: str
    """Name of the calibration (usually the accelerator family)."""
    accelerators: list[str]
    """Catalog accelerators this calibration was fitted on (or stated for)."""
    inherited_by: tuple[str, ...] = ()
    """Catalog accelerators with no measurements of their own that use these constants
    unchanged because they share the silicon (e.g. H200 and H100: same die and clocks);
    their reports say ``inherited``."""
    provenance: Provenance
    """``fitted`` (on measurements named in ``fit``), ``inherited`` (another part's fractions)
    or ``assumed`` (stated assumption, no measurement)."""
    source: str
    """Where the numbers come from (docs/references section, or the part inherited from)."""
    gemm: GemmCalibration
    """Per-shape GEMM model parameters."""
    attention: dict[str, AttentionCalibration]
    """Fused attention families this part runs (``flash``, ``flash1``, ``flash3``, ``cudnn``)."""
    sustained_compute_fraction: float = bounded(1.0, gt=0, le=1, why="a fraction of the peak")
    """Fraction of the benchmarked matrix throughput (GEMM and fused attention) that a whole
    training step sustains: kernel benchmarks run in short bursts, while a training step
    runs at the board's power limit for minutes (lower clocks) with the layouts, epilogues
    and back-to-back kernels real training uses. Fitted end to end on measured runs."""
    memory_efficiency: float = bounded(gt=0, le=1, why="a fraction of the HBM bandwidth")
    """Fraction of peak HBM bandwidth that memory-bound kernels (norms, activations,
    softmax, optimizer) reach."""
    strided_memory_fraction: float = bounded(
        1.0, gt=0, le=1, why="a generic kernel never beats the vectorised one"
    )
    """Bandwidth of PyTorch's generic elementwise kernel (a non-contiguous iteration: strided
    views, permuted copies, broadcast operands; ``Op.strided``) as a fraction of the
    vectorised memory-bound kernels'; 1 where no measurement sets it."""
    kernel_overhead_s: float = bounded(ge=0, le=1e-3, why="1 ms is 100x a kernel launch")
    """Device-side fixed cost per kernel (launch latency, prologue and tail)."""
    collective_sms: int = bounded(0, ge=0, le=1024, why="more SMs than any accelerator has")
    """SMs (CUs) a running collective kernel occupies (one CTA per NCCL/RCCL channel); compute
    that overlaps communication runs its GEMM and attention tiles on the remaining ones."""
    host: dict[ExecutionMode, HostCalibration]
    """Host issue cost per execution mode."""
    fit: FitRecord | None = None
    """How the numbers were fitted (fitted calibrations only)."""
