"""Framework profiles: data files with a source per field, defaults resolved into the spec,
and one-line errors for a framework or setting the stack cannot take."""

import re

import pytest

from simtrain.api import simulate
from simtrain.catalog.frameworks import framework_names, get_framework
from simtrain.cli.app import run_app
from simtrain.errors import SpecError
from simtrain.memory import estimate_memory
from simtrain.parallel.builder import build_program
from simtrain.specs.framework import DEFAULT_FRAMEWORK, profile_field_names
from simtrain.specs.framework_resolve import uses_bf16_optimizer
from simtrain.workload.counts import count_parameters
from tests.conftest import ROOT, make_experiment

QUICKSTART = str(ROOT / "experiments" / "quickstart.yaml")
STACKS = {"megatron-lm-2021", "megatron-core", "nemo", "deepspeed", "pytorch-fsdp1"}
STACKS |= {"pytorch-fsdp2", "torchtitan", "torchtitan-2025", "jax-xla", "llm-foundry"}


def test_every_stack_has_a_profile_with_a_source_for_every_field():
    assert set(framework_names()) >= STACKS
    for name in framework_names():
        profile = get_framework(name)
        assert profile.name == name
        for field in profile_field_names():
            source = profile.sources[field]
            assert source.provenance in ("documented", "fitted", "assumed")
            if source.provenance == "documented":
                assert "docs/references/frameworks.md §" in source.source, (name, field)


def test_documented_sections_exist_in_the_reference_file():
    text = (ROOT / "docs" / "references" / "frameworks.md").read_text()
    headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("##")}
    for name in framework_names():
        for field, source in get_framework(name).sources.items():
            if "frameworks.md §" not in source.source:
                continue
            section = re.split(r" \(|\)|;", source.source.split("§", 1)[1])[0].strip()
            assert section in headings, (name, field, section)


def test_unknown_framework_lists_the_known_ones():
    with pytest.raises(SpecError, match=r"known: .*megatron-lm-2021"):
        get_framework("megatron-1999")
    with pytest.raises(SpecError, match=r"'training\.framework' must be a known framework"):
        make_experiment("training.framework=megatron-1999")


def test_unset_switches_come_from_the_profile_and_an_experiment_may_override():
    default = make_experiment()
    assert default.training.framework == DEFAULT_FRAMEWORK
    assert default.training.attention_kernel == "flash"
    assert default.parallel.overlap_grad_reduce is True
    assert default.parallel.grad_bucket_size_bytes == 160_000_000
    old = make_experiment("training.framework=megatron-lm-2021", "training.dtype=fp16")
    assert old.training.attention_kernel == "unfused"
    assert old.training.grad_reduce_dtype == "fp16"
    assert old.parallel.overlap_grad_reduce is False
    assert old.training.execution_mode == "eager"
    torch_ddp = make_experiment(
        "training.framework=megatron-lm-2021", "parallel.overlap_grad_reduce=true"
    )
    assert torch_ddp.parallel.overlap_grad_reduce is True
    assert make_experiment("training.framework=jax-xla").training.execution_mode == "compiled"
    # ZeRO-3 overlaps its reduce-scatters under every stack (DeepSpeed's overlap_comm default)
    z3 = make_experiment("training.framework=deepspeed", "parallel.zero_stage=3")
    assert z3.parallel.overlap_grad_reduce is True


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (["training.framework=megatron-lm-2021", "parallel.zero_stage=3"], "parallel.zero_stage"),
        (
            ["training.framework=megatron-lm-2021", "training.attention_kernel=flash"],
            "training.attention_kernel",
        ),
        (
            [
                "training.framework=deepspeed",
                "cluster.num_gpus=16",
                "parallel.pp=2",
                "parallel.pipeline_schedule=interleaved",
                "parallel.vpp=2",
            ],
            "parallel.pipeline_schedule",
        ),
        (["training.framework=pytorch-fsdp1", "parallel.pp=2"], "parallel.pp"),
        (
            ["training.framework=torchtitan-2025", "parallel.tp_comm_overlap=wgrad"],
            "parallel.tp_comm_overlap",
        ),
        (
            [
                "training.framework=llm-foundry",
                "parallel.zero_stage=3",
                "parallel.tp_comm_overlap=gemm",
            ],
            "parallel.tp_comm_overlap",
        ),
        (
            [
                "training.framework=megatron-lm-2021",
                "training.dtype=fp16",
                "parallel.zero_stage=0",
                "parallel.tp_comm_overlap=gemm",
            ],
            "parallel.tp_comm_overlap",
        ),
    ],
)
def test_a_setting_the_stack_cannot_take_is_one_line_exit_2(capsys, overrides, field):
    argv = ["run", QUICKSTART]
    for item in overrides:
        argv += ["--set", item]
    code = run_app(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert f"'{field}' must be" in err and "training.framework=" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_tp_comm_default_is_one_the_stack_implements_and_gemm_needs_sequence_parallelism():
    for name in framework_names():
        profile = get_framework(name)
        assert profile.overlaps.tp_comm in profile.tp_comm_overlaps, name
    # NeMo's default GEMM overlap pipelines sequence-parallel collectives: without SP
    # (all-reduces) the resolved spec says what runs, the input-gradient overlap
    nemo = ("training.framework=nemo", "parallel.tp=2")
    assert make_experiment(*nemo, "parallel.sp=true").parallel.tp_comm_overlap == "gemm"
    assert make_experiment(*nemo, "parallel.sp=false").parallel.tp_comm_overlap == "wgrad"
    with pytest.raises(SpecError, match=r"'parallel\.tp_comm_overlap' must be none or wgrad"):
        make_experiment("parallel.tp=2", "parallel.tp_comm_overlap=gemm")
    # at tp = 1 there is no TP communication: every mode is accepted
    make_experiment("training.framework=llm-foundry", "parallel.tp=1", "parallel.sp=false",
                    "parallel.zero_stage=3", "parallel.tp_comm_overlap=gemm")  # fmt: skip


def test_unknown_framework_on_the_cli_is_one_line_exit_2(capsys):
    code = run_app(["run", QUICKSTART, "--set", "training.framework=nope"])
    err = capsys.readouterr().err
    assert code == 2 and "known: " in err and "torchtitan" in err


def test_pipeline_scatter_gather_divides_transfers_by_tp():
    base = ["cluster.num_gpus=16", "parallel.tp=2", "parallel.pp=2", "parallel.global_batch_size=8"]

    def p2p_bytes(framework):
        program = build_program(make_experiment(*base, f"training.framework={framework}"))
        return {op.comm_bytes for t in program.tasks for op in t.ops if op.kind == "p2p"}

    (scattered,) = p2p_bytes("megatron-core")
    (whole,) = p2p_bytes("deepspeed")
    assert whole == 2 * scattered


def test_deepspeed_bf16_optimizer_shards_states_without_zero():
    common = ["parallel.zero_stage=0", "training.dtype=bf16"]
    plain = estimate_memory(make_experiment(*common), 80e9)
    ds = estimate_memory(make_experiment(*common, "training.framework=deepspeed"), 80e9)
    assert ds.optimizer_bytes == pytest.approx(plain.optimizer_bytes / 16)
    assert ds.weights_bytes == plain.weights_bytes


BF16_OPTIMIZER = ["training.framework=deepspeed", "training.dtype=bf16"]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["parallel.zero_stage=0"], True),  # bf16 without ZeRO
        (["parallel.zero_stage=1", "parallel.pp=2", "parallel.global_batch_size=8"], True),
        (["parallel.zero_stage=1"], False),  # ZeRO-1's own optimizer without a pipeline
        (["parallel.zero_stage=0", "training.dtype=fp16"], False),  # FP16_Optimizer
        (["parallel.zero_stage=0", "training.framework=megatron-core"], False),
    ],
)
def test_bf16_optimizer_is_deepspeeds_bf16_without_zero_or_with_a_pipeline(overrides, expected):
    spec = make_experiment(*BF16_OPTIMIZER, *overrides)
    assert uses_bf16_optimizer(spec) is expected
    profile_default = get_framework(spec.training.framework).grad_reduce_dtype
    assert spec.training.grad_reduce_dtype == ("fp32" if expected else profile_default)


