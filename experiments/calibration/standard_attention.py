"""Kernel-level check (and one fit) of the unfused attention paths on PyTorch's standard attention.

Usage:
  PYTHONPATH=. python experiments/calibration/standard_attention.py [--fit] [--json]

Data (``data/kernel_attention.csv``, rows ``torch``; docs/references/kernels.md §Standard
attention): the "PyTorch" bars of the FlashAttention-2 paper's Figures 4 (A100) and 7 (H100),
forward + backward, and the "standard attention" bars of FlashAttention-3's forward figure
(H100), at sequence 512 to 8K, head dim 64 and 128, causal and not, 16K tokens per batch,
hidden 2048. The benchmark function (flash-attention ``benchmarks/benchmark_flash_attention.py``,
``attention_pytorch``) has no dropout (p = 0 launches no kernel) and returns the permuted
output itself (no copy to (batch, sequence, hidden)).

Each bar is modelled with the ops simtrain emits for one attention layer at the benchmark's
shape, timed by the part's catalog calibration at burst clocks (a kernel benchmark: no
sustained-load derating, as the GEMM and FlashAttention fits in ``kernels.py``):

- ``torch`` (:mod:`simtrain.workload.attention_torch`): what the benchmark launches;
- ``unfused`` (Megatron's fused scale-mask-softmax path), for comparison: the mechanism
  simtrain used for these bars before ``torch`` existed.

One constant is fitted here (``--fit``): ``strided_memory_fraction``, the bandwidth of ATen's
generic (non-vectorised) elementwise kernel relative to the vectorised ones, which the
``torch`` path's layout copies and broadcast mask add run (``Op.strided``). Everything else
comes from the calibration files as they are. Split, declared before the fit: the fit uses
the A100 forward + backward bars at sequence 512, 1K, 4K and 8K (16 bars); held out are the
A100 bars at 2K (4) and every H100 bar (30: FlashAttention-2's forward + backward and
FlashAttention-3's forward only), which H100's calibration prices with A100's fraction.
Errors are model / measured - 1 (positive = the model is too fast).
"""

from __future__ import annotations

import argparse
import json
import sys

from experiments.calibration.kernels import HELD_OUT_SEQ, HIDDEN, TOKENS, attention_rows
from simtrain.catalog import get_accelerator
from simtrain.compute import RooflineComputeModel, calibration_for
from simtrain.compute.fitting import golden_section, rms_log_error
from simtrain.workload.attention import attention_core
from simtrain.workload.attention_torch import torch_attention_ops

ACCELERATORS = ("A100-80GB", "H100-SXM")
FIT_ACCELERATOR = "A100-80GB"


def is_fit_bar(accelerator: str, row: dict) -> bool:
    """Whether a bar is in the fit subset (module docstring): A100, not at sequence 2K."""
    return accelerator == FIT_ACCELERATOR and int(row["seq"]) != HELD_OUT_SEQ


def burst_model(accelerator: str, strided_fraction: float | None = None) -> RooflineComputeModel:
    """The part's catalog compute model without the sustained-load derating (and with
    ``strided_fraction`` in place of the catalog's, when given)."""
    update: dict[str, float] = {"sustained_compute_fraction": 1.0}
    if strided_fraction is not None:
        update["strided_memory_fraction"] = strided_fraction
    cal = calibration_for(accelerator).model_copy(update=update)
    return RooflineComputeModel(get_accelerator(accelerator), "bf16", cal)


def fit_strided_fraction() -> dict:
    """Fit ``strided_memory_fraction`` on the declared fit bars (least squares in log TF/s)."""
    rows = [r for r in attention_rows(FIT_ACCELERATOR, "torch") if is_fit_bar(FIT_ACCELERATOR, r)]
    measured = [float(r["tflops"]) for r in rows]

    def loss(fraction: float) -> float:
        model = burst_model(FIT_ACCELERATOR, fraction)
        return rms_log_error([modelled_tflops(r, "torch", model) for r in rows], measured)

    fraction = golden_section(loss, 0.05, 1.0, 1e-4)
    return {
        "strided_memory_fraction": round(fraction, 3),
        "fit_bars": len(rows),
        "fit_rms_log_error": round(loss(fraction), 4),
        "rms_log_error_at_1": round(loss(1.0), 4),
    }


