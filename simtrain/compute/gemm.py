"""Time of a GEMM by its shape: tile choice, wave quantisation, K-loop fill, split-K, memory.

A GEMM of output M x N and reduction K is cut into output tiles of ``tm x tn``, one per CTA,
spread over the device's SMs (CUs) in waves. What it achieves, as a fraction of the dense
peak, is the product of

- the **ceiling** the best-shaped GEMM reaches on the part (measured maximum achievable
  matmul throughput),
- the **tile reuse** factor: smaller tiles re-read operands more often per FLOP, so a
  ``tm x tn`` tile runs at ``1 / (1 + p·128·(1/tm + 1/tn))`` of the largest tile's speed,
- the **fill** of the edge tiles (an M of 130 on 128-row tiles wastes most of the second row
  of tiles) and the **wave efficiency** ``tiles / (waves · SMs)`` (the last wave leaves SMs
  idle),
- the **K-loop fill** ``K / (K + k_half)``: each tile pays a prologue and epilogue that a long
  reduction amortises.

Short, deep GEMMs (weight gradients of small layers) split K over several CTAs and add the
partial results (``split_k``), which fills the device at the price of writing and reading the
fp32 partials. The library is assumed to pick the fastest tile and split, as cuBLAS's and
hipBLASLt's heuristics aim to. A GEMM can never beat streaming its operands through HBM, so the
time is the larger of the compute and the memory time, plus a fixed per-kernel cost.

**Persistent kernels** (``GemmCalibration.persistent``; Hopper's warp-specialised cuBLAS and
CUTLASS 3 kernels) launch at most one CTA per SM of the whole device and hand each CTA a fixed
share of the tiles. When a collective kernel holds some SMs (``num_sms`` below the device's
``grid_sms``), the CTAs that find no free SM wait for a whole CTA's share to finish: the
kernel runs ``ceil(CTAs / free SMs)`` rounds of its waves instead of spreading the tiles over
the free SMs (a 132-CTA GEMM next to a 24-CTA all-gather on H100 runs about twice as long,
docs/references/kernels.md §Interference). The tile and split are those the library picks for
the whole device, since it sizes the launch without knowing the collective is there.

Examples:
    >>> from simtrain.specs.calibration import GemmCalibration
    >>> cal = GemmCalibration(
    ...     ceiling={"bf16": 0.8}, tile_shapes=[(256, 128)], tile_reuse_penalty=0.0,
    ...     k_half=0.0, max_split_k=1)
    >>> round(gemm_efficiency(cal, "bf16", 108, 256 * 54, 128 * 2, 4096), 3)  # 108 tiles
    0.8
    >>> round(gemm_efficiency(cal, "bf16", 108, 256 * 55, 128 * 2, 4096), 3)  # 110 on 108 SMs
    0.407
    >>> round(gemm_efficiency(cal, "bf16", 108, 256 * 264, 128 * 2, 4096), 3)  # 528 tiles
    0.782
    >>> persistent = cal.model_copy(update={"persistent": True})  # 132 CTAs launched for 132 SMs
    >>> round(gemm_efficiency(persistent, "bf16", 108, 256 * 264, 128 * 2, 4096, grid_sms=132), 3)
    0.489

    The last two: 24 of 132 SMs are held by a collective. Spread over the 108 free SMs, the 528
    tiles take 5 waves; a persistent kernel's 132 CTAs (4 tiles each) take two rounds of 4, so
    108 SMs at 0.489 do half the work per second of 132 SMs at 0.8: twice the time.
"""

from __future__ import annotations

from functools import lru_cache

from simtrain.specs.calibration import GemmCalibration

PARTIAL_BYTES = 4  # split-K partial sums are fp32


def _splits(max_split_k: int) -> list[int]:
    """Split-K factors the library may use: powers of two up to the calibrated maximum.

    The set does not depend on K (a short K slice pays through the K-loop fill instead), so
    a GEMM's time never decreases as K grows.
    """
    return [2**i for i in range(max_split_k.bit_length()) if 2**i <= max_split_k]


@lru_cache(maxsize=64)
def _choices(
    tiles: tuple[tuple[int, int], ...], penalty: float
) -> tuple[tuple[int, int, float], ...]:
    """(tile rows, tile columns, reuse factor) of each tile, once per tile set and penalty."""
    p = penalty * 128
    big_m, big_n = tiles[0]
    biggest = 1.0 / (1.0 + p * (1.0 / big_m + 1.0 / big_n))
    return tuple((tm, tn, 1.0 / (1.0 + p * (1.0 / tm + 1.0 / tn)) / biggest) for tm, tn in tiles)


