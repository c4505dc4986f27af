import pytest

from simtrain.catalog import ACCELERATORS, LINKS, get_accelerator, get_link
from simtrain.errors import SpecError


def test_unknown_accelerator_lists_known_ones():
    with pytest.raises(SpecError) as err:
        get_accelerator("V100")
    message = str(err.value)
    assert "'cluster.accelerator' must be a known accelerator (got 'V100'" in message
    for name in ("A100-80GB", "H100-SXM", "MI250X", "TPUv4", "B200"):
        assert name in message


def test_lookup_is_case_insensitive():
    assert get_accelerator("h100-sxm").name == "H100-SXM"
    assert get_link("IB_NDR").name == "ib-ndr"


@pytest.mark.parametrize(
    ("name", "bf16_tflops", "hbm_tb_per_s"),
    [  # docs/references/hardware.md §7.1, dense
        ("A100-80GB", 312, 2.039),
        ("H100-SXM", 989.4, 3.35),
        ("B200", 2250, 8.0),
        ("MI300X", 1307.4, 5.3),
        ("TPUv4", 275, 1.2),
        ("MI250X", 383 / 2, 3.2 / 2),  # one GCD
    ],
)
def test_published_peaks(name, bf16_tflops, hbm_tb_per_s):
    acc = get_accelerator(name)
    assert acc.peak_flops["bf16"] == pytest.approx(bf16_tflops * 1e12)
    assert acc.hbm_bandwidth_bytes_per_s == pytest.approx(hbm_tb_per_s * 1e12)


def test_every_entry_has_a_source_and_known_links():
    for acc in ACCELERATORS.values():
        assert acc.source
        assert acc.scale_up_link in LINKS and acc.scale_out_link in LINKS
    for link in LINKS.values():
        assert link.source
        assert 0 < link.efficiency <= 1


def test_measured_effective_bandwidths():
    # docs/references/collectives.md §6.1 and §6.2: NVLink3 ring ≈230 GB/s, NVLink4 ≈370,
    # HDR ≈24 per NIC, NDR ≈47.
    assert get_link("nvlink3").effective_bandwidth_bytes_per_s == pytest.approx(230e9)
    assert get_link("nvlink4").effective_bandwidth_bytes_per_s == pytest.approx(370e9)
    assert get_link("ib-hdr").effective_bandwidth_bytes_per_s == pytest.approx(24e9)
    assert 46e9 <= get_link("ib-ndr").effective_bandwidth_bytes_per_s <= 49e9