def modelled_tflops(row: dict, kernel: str, model: RooflineComputeModel) -> float:
    """TF/s of one bar in the benchmark's FLOP convention (4·s²·d·heads forward, ×3.5 for
    forward + backward, halved when causal), timed with ``kernel``'s ops."""
    s, d = int(row["seq"]), int(row["head_dim"])
    causal = row["causal"] == "1"
    batch_heads = TOKENS // s * HIDDEN // d
    if kernel == "torch":
        forward, backward = torch_attention_ops(
            batch_heads, s, s, d, 0, dropout=False, causal=causal, contiguous_output=False
        )
    else:  # Megatron's path generates the causal mask inside its softmax kernel
        forward, backward = attention_core(kernel, batch_heads, s, s, d, 0.0, 0, False)
    time_s = model.task_time_s(forward)
    counted = 4.0 * batch_heads * s * s * d
    if row["pass"] == "fwd_bwd":
        time_s += model.task_time_s(backward)
        counted *= 3.5
    if causal:
        counted /= 2
    return counted / time_s / 1e12


def report() -> list[dict]:
    """One entry per bar: measured TF/s and each path's modelled TF/s and error."""
    out = []
    for accelerator in ACCELERATORS:
        model = burst_model(accelerator)
        for row in attention_rows(accelerator, "torch"):
            measured = float(row["tflops"])
            entry = {
                "accelerator": accelerator,
                "set": "fit" if is_fit_bar(accelerator, row) else "held_out",
                "pass": row["pass"],
                "causal": row["causal"] == "1",
                "head_dim": int(row["head_dim"]),
                "seq": int(row["seq"]),
                "measured_tflops": measured,
            }
            for kernel in ("torch", "unfused"):
                tflops = modelled_tflops(row, kernel, model)
                entry[f"{kernel}_tflops"] = round(tflops, 1)
                entry[f"{kernel}_error"] = round(tflops / measured - 1, 4)
            out.append(entry)
    return out


def summary(entries: list[dict], kernel: str) -> dict:
    """Mean absolute and largest error of ``kernel`` over ``entries``."""
    errors = [e[f"{kernel}_error"] for e in entries]
    return {
        "bars": len(errors),
        "mape": round(sum(abs(e) for e in errors) / len(errors), 4),
        "max_abs": round(max(abs(e) for e in errors), 4),
        "mean_signed": round(sum(errors) / len(errors), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print every bar as JSON")
    parser.add_argument("--fit", action="store_true", help="fit strided_memory_fraction")
    args = parser.parse_args(argv)
    if args.fit:
        print(json.dumps(fit_strided_fraction(), indent=2))
        return 0
    entries = report()
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    for e in entries:
        mask = "causal" if e["causal"] else "full"
        print(
            f"{e['accelerator']:10s} {e['set']:8s} {e['pass']:7s} {mask:6s} d{e['head_dim']:<3d} "
            f"s{e['seq']:<5d} measured {e['measured_tflops']:6.1f}  "
            f"torch {e['torch_tflops']:6.1f} ({e['torch_error']:+6.1%})  "
            f"unfused {e['unfused_tflops']:6.1f} ({e['unfused_error']:+6.1%})"
        )
    for accelerator in ACCELERATORS:
        for subset in ("fit", "held_out"):
            part = [e for e in entries if e["accelerator"] == accelerator and e["set"] == subset]
            if not part:
                continue
            for kernel in ("torch", "unfused"):
                s = summary(part, kernel)
                print(
                    f"{accelerator:10s} {subset:8s} {kernel:8s} "
                    f"bars {s['bars']:2d}  MAPE {s['mape']:6.1%}  max {s['max_abs']:6.1%}  "
                    f"mean signed {s['mean_signed']:+6.1%}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
