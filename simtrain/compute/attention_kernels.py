"""Time of a fused attention kernel by family, sequence length, head dimension and mask.

Fused attention (FlashAttention-2/3, cuDNN) tiles queries into blocks of 128 and streams the
keys through each block. Its achieved fraction of the 16-bit peak grows with the key length,
which amortises each block's prologue and softmax rescaling, as ``e_max · s / (s + s_half)``;
``e_max`` depends on the head dimension (a wider head does more MMA work per byte of
softmax state). A causal kernel skips the fully masked blocks, so it executes about half of
the counted FLOPs plus the diagonal blocks, and its partly masked diagonal blocks lower its
efficiency at short sequences (a larger ``s_half``). Query blocks times batch·heads are the
CTAs, spread over the SMs in waves: a short sequence on few heads (high tensor parallelism)
leaves most of the device idle.

Examples:
    >>> from simtrain.specs.calibration import AttentionCalibration
    >>> cal = AttentionCalibration(forward={64: 0.5, 128: 0.7}, backward={64: 0.4, 128: 0.6},
    ...     seq_half=0.0, causal_seq_half=0.0)
    >>> head_dim_efficiency(cal.forward, 96)  # halfway between the listed head dims
    0.6
    >>> round(executed_fraction(True, 1024), 4)  # 8 query blocks: half plus the diagonal
    0.5625
"""

from __future__ import annotations

import itertools
import math

from simtrain.specs.calibration import AttentionCalibration

BLOCK = 128  # query/key block of the fused kernels


def head_dim_efficiency(table: dict[int, float], head_dim: int) -> float:
    """Asymptotic efficiency at ``head_dim``, linear between listed dims, clamped at the ends."""
    dims = sorted(table)
    if head_dim <= dims[0]:
        return table[dims[0]]
    if head_dim >= dims[-1]:
        return table[dims[-1]]
    for low, high in itertools.pairwise(dims):
        if low <= head_dim <= high:
            w = (head_dim - low) / (high - low)
            return table[low] * (1 - w) + table[high] * w
    raise AssertionError("unreachable: head_dim lies between the listed dims")


def executed_fraction(causal: bool, s_q: int, window: int = 0) -> float:
    """Fraction of the counted FLOPs a kernel executes.

    Without a window the count is the full ``s_q x s_kv`` matrix and a causal kernel skips
    the masked half (plus the diagonal blocks it computes whole). With a sliding window the
    count is already ``s_q x window``; only the first ``window`` queries see fewer keys, a
    triangle of ``window²/2`` out of ``s_q·window``.
    """
    if not causal:
        return 1.0
    if window and window < s_q:
        return 1.0 - window / (2.0 * s_q)
    blocks = max(1, math.ceil(s_q / BLOCK))
    return 0.5 + 0.5 / blocks


def attention_efficiency(
    cal: AttentionCalibration,
    backward: bool,
    causal: bool,
    s_q: int,
    s_kv: int,
    head_dim: int,
    batch_heads: int,
    num_sms: int,
) -> float:
    """Fraction of the 16-bit peak reached on the executed FLOPs.

    ``s_kv`` is the number of keys each query block streams through (the window, for
    sliding-window attention).
    """
    e_max = head_dim_efficiency(cal.backward if backward else cal.forward, head_dim)
    s_half = cal.causal_seq_half if causal else cal.seq_half
    ctas = batch_heads * max(1, math.ceil(s_q / BLOCK))
    wave = ctas / (math.ceil(ctas / num_sms) * num_sms)
    return e_max * s_kv / (s_kv + s_half) * wave
