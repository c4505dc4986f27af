"""Fit the kernel-level compute constants (GEMM by shape, fused attention) on kernel benchmarks.

Usage:
  python experiments/calibration/kernels.py [--accelerator A100-80GB|H100-SXM|MI300X] [--json]

Data (``data/kernel_gemm.csv``, ``data/kernel_attention.csv``; citations in
``docs/references/kernels.md``): GEMM throughput by shape from the Azure AI-benchmarking-guide
(A100 FP16, eight shapes; H100 FP8 and MI300X FP8, nine each) and FlashAttention v1/2/3 kernel
throughput (A100, H100) by sequence length, head dimension and mask. The measured maximum achievable
matmul (MAMF) of each part bounds the fitted GEMM ceiling from above.

Hold-out, declared here before any fit: every third row of each table (positions 2, 5, 8, ...
in file order, per accelerator) is held out of the GEMM fit; for attention, the rows at
sequence length 2,048 are held out. Both sides are reported.

What is fitted, per accelerator: GEMM ``ceiling`` (at the benchmark dtype), the tile reuse
penalty, ``k_half`` and the per-kernel device overhead; per fused-attention family, the
asymptotic forward efficiency at head dim 64 and 128, the backward/forward ratio and the
two half-saturation sequence lengths. Where a table lacks what identifies a parameter, the
parameter is taken from a stated sibling (printed as "assumed from").
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

from simtrain.catalog import get_accelerator
from simtrain.compute import RooflineComputeModel, calibration_for
from simtrain.compute.attention_kernels import attention_efficiency, executed_fraction
from simtrain.compute.fitting import from_unit, nelder_mead, rms_log_error, to_unit
from simtrain.compute.gemm import gemm_time_s
from simtrain.specs.calibration import AttentionCalibration, GemmCalibration
from simtrain.workload.attention_torch import torch_attention_ops

DATA = Path(__file__).parent / "data"
TILES = [(256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64)]
HIDDEN = 2048  # FlashAttention benchmark: hidden 2048, batch*seq = 16k tokens
TOKENS = 16384
HELD_OUT_SEQ = 2048
# HBM fraction that bounds the skinny (memory-bound) GEMM shape; the end-to-end fit
# (fit.py) determines the memory efficiency of the other memory-bound kernels.
GEMM_MEMORY_EFFICIENCY = 0.8
# 16-bit over FP8 GEMM ceiling where the GEMM table is FP8: the ratio of the measured maximum
# achievable matmul throughputs (MAMF, docs/references/kernels.md §GEMM): H100 BF16 794.5 of
# 989.4, FP8 1402.6 of 1978.9 TF/s.
SIXTEEN_BIT_OVER_FP8 = {"H100-SXM": (794.5 / 989.4) / (1402.6 / 1978.9)}


def read(name: str) -> list[dict[str, str]]:
    """Rows of a data CSV (``#`` lines are its citation header)."""
    with (DATA / name).open(encoding="utf-8") as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


def gemm_rows(accelerator: str) -> tuple[list[dict], list[dict]]:
    """(fit, held-out) GEMM rows of one accelerator: every third row is held out."""
    rows = [r for r in read("kernel_gemm.csv") if r["accelerator"] == accelerator]
    held = [r for i, r in enumerate(rows) if i % 3 == 2]
    return [r for i, r in enumerate(rows) if i % 3 != 2], held


def gemm_model(params: np.ndarray, dtype: str) -> tuple[GemmCalibration, float, float]:
    """GEMM calibration, per-kernel overhead and memory efficiency from raw parameters."""
    ceiling, penalty, k_half, overhead = params
    cal = GemmCalibration(
        ceiling={dtype: to_unit(ceiling)},
        tile_shapes=TILES,
        tile_reuse_penalty=min(100.0, math.exp(penalty)),
        k_half=min(65536.0, math.exp(k_half)),
    )
    return cal, math.exp(overhead), GEMM_MEMORY_EFFICIENCY


def standard_attention_tflops(
    row: dict, gemm: GemmCalibration, overhead_s: float, memory_efficiency: float
) -> float:
    """Modelled TF/s of a PyTorch standard-attention row: the workload's ``torch`` ops
    (batched GEMMs, causal mask add, softmax; no dropout and no output copy, as benchmarked)
    timed by the compute model (standard_attention.py checks them with the catalog's
    calibration)."""
    accelerator = row["accelerator"]
    base = calibration_for(accelerator)
    ((dtype, ceiling),) = gemm.ceiling.items()
    if dtype == "fp8":
        ceiling *= SIXTEEN_BIT_OVER_FP8[accelerator]
    cal = base.model_copy(
        update={
            "gemm": gemm.model_copy(update={"ceiling": {"bf16": ceiling}}),
            "kernel_overhead_s": overhead_s,
            "memory_efficiency": memory_efficiency,
        }
    )
    model = RooflineComputeModel(get_accelerator(accelerator), "bf16", cal)
    s, d = int(row["seq"]), int(row["head_dim"])
    batch_heads = TOKENS // s * HIDDEN // d
    forward, backward = torch_attention_ops(
        batch_heads, s, s, d, 0, dropout=False, causal=row["causal"] == "1", contiguous_output=False
    )
    time_s = model.task_time_s(forward)
    counted = 4.0 * batch_heads * s * s * d
    if row["pass"] == "fwd_bwd":
        time_s += model.task_time_s(backward)
        counted *= 3.5
    if row["causal"] == "1":
        counted /= 2
    return counted / time_s / 1e12


def gemm_tflops(
    row: dict, cal: GemmCalibration, overhead_s: float, memory_efficiency: float
) -> float:
    """Modelled TF/s of one benchmark row."""
    acc = get_accelerator(row["accelerator"])
    dtype = row["dtype"]
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    element = 1 if dtype == "fp8" else 2
    operand_bytes = element * (m * k + k * n) + 2 * m * n
    time_s = overhead_s + gemm_time_s(
        cal,
        dtype,
        acc.num_compute_units,
        acc.peak_flops[dtype],
        acc.hbm_bandwidth_bytes_per_s * memory_efficiency,
        m,
        n,
        k,
        1,
        operand_bytes,
    )
    return 2.0 * m * n * k / time_s / 1e12


def fit_gemm(accelerator: str) -> dict:
    """Fit the GEMM constants of one accelerator on its GEMM shapes; report fit and
    held-out errors, and, as a check that is not fitted, PyTorch's standard-attention rows
    (simtrain's ``torch`` kernels) timed with the part's calibrated memory efficiency."""
    fit_rows, held = gemm_rows(accelerator)
    standard = attention_rows(accelerator, "torch")
    dtype = fit_rows[0]["dtype"]

    end_to_end_memory = calibration_for(accelerator).memory_efficiency

    def predict(p, rows, kind):
        cal, overhead, memory = gemm_model(p, dtype)
        if kind == "gemm":
            return [gemm_tflops(r, cal, overhead, memory) for r in rows]
        return [standard_attention_tflops(r, cal, overhead, end_to_end_memory) for r in rows]

    def loss(p: np.ndarray) -> float:
        logs = np.log(
            np.array(predict(p, fit_rows, "gemm"))
            / np.array([float(r["tflops"]) for r in fit_rows])
        )
        return float(np.mean(logs**2))

    best, best_loss = None, math.inf
    for start in (
        [from_unit(0.85), math.log(0.05), math.log(128), math.log(3e-6)],
        [from_unit(0.75), math.log(1.0), math.log(32), math.log(1e-6)],
    ):
        x = nelder_mead(loss, start)
        if loss(x) < best_loss:
            best, best_loss = x, loss(x)
    cal, overhead, _ = gemm_model(best, dtype)

    def err(rows, kind):
        if not rows:
            return None
        return round(
            rms_log_error(predict(best, rows, kind), [float(r["tflops"]) for r in rows]), 4
        )

    table = [
        (f"{r['m']}x{r['n']}x{r['k']}", float(r["tflops"]), t, "held out" if r in held else "")
        for r, t in zip(fit_rows + held, predict(best, fit_rows + held, "gemm"), strict=True)
    ] + [
        (
            f"torch {'causal' if r['causal'] == '1' else 'full'} d{r['head_dim']} "
            f"s{r['seq']} {r['pass']}",
            float(r["tflops"]),
            t,
            "check, not fitted",
        )
        for r, t in zip(standard, predict(best, standard, "torch"), strict=True)
    ]
    return {
        "dtype": dtype,
        "ceiling": round(cal.ceiling[dtype], 4),
        "tile_reuse_penalty": round(cal.tile_reuse_penalty, 4),
        "k_half": round(cal.k_half, 1),
        "kernel_overhead_s": float(f"{overhead:.3g}"),
        "fit_rms_log_error": err(fit_rows, "gemm"),
        "held_out_rms_log_error": err(held, "gemm"),
        "torch_check_rms_log_error": err(standard, "torch"),
        "rows": table,
    }


def attention_rows(accelerator: str, kernel: str) -> list[dict]:
    return [
        r
        for r in read("kernel_attention.csv")
        if r["accelerator"] == accelerator and r["kernel"] == kernel
    ]


def attention_tflops(row: dict, cal: AttentionCalibration, peak: float, sms: int) -> float:
    """Modelled TF/s of one benchmark row, in the benchmark's FLOP convention."""
    s, d = int(row["seq"]), int(row["head_dim"])
    causal = row["causal"] == "1"
    batch_heads = TOKENS // s * HIDDEN // d
    fwd_flops = 4.0 * batch_heads * s * s * d
    executed = executed_fraction(causal, s)
    time_s = (
        fwd_flops
        * executed
        / (peak * attention_efficiency(cal, False, causal, s, s, d, batch_heads, sms))
    )
    counted = fwd_flops
    if row["pass"] == "fwd_bwd":
        bwd = 2.5 * fwd_flops
        time_s += (
            bwd
            * executed
            / (peak * attention_efficiency(cal, True, causal, s, s, d, batch_heads, sms))
        )
        counted += bwd
    if causal:
        counted /= 2
    return counted / time_s / 1e12


def attention_model(p: np.ndarray, fixed: dict) -> AttentionCalibration:
    """Attention calibration from unconstrained parameters (some may be fixed)."""
    names = ["f64", "f128", "ratio", "s_half", "cs_half"]
    values = dict(zip([n for n in names if n not in fixed], p, strict=True))
    v = {**{k: fixed[k] for k in fixed}, **values}
    f64 = to_unit(v["f64"]) if "f64" not in fixed else fixed["f64"]
    f128 = to_unit(v["f128"]) if "f128" not in fixed else fixed["f128"]
    ratio = to_unit(v["ratio"]) if "ratio" not in fixed else fixed["ratio"]
    return AttentionCalibration(
        forward={64: f64, 128: f128},
        backward={64: f64 * ratio, 128: f128 * ratio},
        seq_half=math.exp(v["s_half"]),
        causal_seq_half=math.exp(v["cs_half"]),
    )


def fit_attention(accelerator: str, kernel: str, fixed: dict) -> tuple[AttentionCalibration, dict]:
    """Fit one kernel family; ``fixed`` holds parameters the data cannot identify."""
    acc = get_accelerator(accelerator)
    peak, sms = acc.peak_flops["bf16"], acc.num_compute_units
    rows = attention_rows(accelerator, kernel)
    fit_rows = [r for r in rows if int(r["seq"]) != HELD_OUT_SEQ]
    held = [r for r in rows if int(r["seq"]) == HELD_OUT_SEQ]
    free = [n for n in ["f64", "f128", "ratio", "s_half", "cs_half"] if n not in fixed]
    start = {
        "f64": from_unit(0.5),
        "f128": from_unit(0.6),
        "ratio": from_unit(0.8),
        "s_half": math.log(200),
        "cs_half": math.log(500),
    }

    def loss(p: np.ndarray) -> float:
        cal = attention_model(p, fixed)
        return (
            rms_log_error(
                [attention_tflops(r, cal, peak, sms) for r in fit_rows],
                [float(r["tflops"]) for r in fit_rows],
            )
            ** 2
        )

    x = nelder_mead(loss, [start[n] for n in free])
    cal = attention_model(x, fixed)

    def err(rs):
        if not rs:
            return None
        return round(
            rms_log_error(
                [attention_tflops(r, cal, peak, sms) for r in rs], [float(r["tflops"]) for r in rs]
            ),
            4,
        )

    return cal, {
        "fit_rms_log_error": err(fit_rows),
        "held_out_rms_log_error": err(held),
        "fit_rows": len(fit_rows),
        "held_out_rows": len(held),
    }


def fit_all_attention() -> dict:
    """Fit every family, in an order that lets a family borrow what its data cannot identify."""
    out = {}
    h100_flash, report = fit_attention("H100-SXM", "flash", {})
    out[("H100-SXM", "flash")] = (h100_flash, report)
    ratio = h100_flash.backward[128] / h100_flash.forward[128]
    d64_share = h100_flash.forward[64] / h100_flash.forward[128]
    a100_flash, report = fit_attention("A100-80GB", "flash", {"ratio": ratio})
    report["assumed"] = {"backward/forward ratio": f"{ratio:.3f} from H100 FlashAttention-2"}
    out[("A100-80GB", "flash")] = (a100_flash, report)
    for family in ("flash3", "cudnn"):
        cal, report = fit_attention("H100-SXM", family, {"ratio": ratio, "f64": 0.5})
        # forward-only, head dim 128: take d64 as the same share of d128 as FlashAttention-2's
        cal = cal.model_copy(
            update={
                "forward": {64: cal.forward[128] * d64_share, 128: cal.forward[128]},
                "backward": {64: cal.forward[128] * d64_share * ratio, 128: cal.backward[128]},
            }
        )
        report["assumed"] = {
            "backward/forward ratio": f"{ratio:.3f} from H100 FlashAttention-2",
            "head dim 64": f"{d64_share:.3f} of head dim 128, from H100 FlashAttention-2",
        }
        out[("H100-SXM", family)] = (cal, report)
    for accelerator in ("A100-80GB", "H100-SXM"):
        # FlashAttention v1: forward+backward only, so the split is FlashAttention-2's
        cal, report = fit_attention(accelerator, "flash1", {"ratio": ratio})
        report["assumed"] = {"backward/forward ratio": f"{ratio:.3f} from H100 FlashAttention-2"}
        out[(accelerator, "flash1")] = (cal, report)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the fitted values as JSON")
    args = parser.parse_args()
    result: dict = {"gemm": {}, "attention": {}}
    for accelerator in ("A100-80GB", "H100-SXM", "MI300X"):
        result["gemm"][accelerator] = fit_gemm(accelerator)
    for (accelerator, family), (cal, report) in fit_all_attention().items():
        result["attention"][f"{accelerator}/{family}"] = {
            "forward": {k: round(v, 4) for k, v in cal.forward.items()},
            "backward": {k: round(v, 4) for k, v in cal.backward.items()},
            "seq_half": round(cal.seq_half, 1),
            "causal_seq_half": round(cal.causal_seq_half, 1),
            **report,
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for accelerator, g in result["gemm"].items():
        print(
            f"GEMM {accelerator} ({g['dtype']}): ceiling {g['ceiling']}, reuse penalty "
            f"{g['tile_reuse_penalty']}, k_half {g['k_half']}, overhead "
            f"{g['kernel_overhead_s']:.2g} s; "
            f"rms log error fit {g['fit_rms_log_error']}, held out {g['held_out_rms_log_error']}"
        )
        for label, meas, model, tag in g["rows"]:
            note = f" ({tag})" if tag else ""
            print(f"  {label:<32} measured {meas:7.1f}  model {model:7.1f}{note}")
    for key, a in result["attention"].items():
        print(f"attention {key}: {json.dumps({k: v for k, v in a.items()})}")


if __name__ == "__main__":
    sys.exit(main())
