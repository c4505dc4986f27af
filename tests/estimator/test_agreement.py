"""The analytical estimator agrees with the discrete-event engine on step time (issue 17).

The estimator combines the engine's own pieces (chunk ops, compute model, network model) in
closed form; other developers keep teaching the engine new mechanisms, and this file is the
guard: every mismatch beyond 5 % fails, and each test prints the error distribution.
Random configurations are drawn (fixed seed) from a space of every parallel axis and
schedule over small models that simulate in milliseconds; the validation suites and a
sample of the 70B sweep run in the slow set.
"""

from __future__ import annotations

import statistics
import warnings
from pathlib import Path

import numpy as np
import pytest

from simtrain.api import simulate
from simtrain.errors import SpecError
from simtrain.estimator import Estimator
from simtrain.specs.loader import apply_overrides, experiment_from_dict, load_experiment
from simtrain.specs.sweep import load_sweep
from simtrain.sweep.enumerate import candidates
from tests.conftest import GPT_TINY, LLAMA_TINY, experiment_dict

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.05
MOE_TINY = {
    **LLAMA_TINY,
    "name": "moe-tiny",
    "num_layers": 8,
    "num_experts": 8,
    "moe_top_k": 2,
    "moe_ffn_hidden_size": 256,
}
SPACE: dict[str, list] = {
    "parallel.tp": [1, 2, 4, 8],
    "parallel.pp": [1, 2, 4],
    "parallel.cp": [1, 1, 2],
    "parallel.micro_batch_size": [1, 2],
    "parallel.zero_stage": [0, 1, 2, 3],
    "parallel.recompute": ["none", "selective", "full"],
    "parallel.sp": [True, False],
    "parallel.overlap_grad_reduce": [True, True, False],
    "parallel.grad_bucket_size_bytes": [160_000_000, 2_000_000],
    "schedule": [("1f1b", 1), ("interleaved", 2), ("gpipe", 1), ("zb-h1", 1), ("zb-h2", 1),
                 ("dualpipe", 1)],
    "parallel.zero_shard_group_size": [None, None, 8],
    "parallel.overlap_replica_grad_reduce": [None, False],
    "cluster.accelerator": ["H100-SXM", "H100-SXM", "A100-80GB"],
    "training.framework": ["megatron-core", "megatron-core", "deepspeed", "pytorch-fsdp2",
                           "torchtitan", "jax-xla", "nemo"],
    "simulation.network_model": ["nccl", "nccl", "alpha_beta"],
}  # fmt: skip
"""Values each random configuration draws from (repeats weight the draw)."""


def random_experiments(
    model: dict, count: int, seed: int, num_gpus: int = 64, batch: int = 64
) -> list:
    """``count`` valid experiments drawn from SPACE (invalid draws are redrawn)."""
    rng = np.random.default_rng(seed)
    specs = []
    while len(specs) < count:
        point = {k: v[rng.integers(len(v))] for k, v in SPACE.items()}
        schedule, vpp = point.pop("schedule")
        if vpp > 1 and point["parallel.pp"] == 1:
            continue  # no pipeline to interleave (the engine refuses it too)
        layers = model["num_layers"]
        if point["parallel.zero_shard_group_size"] is None:
            del point["parallel.zero_shard_group_size"]
        if point["parallel.overlap_replica_grad_reduce"] is None:
            del point["parallel.overlap_replica_grad_reduce"]
        if point["training.framework"] == "jax-xla" and point["cluster.accelerator"] != "H100-SXM":
            continue
        overrides = [f"{k}={v}" for k, v in point.items()]
        overrides += [f"parallel.pipeline_schedule={schedule}", f"parallel.vpp={vpp}"]
        if model.get("num_experts"):
            overrides.append(f"parallel.ep={[1, 2, 4][rng.integers(3)]}")
        data = experiment_dict(
            {**model, "num_layers": layers},
            parallel={"global_batch_size": batch},
            cluster={"num_gpus": num_gpus, "gpus_per_node": 8},
        )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a random draw may set sp with tp=1 ...
                specs.append(experiment_from_dict(apply_overrides(data, overrides)))
        except SpecError:
            continue
    return specs


