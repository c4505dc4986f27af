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


def test_hpc_and_tpu_links():
    # networks.md §1: Slingshot-11 200 Gb/s, 23.82 GB/s per NIC measured (osu_bw on LUMI-G).
    assert get_link("slingshot-11").effective_bandwidth_bytes_per_s == pytest.approx(23.82e9)
    assert get_link("omni-path-100g").bandwidth_bytes_per_s == pytest.approx(12.5e9)
    # tpu.md §3: v5e hosts have 2 x 100 Gb/s of DCN; tpu.md §2: v5e ICI is 4 links of 50 GB/s.
    assert get_link("dcn-v5e").effective_bandwidth_bytes_per_s == pytest.approx(25e9)
    v5e = get_link("ici-v5e")
    assert (v5e.ports, v5e.effective_bandwidth_bytes_per_s / v5e.ports) == (4, 50e9)
    v4 = get_link("ici-v4")
    assert v4.effective_bandwidth_bytes_per_s / v4.ports == pytest.approx(44.8e9, rel=0.01)
    v5p = get_link("ici-v5p")
    assert v5p.effective_bandwidth_bytes_per_s / v5p.ports == pytest.approx(90e9)


def test_tpus_leave_their_slice_over_dcn():
    for name, dcn in (("TPUv4", "dcn-v4"), ("TPUv5e", "dcn-v5e"), ("TPUv5p", "dcn-v5p")):
        assert get_accelerator(name).scale_out_link == dcn
    assert get_accelerator("TPUv5e").peak_flops["bf16"] == pytest.approx(197e12)
