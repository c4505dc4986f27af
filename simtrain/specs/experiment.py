"""ExperimentSpec: one runnable experiment, with every cross-field rule in one place."""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import Field, model_validator

from simtrain.specs.base import MAX_DEVICES, Spec, bounded, divisors, must_divide
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.cost import CostSpec
from simtrain.specs.framework_resolve import framework_problems, resolve_framework_defaults
from simtrain.specs.mesh import apply_mesh
from simtrain.specs.model import ModelSpec
from simtrain.specs.parallel import ParallelSpec
from simtrain.specs.reliability import ReliabilitySpec
from simtrain.specs.training import ExpectedSpec, SimulationSpec, TrainingSpec


def _recompute_problems(spec: ExperimentSpec) -> list[str]:
    """Recompute modules only under selective recomputation, and only where the model has them."""
    m, p = spec.model, spec.parallel
    problems: list[str] = []
    if p.recompute_modules is not None and p.recompute != "selective":
        problems.append(
            f"parallel.recompute_modules={list(p.recompute_modules)} needs "
            f"parallel.recompute=selective (got {p.recompute!r})"
        )
    if p.recompute == "per_op" and (
        m.is_moe or m.mla is not None or m.block != "serial" or not m.is_gated
    ):
        problems.append(
            "parallel.recompute=per_op needs a dense, serial block with a gated MLP and "
            "no MLA (torchtitan's Llama; got "
            f"model.block={m.block!r}, activation={m.activation!r}, "
            f"num_experts={m.num_experts}, mla={'set' if m.mla is not None else 'none'})"
        )
    needs = {
        "mla_up_proj": (m.mla is not None, "multi-head latent attention (model.mla)"),
        "moe_act": (m.is_moe, "an MoE model (model.num_experts > 0)"),
        "moe": (m.is_moe, "an MoE model (model.num_experts > 0)"),
        "shared_experts": (
            m.is_moe and m.num_shared_experts > 0,
            "shared experts (model.num_shared_experts > 0)",
        ),
    }
    for module in sorted(p.selective_modules):
        present, what = needs.get(module, (True, ""))
        if not present:
            problems.append(f"parallel.recompute_modules: {module!r} needs {what}")
    if spec.training.activation_fp8_input_store and m.activation != "swiglu":
        problems.append(
            "training.activation_fp8_input_store=true needs model.activation=swiglu "
            f"(got {m.activation!r})"
        )
    return problems


def _expert_grid_problems(m: ModelSpec, p: ParallelSpec) -> list[str]:
    """MoE parallel folding: etp x ep x edp must re-split the tp x cp x dp ranks of a stage."""
    problems = []
    etp = p.expert_tp
    if p.tp > 1 and not p.sp and (p.ep > 1 or etp != p.tp):
        problems.append(
            f"parallel.sp must be true for an MoE model with parallel.tp={p.tp} and "
            f"parallel.ep={p.ep}, etp={etp} (experts run on sequence-parallel tokens, as "
            "Megatron-Core requires)"
        )
    if msg := must_divide("parallel.etp", etp, "model.moe_ffn_hidden_size", m.expert_ffn_size):
        problems.append(msg)
    if p.dp is None:
        return problems
    ranks = p.tp * p.cp * p.dp
    if ranks % (p.ep * etp):
        problems.append(
            f"parallel.ep*etp={p.ep}*{etp}={p.ep * etp} must divide parallel.tp*cp*dp="
            f"{ranks} (the experts' etp x ep x edp grid re-splits a stage's tp x cp x dp ranks)"
        )
    elif p.edp is not None and p.edp != ranks // (p.ep * etp):
        problems.append(
            f"parallel.edp={p.edp} must equal parallel.tp*cp*dp/(ep*etp)="
            f"{ranks // (p.ep * etp)} (or be left out)"
        )
    return problems