def errors(specs) -> list[tuple[float, str]]:
    """Relative step-time error of the estimator against the engine, per spec."""
    estimator = Estimator()
    found = []
    for spec in specs:
        truth = simulate(spec).step_time_s
        guess = estimator.estimate(spec).step_time_s
        p = spec.parallel
        label = (
            f"tp{p.tp} pp{p.pp} v{p.vpp} cp{p.cp} ep{p.ep} dp{p.dp} z{p.zero_stage} "
            f"mbs{p.micro_batch_size} {p.recompute} {p.pipeline_schedule} sp={p.sp}"
        )
        found.append((guess / truth - 1.0, label))
    return found


def report(name: str, found: list[tuple[float, str]]) -> None:
    """Print the distribution of absolute errors (``pytest -s`` shows it)."""
    size = sorted(abs(e) for e, _ in found)
    p95 = size[min(len(size) - 1, int(0.95 * len(size)))]
    worst = max(found, key=lambda f: abs(f[0]))
    print(
        f"\n{name}: {len(found)} configurations, |error| median {statistics.median(size):.2e}, "
        f"p95 {p95:.2e}, max {worst[0]:+.2e} ({worst[1]})"
    )


def check(name: str, found: list[tuple[float, str]]) -> None:
    report(name, found)
    bad = [(f"{e:+.1%}", label) for e, label in found if abs(e) > TOLERANCE]
    assert not bad, bad


@pytest.mark.parametrize(
    ("name", "model", "seed"),
    [("gpt", {**GPT_TINY, "num_layers": 12}, 1), ("llama", {**LLAMA_TINY, "num_layers": 13}, 2),
     ("moe", MOE_TINY, 3)],
)  # fmt: skip
def test_random_configurations_agree(name, model, seed):
    check(f"random {name}", errors(random_experiments(model, 14, seed)))


def test_many_microbatches_agree():
    # The estimator extrapolates the step over the microbatch count past a few per stage.
    specs = random_experiments({**LLAMA_TINY, "num_layers": 8}, 10, seed=6, num_gpus=16,
                               batch=512)  # fmt: skip
    assert sum(s.parallel.num_microbatches >= 9 * s.parallel.pp for s in specs) >= 5
    check("many microbatches", errors(specs))


def test_fp8_agrees():
    specs = random_experiments({**LLAMA_TINY, "num_layers": 8}, 4, seed=7, num_gpus=16)
    fp8 = [s.model_copy(update={"training": s.training.model_copy(update={"dtype": "fp8"})})
           for s in specs if s.cluster.accelerator == "H100-SXM"]  # fmt: skip
    check("fp8", errors(fp8))


@pytest.mark.parametrize(
    "overrides",
    [["parallel.zero_stage=0"], ["parallel.zero_stage=1", "parallel.pp=4", "parallel.tp=2"],
     ["parallel.zero_stage=0", "parallel.pp=2", "cluster.accelerator=A100-80GB"]],
)  # fmt: skip
def test_deepspeed_bf16_optimizer_agrees(overrides):
    """Its per-microbatch fp32 accumulation and fp32 all-reduce, estimated as simulated."""
    data = experiment_dict(
        {**GPT_TINY, "num_layers": 8},
        parallel={"global_batch_size": 64},
        cluster={"num_gpus": 32, "gpus_per_node": 8},
        training={"framework": "deepspeed", "dtype": "bf16"},
    )
    spec = experiment_from_dict(apply_overrides(data, overrides))
    assert spec.training.grad_reduce_dtype == "fp32"  # BF16_Optimizer is on
    check("bf16 optimizer", errors([spec]))


@pytest.mark.parametrize("framework", ["torchtitan", "nemo"])
def test_tp_comm_gemm_agrees(framework):
    # torchtitan's async TP (copy-engine pulls that slow no compute, shard copies, sums of
    # partials, plain reduce-scatters of summed gradients) and NeMo's userbuffers.
    specs = random_experiments({**LLAMA_TINY, "num_layers": 8}, 6, seed=8, num_gpus=16)
    gemm = [
        s.model_copy(
            update={
                "training": s.training.model_copy(update={"framework": framework}),
                "parallel": s.parallel.model_copy(update={"tp_comm_overlap": "gemm"}),
            }
        )
        for s in specs
        if s.parallel.tp > 1 and s.parallel.sp
    ]
    assert gemm
    check(f"tp_comm_overlap gemm, {framework}", errors(gemm))


