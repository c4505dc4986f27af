"""Resolve an experiment's framework-dependent defaults and check what the stack can run.

``training.framework`` names a profile (:mod:`simtrain.catalog.frameworks`). Before an
experiment is validated, every switch it leaves unset (None) gets the profile's value, so the
resolved spec (and every report, which embeds it) shows what was simulated. After validation
the experiment is checked against what the stack implements (ZeRO stages, pipeline schedules,
dtypes, attention kernels): a setting the stack cannot take is a one-line error.

The profiles are catalog data; this module imports the catalog lazily so that the specs layer
keeps no import-time dependency on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from simtrain.specs.framework import DEFAULT_FRAMEWORK

if TYPE_CHECKING:
    from simtrain.specs.experiment import ExperimentSpec
    from simtrain.specs.framework import FrameworkProfile


def _profile(name: Any) -> FrameworkProfile | None:
    from simtrain.catalog.frameworks import framework_names, get_framework

    if not isinstance(name, str) or name not in framework_names():
        return None
    return get_framework(name)


def _get(section: Any, key: str, default: Any) -> Any:
    """``section[key]`` of a mapping or a spec, ``default`` when absent (or not a section)."""
    if isinstance(section, BaseModel):
        return getattr(section, key, default)
    if isinstance(section, dict):
        return section.get(key, default)
    return default


def _fill(section: Any, defaults: dict[str, Any]) -> Any:
    """``section`` (a mapping or a spec) with its None/missing keys set from ``defaults``."""
    if isinstance(section, BaseModel):
        unset = {k: v for k, v in defaults.items() if getattr(section, k, None) is None}
        return section.model_copy(update=unset) if unset else section
    if isinstance(section, dict):
        return {**section, **{k: v for k, v in defaults.items() if section.get(k) is None}}
    return section  # field validation reports the real problem


def _bf16_optimizer(profile: FrameworkProfile, dtype: Any, zero_stage: Any, pp: Any) -> bool:
    """Whether the stack runs DeepSpeed's BF16_Optimizer (see :func:`uses_bf16_optimizer`)."""
    if not profile.bf16_optimizer_shards_states or dtype != "bf16":
        return False
    try:
        return int(zero_stage) == 0 or (int(zero_stage) == 1 and int(pp) > 1)
    except (TypeError, ValueError, OverflowError):
        return False  # field validation reports the real problem


def resolve_framework_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """Return ``data`` with the framework-dependent switches filled in.

    Examples:
        >>> out = resolve_framework_defaults(
        ...     {"training": {"framework": "megatron-lm-2021"}, "parallel": {"tp": 2}})
        >>> out["training"]["attention_kernel"], out["parallel"]["overlap_grad_reduce"]
        ('unfused', False)
    """
    training = data.get("training")
    if training is None:
        training = {}
    profile = _profile(_get(training, "framework", None) or DEFAULT_FRAMEWORK)
    if profile is None:
        return data
    parallel = data.get("parallel")
    zero_stage = _get(parallel, "zero_stage", 0)
    # Every stack overlaps ZeRO-3's reduce-scatters with the backward (FSDP always, DeepSpeed
    # with overlap_comm, which defaults to on for stage 3).
    overlap = profile.overlaps.dp_grad_reduce or zero_stage == 3
    resolved = dict(data)
    # BF16_Optimizer reduces the fp32 gradients it accumulates (uses_bf16_optimizer)
    bf16_optimizer = _bf16_optimizer(
        profile, _get(training, "dtype", "bf16"), zero_stage, _get(parallel, "pp", 1)
    )
    resolved["training"] = _fill(
        training,
        {
            "attention_kernel": profile.attention_kernel,
            "grad_reduce_dtype": "fp32" if bf16_optimizer else profile.grad_reduce_dtype,
            "execution_mode": profile.execution_mode,
        },
    )
    if parallel is not None:
        resolved["parallel"] = _fill(
            parallel,
            {
                "overlap_grad_reduce": overlap,
                "overlap_replica_grad_reduce": profile.overlaps.replica_grad_reduce,
                "grad_bucket_size_bytes": profile.grad_bucket_size_bytes,
                "overlap_param_gather": profile.overlaps.dp_param_gather,
                "tp_comm_overlap": _tp_comm_default(profile, parallel),
                "overlap_ep_comm": _pairs_microbatches(profile, parallel),
                "overlap_p2p_comm": profile.overlaps.pp_p2p,
            },
        )
    return resolved


def _tp_comm_default(profile: FrameworkProfile, parallel: Any) -> str:
    """The stack's TP overlap, or ``wgrad`` for a GEMM overlap that has nothing to pipeline.

    ``gemm`` pipelines sequence-parallel all-gathers and reduce-scatters; with tp > 1 and
    no sequence parallelism (all-reduces) it acts as ``wgrad``, which the resolved spec then
    says. An explicit ``gemm`` there is an error (:func:`framework_problems`).
    """
    mode = profile.overlaps.tp_comm
    try:
        no_sp = int(_get(parallel, "tp", 1)) > 1 and not _get(parallel, "sp", False)
    except (TypeError, ValueError, OverflowError):
        return mode  # field validation reports the real problem
    if mode == "gemm" and no_sp:
        return "wgrad" if "wgrad" in profile.tp_comm_overlaps else "none"
    return mode