class ExperimentSpec(Spec):
    """A model trained with a parallel configuration on a cluster, plus modelling choices."""

    name: str = Field(default="experiment", max_length=200)
    """Short name shown in reports and validation tables (at most 200 characters)."""
    description: str = Field(default="", max_length=10_000)
    """Free text: what the experiment shows and where its numbers come from."""
    seed: int = bounded(0, ge=0, le=2**63 - 1, why="stored as a signed 64-bit integer")
    """Seed of every random choice in the simulation (same seed, same result)."""
    model: ModelSpec
    """The transformer being trained."""
    parallel: ParallelSpec
    """Parallel degrees and batch shape."""
    cluster: ClusterSpec
    """Accelerators and network."""
    training: TrainingSpec = TrainingSpec()
    """Numerics and run length."""
    simulation: SimulationSpec = SimulationSpec()
    """Modelling choices."""
    expected: ExpectedSpec | None = None
    """Published figure to validate against (``simtrain validate``)."""
    reliability: ReliabilitySpec | None = None
    """Failures and recovery over the whole run; omit to report one step only."""
    cost: CostSpec | None = None
    """Price, power and carbon assumptions; omit for the dated presets of the catalog."""

    @model_validator(mode="before")
    @classmethod
    def _derive_dp(cls, data: Any) -> Any:
        """Fill ``parallel.dp`` from the cluster size when the user leaves it out.

        A named mesh (``parallel.mesh``) sets tp, dp and the FSDP sharding first.
        """
        if not isinstance(data, dict):
            return data
        data = apply_mesh(data)
        par, clu = data.get("parallel"), data.get("cluster")
        if not (isinstance(par, dict) and isinstance(clu, dict)) or par.get("dp") is not None:
            return data
        try:
            num_gpus = int(clu["num_gpus"])
            mp = int(par.get("tp", 1)) * int(par.get("pp", 1)) * int(par.get("cp", 1))
        except (KeyError, TypeError, ValueError, OverflowError):
            return data  # field validation reports the real problem
        if mp > 0 and 0 < num_gpus <= MAX_DEVICES and num_gpus % mp == 0:
            return {**data, "parallel": {**par, "dp": num_gpus // mp}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _resolve_framework(cls, data: Any) -> Any:
        """Fill the switches left unset (None) from the framework profile.

        Downstream code then only sees resolved values; what the experiment sets wins. An
        unknown framework name is left to :meth:`_check_framework`, which reports it.
        """
        if not isinstance(data, dict):
            return data
        return resolve_framework_defaults(data)

    @model_validator(mode="after")
    def _check_cross_fields(self) -> ExperimentSpec:
        """Cross-field rules; every message names the fields, their values and what is valid."""
        m, p, c = self.model, self.parallel, self.cluster
        problems: list[str] = []

        def check(msg: str | None) -> None:
            if msg:
                problems.append(msg)

        check(must_divide("parallel.tp", p.tp, "model.num_heads", m.num_heads))
        if p.tp <= m.kv_heads:
            check(must_divide("parallel.tp", p.tp, "model.num_kv_heads", m.kv_heads))
        elif p.tp % m.kv_heads:
            problems.append(
                f"parallel.tp={p.tp} must be a multiple of model.num_kv_heads={m.kv_heads} "
                "when it exceeds it (kv heads are replicated)"
            )
        world = p.tp * p.pp * p.cp
        if p.dp is None:
            valid = ", ".join(str(d) for d in divisors(c.num_gpus))
            problems.append(
                f"parallel.tp*pp*cp={world} must divide cluster.num_gpus={c.num_gpus} "
                f"(products that do: {valid})"
            )
        elif world * p.dp != c.num_gpus:
            problems.append(
                f"parallel.dp*tp*pp*cp={p.dp}*{p.tp}*{p.pp}*{p.cp}={p.dp * world} must equal "
                f"cluster.num_gpus={c.num_gpus}"
            )
        if p.dp is not None and p.global_batch_size % (p.micro_batch_size * p.dp):
            problems.append(
                f"parallel.global_batch_size={p.global_batch_size} must be a multiple of "
                f"parallel.micro_batch_size*dp={p.micro_batch_size}*{p.dp}="
                f"{p.micro_batch_size * p.dp}"
            )
        if p.pp > m.num_layers:
            problems.append(f"parallel.pp={p.pp} must be at most model.num_layers={m.num_layers}")
        if p.vpp > 1:
            if p.pp * p.vpp > m.num_layers:
                problems.append(
                    f"parallel.pp*vpp={p.pp * p.vpp} must be at most "
                    f"model.num_layers={m.num_layers} (every model chunk needs a layer)"
                )
            if p.pipeline_schedule != "interleaved":
                problems.append(
                    f"parallel.vpp={p.vpp} needs parallel.pipeline_schedule=interleaved "
                    f"(got {p.pipeline_schedule})"
                )
            elif p.dp is not None and not problems and p.num_microbatches % p.pp:
                problems.append(
                    f"parallel.num_microbatches={p.num_microbatches} must be a multiple of "
                    f"parallel.pp={p.pp} for the interleaved schedule"
                )
        if p.pp > 1 and p.pipeline_schedule == "dualpipe" and p.dp is not None and not problems:
            microbatches = p.num_microbatches
            if p.pp % 2 or microbatches % 2 or microbatches < 2 * p.pp:
                problems.append(
                    f"parallel.pipeline_schedule=dualpipe needs an even parallel.pp (got {p.pp}) "
                    "and an even number of microbatches of at least "
                    f"2*pp={2 * p.pp} (got {microbatches})"
                )
        if p.zero_shard_group_size is not None and p.dp is not None:
            check(
                must_divide(
                    "parallel.zero_shard_group_size",
                    p.zero_shard_group_size,
                    "parallel.dp*cp",
                    p.dp * p.cp,
                )
            )
            if p.zero_stage == 0:
                warnings.warn(
                    "parallel.zero_shard_group_size has no effect with parallel.zero_stage=0",
                    UserWarning,
                    stacklevel=2,
                )
        if p.cp > 1:
            check(must_divide("parallel.cp*2", 2 * p.cp, "model.seq_length", m.seq_length))
            if m.sliding_window is not None and p.cp_algorithm == "ring":
                problems.append(
                    f"parallel.cp_algorithm=ring with parallel.cp={p.cp} cannot run "
                    f"model.sliding_window={m.sliding_window} (use all_gather or ulysses)"
                )
            if p.cp_algorithm == "ulysses":
                check(must_divide("parallel.cp", p.cp, "model.num_heads/tp", m.num_heads // p.tp))
        if p.ep > 1:
            if not m.is_moe:
                problems.append(f"parallel.ep={p.ep} needs an MoE model (model.num_experts > 0)")
            else:
                check(must_divide("parallel.ep", p.ep, "model.num_experts", m.num_experts))
        if m.is_moe:
            problems += _expert_grid_problems(m, p)
        elif p.etp is not None or p.edp is not None:
            problems.append(
                "parallel.etp and parallel.edp need an MoE model (model.num_experts > 0)"
            )
        shape, slices = c.topology.torus_shape, c.topology.num_slices
        chips = shape[0] * shape[1] * shape[2] * slices
        if c.topology.kind == "torus_3d" and chips != c.num_gpus:
            what = "x".join(map(str, shape)) + (f" x {slices} slices" if slices > 1 else "")
            problems.append(
                f"cluster.topology.torus_shape={what} must hold cluster.num_gpus={c.num_gpus} "
                f"chips (it holds {chips})"
            )
        problems += _recompute_problems(self)
        problems += framework_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        if p.recompute_layer_fraction < 1 and p.recompute != "full":
            warnings.warn(
                "parallel.recompute_layer_fraction has no effect unless parallel.recompute=full",
                UserWarning,
                stacklevel=2,
            )
        if p.sp and p.tp == 1:
            warnings.warn(
                "parallel.sp=true has no effect with parallel.tp=1", UserWarning, stacklevel=2
            )
        return self
