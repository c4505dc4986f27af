"""The per-shape GEMM model, fused attention by family, and compute under contention."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtrain.catalog import get_accelerator
from simtrain.compute import RooflineComputeModel, calibration_for
from simtrain.compute.attention_kernels import attention_efficiency, executed_fraction
from simtrain.compute.gemm import gemm_efficiency, gemm_time_s
from simtrain.errors import SpecError
from simtrain.workload.primitives import gemm

A100 = get_accelerator("A100-80GB")
H100 = get_accelerator("H100-SXM")
dims = st.integers(1, 32768)


def tflops(model: RooflineComputeModel, m: int, n: int, k: int) -> float:
    op = gemm("g", "fwd", m, n, k, 2, 0)
    return op.flops / model.op_time_s(op) / 1e12


@settings(max_examples=200, deadline=None)
@given(m=dims, n=dims, k=dims)
def test_gemm_never_beats_the_measured_ceiling(m, n, k):
    cal = calibration_for("A100-80GB").gemm
    assert 0 < gemm_efficiency(cal, "fp16", 108, m, n, k) <= cal.ceiling["fp16"] + 1e-12


@settings(max_examples=100, deadline=None)
@given(m=dims, n=dims, k=dims, factor=st.integers(2, 8))
def test_more_work_of_the_same_shape_family_never_takes_less_time(m, n, k, factor):
    model = RooflineComputeModel(H100, "bf16")
    small = model.op_time_s(gemm("g", "fwd", m, n, k, 2, 0))
    assert model.op_time_s(gemm("g", "fwd", m, n, k * factor, 2, 0)) >= small * (1 - 1e-9)


def test_big_gemms_reach_more_than_seventy_percent_and_small_ones_far_less():
    # Kernel benchmarks: A100 FP16 cuBLASLt 253.7 TF/s at 8192^3, 119.4 at 1024^3
    # (docs/references/kernels.md §GEMM). Short benchmarks: no sustained-load derating. The
    # large shape is fitted within a few percent; k_half is refitted end to end, which costs
    # the smallest shape some accuracy.
    burst = calibration_for("A100-80GB").model_copy(update={"sustained_compute_fraction": 1.0})
    model = RooflineComputeModel(A100, "fp16", burst)
    assert tflops(model, 8192, 8192, 8192) == pytest.approx(253.7, rel=0.05)
    assert tflops(model, 1024, 1024, 1024) == pytest.approx(119.4, rel=0.15)
    assert tflops(model, 8192, 8192, 8192) / 312 > 0.70


def test_wave_quantisation_penalises_one_tile_too_many():
    cal = calibration_for("A100-80GB").gemm.model_copy(
        update={"tile_shapes": [(256, 128)], "max_split_k": 1}
    )
    full = gemm_efficiency(cal, "fp16", 108, 256 * 54, 128 * 2, 4096)  # 108 tiles: one wave
    spill = gemm_efficiency(cal, "fp16", 108, 256 * 55, 128 * 2, 4096)  # 110 tiles: two waves
    assert spill / full == pytest.approx((110 / 216) / (108 / 108) * (55 * 256) / (55 * 256))


def test_split_k_fills_the_device_for_short_deep_gemms():
    cal = calibration_for("A100-80GB").gemm
    no_split = cal.model_copy(update={"max_split_k": 1})
    args = ("fp16", 108, 312e12, 1.6e12, 1024, 1024, 65536, 1, 2.0 * (1024 * 65536 * 2 + 1024**2))
    assert gemm_time_s(cal, *args) < gemm_time_s(no_split, *args)


def test_causal_attention_executes_half_plus_the_diagonal():
    assert executed_fraction(False, 4096) == 1.0
    assert executed_fraction(True, 4096) == pytest.approx(0.5 + 0.5 / 32)


@given(s=st.integers(128, 65536), d=st.sampled_from([64, 96, 128]))
def test_attention_efficiency_grows_with_sequence_and_stays_below_its_asymptote(s, d):
    cal = calibration_for("H100-SXM").attention["flash3"]
    shorter = attention_efficiency(cal, False, True, s, s, d, 4096, 132)
    longer = attention_efficiency(cal, False, True, 2 * s, 2 * s, d, 4096, 132)
    assert shorter <= longer <= max(cal.forward.values())


def test_flashattention3_is_faster_than_flashattention2_on_h100():
    op_args = dict(kind="attention", phase="fwd", causal=True, m=8192, n=8192, k=128, batch=32)
    from simtrain.workload.ops import Op

    op = Op(name="flash_attention", flops=4.0 * 32 * 8192**2 * 128, **op_args)
    fa2 = RooflineComputeModel(H100, "bf16", attention_kernel="flash").op_time_s(op)
    fa3 = RooflineComputeModel(H100, "bf16", attention_kernel="flash3").op_time_s(op)
    # FA-3 forward, causal, d128, 8k: 602 TF/s vs FA-2 333 (docs/references/kernels.md)
    assert fa2 / fa3 == pytest.approx(602 / 333, rel=0.1)


def test_an_attention_family_the_part_lacks_is_a_clear_error():
    with pytest.raises(SpecError, match=r"attention_kernel.*flash3"):
        RooflineComputeModel(A100, "bf16", attention_kernel="flash3")


def test_contended_gemm_runs_on_the_sms_the_collective_leaves():
    model = RooflineComputeModel(A100, "bf16")  # Ampere: tiles spread over the free SMs
    op = gemm("g", "fwd", 16384, 16384, 8192, 2, 0)
    free, contended = model.op_time_s(op), model.op_time_s(op, reserved_sms=16)
    # Many waves: time scales with the SMs left, 108 / 92.
    assert contended / free == pytest.approx(108 / 92, rel=0.05)
    memory_bound = gemm("m", "fwd", 802816, 192, 768, 2, 0)
    assert math.isfinite(model.op_time_s(memory_bound, reserved_sms=16))


def test_a_persistent_gemm_next_to_a_collective_runs_its_displaced_ctas_in_a_second_round():
    # H100's GEMMs are persistent: 132 CTAs, 24 of them wait while NCCL holds 24 SMs; the
    # 132-block GEMM of the NVIDIA forum report ran about twice as long
    # (docs/references/kernels.md §Interference).
    model = RooflineComputeModel(H100, "bf16")
    op = gemm("g", "fwd", 16384, 16384, 8192, 2, 0)
    free, contended = model.op_time_s(op), model.op_time_s(op, reserved_sms=24)
    assert contended / free == pytest.approx(2.0, rel=0.02)
    # told the SMs the collective leaves (TransformerEngine's userbuffers), it spreads its
    # tiles over them instead, as a non-persistent kernel does
    targeted = model.op_time_s(replace(op, sm_target=True), reserved_sms=24)
    assert targeted / free == pytest.approx(132 / 108, rel=0.05)


@settings(max_examples=200, deadline=None)
@given(m=dims, n=dims, k=dims, reserved=st.integers(0, 66))
def test_a_persistent_launch_is_never_faster_than_spreading_the_tiles(m, n, k, reserved):
    cal = calibration_for("H100-SXM").gemm
    assert cal.persistent
    spread = cal.model_copy(update={"persistent": False})
    sms = 132 - reserved
    args = ("bf16", sms, 989e12 * sms / 132, 3e12, m, n, k, 1, 2.0 * (m * k + k * n + m * n))
    persistent = gemm_time_s(cal, *args, grid_sms=132)
    assert persistent >= gemm_time_s(spread, *args, grid_sms=132) * (1 - 1e-12)
    # with every SM free it is the same kernel; with at most half held, two rounds at most
    full = ("bf16", 132, 989e12, 3e12, m, n, k, 1, 2.0 * (m * k + k * n + m * n))
    whole_device = gemm_time_s(cal, *full, grid_sms=132)
    assert whole_device == gemm_time_s(spread, *full)
    assert persistent <= 2 * whole_device * (1 + 1e-12)


def test_host_issue_cost_depends_on_the_execution_mode():
    op = gemm("g", "fwd", 128, 128, 128, 2, 0)
    eager = RooflineComputeModel(A100, "fp16", execution_mode="eager").host_time_s([op] * 10)
    graphs = RooflineComputeModel(A100, "fp16", execution_mode="cuda_graphs").host_time_s([op] * 10)
    compiled = RooflineComputeModel(A100, "fp16", execution_mode="compiled").host_time_s([op] * 10)
    assert eager > graphs > compiled == 0


def test_backward_ops_cost_the_autograd_engine_issue_not_the_forward_python():
    eager = RooflineComputeModel(A100, "fp16", execution_mode="eager")
    host = eager.host
    assert host.backward_per_kernel_s is not None
    assert host.backward_per_kernel_s < host.per_kernel_s
    forward = gemm("g", "fwd", 128, 128, 128, 2, 0)
    recompute = gemm("g", "recompute", 128, 128, 128, 2, 0)
    grads = [gemm("g", phase, 128, 128, 128, 2, 0) for phase in ("bwd_input", "bwd_weight")]
    assert eager.host_time_s([forward, recompute]) == pytest.approx(2 * host.per_kernel_s)
    assert eager.host_time_s(grads) == pytest.approx(2 * host.backward_per_kernel_s)
    # unset, the backward costs what the forward does
    same = host.model_copy(update={"backward_per_kernel_s": None})
    eager.host = same
    assert eager.host_time_s(grads) == pytest.approx(2 * host.per_kernel_s)


def test_parts_without_measurements_inherit_or_assume_and_say_so():
    assert calibration_for("A100-40GB").provenance == "fitted"
    assert calibration_for("H200").provenance == "inherited"
    assert calibration_for("H200").gemm == calibration_for("H100-SXM").gemm
    assert calibration_for("TPUv4").provenance == "inherited"
    assert calibration_for("B200").provenance == "assumed"
    assumed = calibration_for("a part no calibration file names")
    assert assumed.provenance == "assumed" and "A100" in assumed.source


@pytest.mark.parametrize("m, n, k", [(8192, 12288, 4096), (4096, 4096, 8192), (1024, 1024, 1024)])
def test_split_accumulation_divides_the_compute_bound_fp8_gemm_speed(m, n, k):
    """An FP8 GEMM with split accumulation runs at the part's split_accumulator_speed of the
    fast-accumulation one (without the fixed per-kernel cost); BF16 parts leave it at 1."""
    model = RooflineComputeModel(H100, "fp8")
    fast = replace(gemm("g", "fwd", m, n, k, 1, 0, dtype="fp8"), phase="bwd_weight")
    split = replace(fast, split_accumulator=True)
    overhead = model.calibration.kernel_overhead_s
    speed = model.calibration.gemm.split_accumulator_speed
    assert 0.8 <= speed < 1.0  # 1 / 1.2 .. 1 / 1.1, pytorch/ao issue 2377
    ratio = (model.op_time_s(fast) - overhead) / (model.op_time_s(split) - overhead)
    assert ratio == pytest.approx(speed, rel=1e-9)
    assert calibration_for("A100-80GB").gemm.split_accumulator_speed == 1.0
