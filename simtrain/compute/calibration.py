"""Calibration constants of the compute model, one table per accelerator, each with its source.

These are the only tunable numbers of the compute model. A100 values were fitted once on the
measured A100 iterations of vTrain (``shared/reference/vtrain-measured-runs.csv``) and H100
values on NVIDIA NeMo's H100 reference throughputs (``training-runs.md`` §5.3), both by
``experiments/calibration/fit.py``; accelerators without measured runs in the reference set
inherit the A100 *fractions* (efficiency relative to their own peak and bandwidth). The
validation suites (Megatron-LM 2021 on A100, Llama 3 405B on H100) are never fitted on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ComputeCalibration:
    """Efficiency constants of one accelerator.

    Attributes:
        gemm_efficiency: fraction of dense peak a large, well-shaped GEMM reaches.
        gemm_k_half: reduction length K at which a GEMM reaches half of gemm_efficiency from
            its main-loop pipeline fill (efficiency scales as K / (K + gemm_k_half)).
        tile_m, tile_n: output tile of the GEMM kernels, for wave quantisation over the SMs.
        attention_fwd_efficiency: fraction of peak a fused (flash) attention forward reaches.
        attention_bwd_efficiency: the same for the backward (which recomputes scores).
        memory_efficiency: fraction of peak HBM bandwidth that memory-bound kernels reach.
        kernel_overhead_s: fixed device-side cost per kernel (prologue, tail), added to each op.
        host_issue_s: host time to issue one kernel (framework dispatch and launch); a run of
            ops takes at least this much per op, however short its kernels.
        source: where the numbers come from.
    """

    gemm_efficiency: float
    gemm_k_half: float
    tile_m: int
    tile_n: int
    attention_fwd_efficiency: float
    attention_bwd_efficiency: float
    memory_efficiency: float
    kernel_overhead_s: float
    host_issue_s: float
    source: str


# Fitted by `python experiments/calibration/fit.py --dataset vtrain --rows sample` (coordinate
# descent, one round) on 178 measured A100 iterations of vTrain: every 16th single-node row and
# the multi-node rows but GPT-3 175B (held out). RMS log error 0.138 (≈14 %). The attention
# efficiencies apply to fused (flash) kernels, which those runs did not use; they are not
# fitted (the FlashAttention-2 paper reports 50-73 % of A100 peak forward, ≈40 % backward).
A100 = ComputeCalibration(
    gemm_efficiency=0.70,
    gemm_k_half=64.0,
    tile_m=128,
    tile_n=256,
    attention_fwd_efficiency=0.55,
    attention_bwd_efficiency=0.40,
    memory_efficiency=0.80,
    kernel_overhead_s=4e-6,
    host_issue_s=60e-6,
    source="fitted on vTrain A100 iterations (experiments/calibration/fit.py --dataset vtrain)",
)

# Fitted by `python experiments/calibration/fit.py --dataset nemo --rounds 2` on nine NVIDIA
# NeMo 24.12 H100 reference runs (training-runs.md §5.3, FP8 linear layers): large-GEMM and
# memory-bound efficiency and the fused-attention efficiencies; the host and GEMM-shape terms
# stay at the A100 values (the NeMo rows, all large models, do not constrain them). RMS log
# error 0.053 (the fit converged in the second round). The fused-attention values, ≈30 % of
# the BF16 peak, are in line with FlashAttention-2 on H100. Applied to every dtype on
# H100-class parts (also BF16, which no reference run isolates); the Llama 3 405B row in
# experiments/validation/llama3 is the blind test.
H100 = ComputeCalibration(
    gemm_efficiency=0.55,
    gemm_k_half=A100.gemm_k_half,
    tile_m=A100.tile_m,
    tile_n=A100.tile_n,
    attention_fwd_efficiency=0.30,
    attention_bwd_efficiency=0.30,
    memory_efficiency=0.50,
    kernel_overhead_s=A100.kernel_overhead_s,
    host_issue_s=A100.host_issue_s,
    source="fitted on NeMo H100 throughputs (experiments/calibration/fit.py --dataset nemo)",
)

CALIBRATIONS: dict[str, ComputeCalibration] = {
    "A100-40GB": A100,
    "A100-80GB": A100,
    "H100-SXM": H100,
    "H200": H100,  # same compute die and clocks as H100 SXM (hardware.md §7.1)
}


def calibration_for(accelerator: str) -> ComputeCalibration:
    """Calibration of ``accelerator``.

    Accelerators without measured runs in the reference set (B200, MI250X, MI300X, TPUs)
    inherit the A100 fractions: an assumption, flagged in their reports' numbers as such.
    """
    return CALIBRATIONS.get(accelerator, A100)
