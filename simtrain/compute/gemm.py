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

Examples:
    >>> from simtrain.specs.calibration import GemmCalibration
    >>> cal = GemmCalibration(
    ...     ceiling={"bf16": 0.8}, tile_shapes=[(256, 128)], tile_reuse_penalty=0.0,
    ...     k_half=0.0, max_split_k=1)
    >>> round(gemm_efficiency(cal, "bf16", 108, 256 * 54, 128 * 2, 4096), 3)  # 108 tiles
    0.8
    >>> round(gemm_efficiency(cal, "bf16", 108, 256 * 55, 128 * 2, 4096), 3)  # 110 on 108 SMs
    0.407
"""

from __future__ import annotations

import math
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
    cal: GemmCalibration, dtype: str, num_sms: int, m: int, n: int, k: int, batch: int = 1
) -> float:
    """Best fraction of peak over tiles and splits for ``batch`` GEMMs of M x N x K.

    The split-K partial-sum traffic is not included here (see :func:`gemm_time_s`).
    """
    return max(eff for eff, _ in _candidates(cal, dtype, num_sms, m, n, k, batch))


def _candidates(
    cal: GemmCalibration, dtype: str, num_sms: int, m: int, n: int, k: int, batch: int
) -> list[tuple[float, int]]:
    """(efficiency, split) of every tile and split-K choice."""
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
            waves = -(-ctas // num_sms)
            k_slice = k / split
            out.append((base * ctas / (waves * num_sms) * k_slice / (k_slice + k_half), split))
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
    """
    flops = 2.0 * m * n * k * batch
    best = math.inf
    for eff, split in _candidates(cal, dtype, num_sms, m, n, k, batch):
        partials = 0.0 if split == 1 else 2.0 * split * m * n * batch * PARTIAL_BYTES
        time_s = max(flops / (peak_flops * eff), (operand_bytes + partials) / memory_bytes_per_s)
        best = min(best, time_s)
    return best
