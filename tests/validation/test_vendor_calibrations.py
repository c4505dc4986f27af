"""Vendor calibration files (MI250X, MI300X, TPU, B200) and the TPU checks they must pass.

The constants are fitted by experiments/calibration/fit_vendor.py and tpu_dcn.py on declared
splits; these tests pin what the files must say (provenance, measured ceilings, TPU collectives
off the matrix units) and the multi-slice decline the DCN latency was fitted for.
"""

from pathlib import Path

import pytest

from simtrain.api import load_experiment, simulate
from simtrain.compute import calibration_for

TPU = Path(__file__).parents[2] / "experiments" / "validation" / "tpu"


@pytest.mark.parametrize(
    ("part", "provenance"),
    [
        ("MI250X", "fitted"),
        ("TPUv5e", "fitted"),
        ("TPUv5p", "fitted"),
        ("MI300X", "inherited"),
        ("TPUv4", "inherited"),
        ("B200", "assumed"),
    ],
)
def test_each_vendor_part_says_how_far_to_trust_it(part, provenance):
    cal = calibration_for(part)
    assert cal.provenance == provenance
    assert part in cal.accelerators
    if provenance == "fitted":
        assert cal.fit is not None and cal.fit.held_out_rows and "held out" in cal.fit.error


def test_mi250x_gemm_ceiling_is_the_measured_maximum_achievable_matmul():
    # 147.0 of 191.5 TF/s BF16 per GCD (docs/references/amd.md §3)
    assert calibration_for("MI250X").gemm.ceiling["bf16"] == pytest.approx(147.0 / 191.5, abs=1e-4)


@pytest.mark.parametrize("part", ["TPUv4", "TPUv5e", "TPUv5p"])
def test_tpu_collectives_take_no_matrix_units_and_compiled_code_no_host_time(part):
    cal = calibration_for(part)
    assert cal.collective_sms == 0
    assert cal.gemm.tile_shapes == ((128, 128),)
    assert cal.host["compiled"].per_kernel_s == 0


@pytest.mark.parametrize("model", ["16b", "32b", "64b", "128b"])
def test_v5e_multislice_mfu_decline_within_3_points_at_every_slice_count(model):
    """MaxText on 1 to 32 v5e-256 slices (docs/references/tpu.md §5): the MFU lost to DCN.

    Issue 14's acceptance: the decline from one slice within 3 MFU points at 2, 4, 8, 16 and
    32 slices, on the fit series (16B, 64B) and the held-out ones (32B, 128B) alike.
    """
    mfu = {}
    for slices in (1, 2, 4, 8, 16, 32):
        spec = load_experiment(TPU / f"v5e-{model}-x{slices}.yaml")
        mfu[slices] = (simulate(spec).summary()["mfu"], spec.expected.value)
    for slices in (2, 4, 8, 16, 32):
        simulated = 100 * (mfu[1][0] - mfu[slices][0])
        measured = 100 * (mfu[1][1] - mfu[slices][1])
        assert simulated > 0
        assert abs(simulated - measured) <= 3.0, (slices, simulated, measured)