def test_flow_network_model_agrees():
    specs = random_experiments({**LLAMA_TINY, "num_layers": 8}, 3, seed=4, num_gpus=16)
    flow = [s.model_copy(update={"simulation": s.simulation.model_copy(
        update={"network_model": "flow"})}) for s in specs]  # fmt: skip
    check("flow network", errors(flow))


def test_fast_validation_cases_agree():
    folder = ROOT / "experiments" / "validation" / "megatron2021"
    specs = [load_experiment(folder / f"{case}.yaml") for case in ("gpt-1.7b", "gpt-3.6b")]
    check("megatron2021 (fast)", errors(specs))


@pytest.mark.slow
def test_validation_suites_agree():
    specs = [
        load_experiment(path)
        for suite in ("megatron2021", "llama3")
        for path in sorted((ROOT / "experiments" / "validation" / suite).glob("[!_]*.yaml"))
    ]
    check("validation suites", errors(specs))


@pytest.mark.slow
def test_random_sample_of_the_70b_sweep_agrees():
    sweep, base = load_sweep(ROOT / "experiments" / "sweeps" / "llama3-70b-1024.yaml")
    pending = [c.spec for c in candidates(sweep, base, "test") if c.status == "pending"]
    rng = np.random.default_rng(5)
    sample = [pending[i] for i in rng.choice(len(pending), size=24, replace=False)]
    check("llama3-70b-1024 sweep sample", errors(sample))


@pytest.mark.parametrize(("schedule", "vpp"), [("1f1b", 1), ("interleaved", 4)])
def test_blocking_pipeline_sends_hold_the_sender_in_the_estimate_too(schedule, vpp):
    # Without overlap_p2p_comm the sender's next action waits for its send to end (the
    # engine's blocking send); the estimate must wait too. Llama 3 8B with two layers per
    # chunk and stages on different nodes, so the transfers weigh; compiled, so that no host
    # synchronisation on the transfers (eager pipelines) already holds the sender.
    def both(overlap: bool) -> tuple[float, float]:
        spec = load_experiment(
            ROOT / "experiments" / "quickstart.yaml",
            [
                "cluster.num_gpus=32",
                "parallel.tp=4",
                "parallel.pp=4",
                f"parallel.vpp={vpp}",
                f"parallel.pipeline_schedule={schedule}",
                "parallel.global_batch_size=16",
                f"parallel.overlap_p2p_comm={overlap}",
                "training.execution_mode=compiled",
            ],
        )
        return Estimator().estimate(spec).step_time_s, simulate(spec).step_time_s

    blocking, truth = both(False)
    overlapped, faster_truth = both(True)
    engine_wait = truth - faster_truth
    assert engine_wait > 0  # the engine's sender waits
    # the estimate waits by about as much (the step's other small differences aside)
    assert blocking - overlapped == pytest.approx(engine_wait, rel=0.3)
    assert abs(blocking / truth - 1) <= TOLERANCE


def test_gradient_buckets_slow_compute_as_in_the_engine():
    # Hopper's persistent GEMMs run up to twice as long next to a collective. The gradient
    # buckets a backward issues (FSDP's per-layer reduce-scatter, every microbatch) slow the
    # compute tasks after them by the engine's rule, task by task (charged over each task's
    # own duration), not by the action's mean slowdown over the buckets' wall time, which
    # overcharged this layout by ~10 %.
    spec = load_experiment(
        ROOT / "experiments" / "quickstart.yaml",
        [
            "cluster.num_gpus=64",
            "parallel.tp=8",
            "parallel.zero_stage=3",
            "parallel.global_batch_size=128",
            "training.framework=pytorch-fsdp1",
        ],
    )
    check("per-layer gradient buckets on H100", errors([spec]))
