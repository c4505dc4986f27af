"""``simtrain calibrate``: fit the compute constants of an accelerator to a profile of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from simtrain.cli.app import app, console, fail


@app.command(short_help="Fit an accelerator's compute constants to a profile.")
def calibrate(
    trace_dir: Annotated[
        Path,
        typer.Argument(
            metavar="TRACE_DIR",
            help="Folder of per-rank PyTorch profiler (Kineto) or Chakra traces with measured "
            "kernel durations.",
        ),
    ],
    accelerator: Annotated[
        str,
        typer.Option(
            "--accelerator", help="The accelerator the profile was taken on, e.g. H100-SXM."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="FILE",
            help="Write the calibration YAML here (for cluster.calibration).",
        ),
    ] = None,
    dtype: Annotated[
        str, typer.Option("--dtype", help="Dtype the profiled GEMMs ran in (bf16, fp16, fp8).")
    ] = "bf16",
    attention_kernel: Annotated[
        str,
        typer.Option(
            "--attention-kernel",
            help="Attention the profile ran: flash (FlashAttention-2), flash1, flash3, cudnn, "
            "unfused (Megatron) or torch (plain PyTorch).",
        ),
    ] = "flash",
    as_json: Annotated[bool, typer.Option("--json", help="Print the fit as JSON.")] = False,
) -> None:
    """Fit ACCELERATOR's compute constants to the kernels measured in TRACE_DIR.

    Prints, per kernel family (gemm, attention, memory), how many kernels were used and the
    measured against the modelled time before and after the fit, on the fit kernels and on
    the held-out ones (every fifth). With --out it writes a calibration file; name it in an
    experiment as cluster.calibration to predict a large run from a one-node profile.

    Example: simtrain calibrate traces/ --accelerator H100-SXM --out calib.yaml
    """
    from simtrain.catalog import get_accelerator
    from simtrain.compute import calibration_for
    from simtrain.compute.roofline import check_dtype
    from simtrain.traceio.calibrate import fit_calibration, kernel_samples, write_calibration
    from simtrain.traceio.readers import read_traces

    part = get_accelerator(accelerator, "--accelerator")
    check_dtype(part, dtype)
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        raise fail(f"'--out' must be a file path in an existing folder (got '{out}')")
    _, traces = read_traces(trace_dir)
    samples = kernel_samples(traces)
    result = fit_calibration(
        samples, part, dtype, calibration_for(part.name), attention_kernel, str(trace_dir)
    )
    if out is not None:
        write_calibration(result.calibration, out)
    if as_json:
        payload = {
            "accelerator": part.name,
            "fitted": result.fitted,
            "families": result.families,
            "error": result.calibration.fit.error if result.calibration.fit else "",
            "out": str(out) if out else None,
        }
        console.print_json(json.dumps(payload))
        return
    _print_table(result, part.name, out)


def _print_table(result, accelerator: str, out: Path | None) -> None:
    from rich.table import Table

    table = Table(title=f"simtrain calibrate: {accelerator}", title_justify="left")
    for column in ("family", "kernels", "measured", "before", "after", "mean |err|"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for name, row in result.families.items():
        for side in ("fit", "held_out"):
            count = int(row.get(f"{side}_count", 0))
            if not count:
                continue
            table.add_row(
                f"{name} ({side.replace('_', ' ')})",
                f"{count:,}",
                f"{row[f'{side}_measured_s'] * 1e3:.3f} ms",
                f"{row[f'{side}_before_s'] * 1e3:.3f} ms",
                f"{row[f'{side}_after_s'] * 1e3:.3f} ms",
                f"{row[f'{side}_mean_abs_error']:.1%}",
            )
    console.print(table)
    fitted = ", ".join(f"{k} = {v:.4g}" for k, v in result.fitted.items())
    console.print(f"fitted: {fitted}")
    if out is not None:
        console.print(f"wrote {out} (use it as cluster.calibration: {out})")