def _pairs_microbatches(profile: FrameworkProfile, parallel: Any) -> bool:
    """Whether a forward and a backward of different microbatches run interleaved.

    DualPipe's forward-backward chunks overlap by construction (with pp > 1); otherwise the
    stack's expert-parallel overlap applies when there is expert parallelism to hide.
    """
    dualpipe = _get(parallel, "pipeline_schedule", "1f1b") == "dualpipe"
    pp, ep = _get(parallel, "pp", 1), _get(parallel, "ep", 1)
    try:
        return (dualpipe and int(pp) > 1) or (profile.overlaps.ep_dispatch and int(ep) > 1)
    except (TypeError, ValueError, OverflowError):
        return False  # field validation reports the real problem


def framework_problems(spec: ExperimentSpec) -> list[str]:
    """One message per setting the experiment's framework cannot run."""
    from simtrain.catalog.frameworks import framework_names, get_framework

    name = spec.training.framework
    if name not in framework_names():
        return [
            f"'training.framework' must be a known framework (got {name!r}; "
            f"known: {', '.join(framework_names())})"
        ]
    profile = get_framework(name)
    p, t = spec.parallel, spec.training
    problems = []

    def allowed(field: str, value: Any, valid: tuple[Any, ...]) -> None:
        if value not in valid:
            shown = ", ".join(str(v) for v in valid) or "none"
            what = f"one of {shown}" if len(valid) > 1 else shown
            problems.append(
                f"'{field}' must be {what} under training.framework={name} (got {value!r})"
            )

    allowed("parallel.zero_stage", p.zero_stage, profile.zero_stages)
    allowed("training.dtype", t.dtype, profile.dtypes)
    allowed("training.attention_kernel", t.attention_kernel, profile.attention_kernels)
    if p.tp > 1:
        allowed("parallel.tp_comm_overlap", p.tp_comm_overlap, profile.tp_comm_overlaps)
        if p.tp_comm_overlap == "gemm" and not p.sp:
            problems.append(
                f"'parallel.tp_comm_overlap' must be none or wgrad without sequence parallelism "
                f"(got 'gemm' with parallel.tp={p.tp}, parallel.sp=false): it pipelines the "
                "sequence-parallel all-gathers and reduce-scatters with their GEMMs; set "
                "parallel.sp=true"
            )
    if p.pp > 1:
        if not profile.pipeline_schedules:
            problems.append(
                f"'parallel.pp' must be 1 under training.framework={name} "
                f"(the stack has no pipeline parallelism; got {p.pp})"
            )
        else:
            allowed("parallel.pipeline_schedule", p.pipeline_schedule, profile.pipeline_schedules)
    return problems


def uses_bf16_optimizer(spec: ExperimentSpec) -> bool:
    """Whether the stack trains with DeepSpeed's BF16_Optimizer.

    DeepSpeed picks it for bf16 without ZeRO, and its pipeline engine reduces bf16 gradients
    only through it, so a pipelined bf16 run under ZeRO-1 uses it too (profile field
    ``bf16_optimizer_shards_states``; docs/references/frameworks.md §DeepSpeed BF16 optimizer
    and pipeline engine). It keeps fp32 master weights and optimizer states sharded over the
    data-parallel group (as ZeRO-1), accumulates every microbatch's bf16 gradients into a
    full-size fp32 copy, all-reduces that copy after the backward and all-gathers the updated
    16-bit parameters after the step.

    Examples:
        >>> from simtrain.specs.loader import load_experiment
        >>> spec = load_experiment("experiments/quickstart.yaml",
        ...     ["training.framework=deepspeed", "parallel.zero_stage=0"])
        >>> uses_bf16_optimizer(spec), spec.training.grad_reduce_dtype
        (True, 'fp32')
    """
    from simtrain.catalog.frameworks import get_framework

    p = spec.parallel
    profile = get_framework(spec.training.framework)
    return _bf16_optimizer(profile, spec.training.dtype, p.zero_stage, p.pp)


def all_reduces_grads(spec: ExperimentSpec) -> bool:
    """Whether each gradient bucket is all-reduced over the data-parallel group.

    So under ZeRO-0, and under DeepSpeed's BF16_Optimizer, which shards only the optimizer
    states (:func:`uses_bf16_optimizer`); otherwise buckets are reduce-scattered.
    """
    return spec.parallel.zero_stage == 0 or uses_bf16_optimizer(spec)


def effective_zero_stage(spec: ExperimentSpec) -> int:
    """The ZeRO stage the stack really runs.

    DeepSpeed's BF16_Optimizer shards the fp32 optimizer states like ZeRO-1 when bf16 runs
    without ZeRO (:func:`uses_bf16_optimizer`).

    Examples:
        >>> from simtrain.specs.loader import load_experiment
        >>> spec = load_experiment("experiments/quickstart.yaml",
        ...     ["training.framework=deepspeed", "parallel.zero_stage=0"])
        >>> effective_zero_stage(spec)
        1
    """
    stage = spec.parallel.zero_stage
    return 1 if stage == 0 and uses_bf16_optimizer(spec) else stage


def compiles_loss(spec: ExperimentSpec) -> bool:
    """Whether the experiment's loss runs compiled.

    It does under ``execution_mode: compiled`` when the stack compiles its loss with the
    blocks (profile ``compiles_loss``).
    """
    from simtrain.catalog.frameworks import get_framework

    return (
        spec.training.execution_mode == "compiled"
        and get_framework(spec.training.framework).compiles_loss
    )