def _grad_accumulations(program):
    return [op for t in program.tasks if t.rank == 0 for op in t.ops
            if op.name == "fp32_grad_accumulation"]  # fmt: skip


def test_bf16_optimizer_accumulates_fp32_gradients_every_microbatch_and_all_reduces_them():
    """Per microbatch, 18 bytes per local weight (update_hp_grads); after the backward, one
    fp32 all-reduce of every local weight over the data-parallel group (its conservation:
    the bucket sizes add up to 4 bytes per weight); fp16 does neither."""
    spec = make_experiment(*BF16_OPTIMIZER, "parallel.zero_stage=0")
    program = build_program(spec)
    reductions = [t for t in program.tasks if t.rank == 0 and t.category == "dp_comm"]
    assert {op.comm for t in reductions for op in t.ops} == {"all_reduce", "all_gather"}
    reduced = sum(op.comm_bytes for t in reductions for op in t.ops if op.comm == "all_reduce")
    elements = reduced / 4  # the weights the reducer holds (norm weights aside)
    assert elements == pytest.approx(count_parameters(spec.model).total, rel=0.01)
    accumulations = _grad_accumulations(program)
    assert len(accumulations) == spec.parallel.num_microbatches
    assert all(op.bytes_accessed == pytest.approx(18 * elements) for op in accumulations)
    fp16 = build_program(make_experiment(*BF16_OPTIMIZER, "parallel.zero_stage=0",
                                         "training.dtype=fp16"))  # fmt: skip
    assert not _grad_accumulations(fp16)
    slower = simulate(spec).step_time_s
    assert slower > simulate(make_experiment(*BF16_OPTIMIZER, "parallel.zero_stage=1")).step_time_s


def test_bf16_optimizer_keeps_full_fp32_gradients_in_memory():
    spec = make_experiment(*BF16_OPTIMIZER, "parallel.zero_stage=0")
    breakdown = estimate_memory(spec, 80e9).breakdown_bytes
    elements = count_parameters(spec.model).total
    assert breakdown["gradients.unsharded_accumulation"] == pytest.approx(4 * elements)
    zero1 = estimate_memory(make_experiment(*BF16_OPTIMIZER, "parallel.zero_stage=1"), 80e9)
    assert "gradients.unsharded_accumulation" not in zero1.breakdown_bytes


def test_list_frameworks_shows_every_profile_and_its_sources(capsys):
    assert run_app(["list", "frameworks"]) == 0
    out = capsys.readouterr().out
    for name in framework_names():
        assert f"{name}: every field and its source" in out
    assert "documented:" in out and "sharding.prefetch_bytes" in out


def test_list_frameworks_name_shows_that_profile_alone(capsys):
    assert run_app(["list", "frameworks", "torchtitan-2025"]) == 0
    out = capsys.readouterr().out
    assert "torchtitan-2025: every field and its source" in out and "tp_comm_overlaps" in out
    assert not any(f"{n}: every field" in out for n in framework_names() if n != "torchtitan-2025")
    for argv, needle in (
        (["list", "frameworks", "titan"], "'NAME' must be a known framework"),
        (["list", "accelerators", "H100-SXM"], "'NAME' must be left out with accelerators"),
    ):
        assert run_app(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1