def gemm_efficiency(
    cal: GemmCalibration,
    dtype: str,
    num_sms: int,
    m: int,
    n: int,
    k: int,
    batch: int = 1,
    grid_sms: int | None = None,
) -> float:
    """Best fraction of peak over tiles and splits for ``batch`` GEMMs of M x N x K.

    ``num_sms`` SMs are free; ``grid_sms`` (default ``num_sms``) is the device's SM count a
    persistent kernel sizes its launch for. The split-K partial-sum traffic is not included
    here (see :func:`gemm_time_s`).
    """
    grid = num_sms if grid_sms is None else grid_sms
    candidates = _candidates(cal, dtype, num_sms, m, n, k, batch, grid)
    if not cal.persistent or grid <= num_sms:
        return max(eff for eff, _, _ in candidates)
    return max((full, eff) for eff, _, full in candidates)[1]


def _waves(cal: GemmCalibration, ctas: int, num_sms: int, grid_sms: int) -> int:
    """Rounds of CTAs a kernel of ``ctas`` CTAs runs on ``num_sms`` free SMs (module docstring)."""
    if not cal.persistent or num_sms >= grid_sms:
        return -(-ctas // num_sms)
    launched = min(ctas, grid_sms)
    return -(-ctas // grid_sms) * -(-launched // num_sms)


def _candidates(
    cal: GemmCalibration,
    dtype: str,
    num_sms: int,
    m: int,
    n: int,
    k: int,
    batch: int,
    grid_sms: int,
) -> list[tuple[float, int, float]]:
    """(efficiency on the free SMs, split, efficiency on the whole device) of every choice."""
    ceiling = cal.ceiling.get(dtype, cal.ceiling.get("bf16", 1.0))
    k_half = cal.k_half
    splits = _splits(cal.max_split_k)
    out = []
    tiles_key = tuple((int(a), int(b)) for a, b in cal.tile_shapes)
    for tm, tn, reuse in _choices(tiles_key, cal.tile_reuse_penalty):
        rows, cols = -(-m // tm), -(-n // tn)
        base = ceiling * reuse * (m / (rows * tm)) * (n / (cols * tn))
        tiles = rows * cols * batch
        for split in splits:
            ctas = tiles * split
            k_slice = k / split
            fill = base * k_slice / (k_slice + k_half)
            full = fill * ctas / (-(-ctas // grid_sms) * grid_sms)
            waves = _waves(cal, ctas, num_sms, grid_sms)
            out.append((fill * ctas / (waves * num_sms), split, full))
    return out


def gemm_time_s(
    cal: GemmCalibration,
    dtype: str,
    num_sms: int,
    peak_flops: float,
    memory_bytes_per_s: float,
    m: int,
    n: int,
    k: int,
    batch: int,
    operand_bytes: float,
    grid_sms: int | None = None,
) -> float:
    """Device seconds of ``batch`` GEMMs of M x N x K (without the fixed per-kernel cost).

    Args:
        cal: the part's GEMM calibration.
        dtype: input dtype (selects the ceiling).
        num_sms: SMs / CUs the tiles are spread over.
        peak_flops: dense peak FLOP/s at ``dtype``.
        memory_bytes_per_s: achievable HBM bandwidth.
        m: output rows.
        n: output columns.
        k: reduction length.
        batch: independent GEMMs of that shape in the kernel.
        operand_bytes: bytes of A, B and C moved through HBM once.
        grid_sms: the device's SM count (default ``num_sms``); below it, a collective holds
            the other SMs and a persistent kernel keeps its launch (module docstring).
    """
    flops = 2.0 * m * n * k * batch
    grid = num_sms if grid_sms is None else grid_sms

    def seconds(eff: float, split: int, peak: float) -> float:
        partials = 0.0 if split == 1 else 2.0 * split * m * n * batch * PARTIAL_BYTES
        return max(flops / (peak * eff), (operand_bytes + partials) / memory_bytes_per_s)

    candidates = _candidates(cal, dtype, num_sms, m, n, k, batch, grid)
    if not cal.persistent or grid <= num_sms:
        return min(seconds(eff, split, peak_flops) for eff, split, _ in candidates)
    # the launch is the fastest on the whole device, whose peak is grid / num_sms times ours
    whole_device = peak_flops * grid / num_sms
    _, eff, split = min(
        (seconds(full, split, whole_device), eff, split) for eff, split, full in candidates
    )
    return seconds(eff, split, peak_flops)
