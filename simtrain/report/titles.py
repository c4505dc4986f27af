"""Titles generated from the resolved spec, so they stay true after ``--set``.

An experiment file's ``description`` describes the file as written; after
``--set parallel.pp=4`` it describes something else. Report headings and figure titles are
therefore built from what was simulated: the model, the parallel layout and the cluster.

Examples:
    >>> from typing import Any

from simtrain.specs.experiment import ExperimentSpec
    >>> spec = ExperimentSpec.model_validate({
    ...     "model": {"name": "m", "num_layers": 4, "hidden_size": 256, "num_heads": 8,
    ...               "vocab_size": 1000, "seq_length": 512},
    ...     "parallel": {"tp": 2, "sp": True, "pp": 2, "global_batch_size": 8,
    ...                  "zero_stage": 1},
    ...     "cluster": {"accelerator": "H100-SXM", "num_gpus": 16}})
    >>> layout_title(spec)
    'TP2 (SP) × PP2 (1f1b, 2 microbatches) × DP4, ZeRO-1'
    >>> config_title(spec)
    'm: TP2 (SP) × PP2 (1f1b, 2 microbatches) × DP4, ZeRO-1 on 16 × H100-SXM'
"""

from __future__ import annotations

from typing import Any

from simtrain.specs.experiment import ExperimentSpec


def layout_title(spec: ExperimentSpec) -> str:
    """The parallel layout in Megatron's words: degrees above 1, ZeRO stage, recomputation."""
    p = spec.parallel
    parts = [f"TP{p.tp}" + (" (SP)" if p.sp and p.tp > 1 else "")]
    if p.pp > 1:
        vpp = f", v={p.vpp}" if p.vpp > 1 else ""
        parts.append(f"PP{p.pp} ({p.pipeline_schedule}{vpp}, {p.num_microbatches} microbatches)")
    if p.cp > 1:
        parts.append(f"CP{p.cp}")
    parts.append(f"DP{p.dp}")
    if p.ep > 1:
        parts.append(f"EP{p.ep}")
    extras = []
    if p.zero_stage:
        extras.append(f"ZeRO-{p.zero_stage}")
    if p.recompute != "none":
        modules = p.recompute_modules
        named = f" ({', '.join(modules)})" if p.recompute == "selective" and modules else ""
        extras.append(f"{p.recompute} recompute{named}")
    return " × ".join(parts) + "".join(f", {extra}" for extra in extras)


def config_title(spec: ExperimentSpec) -> str:
    """Model, layout and cluster in one line, e.g. for a figure title or a report heading."""
    cluster = spec.cluster
    return (
        f"{spec.model.name}: {layout_title(spec)} on {cluster.num_gpus:,} × {cluster.accelerator}"
    )


def spec_title(spec_data: dict[str, Any]) -> str:
    """:func:`config_title` of a resolved spec as stored in ``report.json`` (plain data)."""
    return config_title(ExperimentSpec.model_validate(spec_data))
