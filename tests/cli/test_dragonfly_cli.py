"""simtrain topology / collective on the dragonfly presets (Frontier, LUMI-G)."""

import json

import pytest

from simtrain.cli.app import run_app


def run(capsys, *argv):
    code = run_app(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_frontier_topology_shows_groups_global_links_and_bisection(capsys):
    code, out, _ = run(capsys, "topology", "topologies/frontier-mi250x.yaml")
    assert code == 0
    text = " ".join(out.split())
    assert "dragonfly" in text
    assert "74 used of 74, 128 nodes each" in text
    assert "4 per group pair, 10804 in all" in text
    # 37 x 37 group pairs x 4 links x 23.82 GB/s = 130.4 TB/s across the worst half cut
    assert "130.44 TB/s" in text


@pytest.mark.slow
def test_lumi_ring_all_reduce_matches_the_measured_busbw(capsys):
    code, out, _ = run(
        capsys,
        "collective",
        "--topology",
        "topologies/lumi-g.yaml",
        "--op",
        "all_reduce",
        "--ranks",
        "16",
        "--algo",
        "ring",
        "--sizes",
        "128M:512M",
        "--json",
    )
    assert code == 0
    busbw = {row["size_bytes"]: row["busbw_gbps"] for row in json.loads(out)}
    # networks.md §1.3: RCCL 85.00 GB/s at 128 MiB (fitted); torch 98.4 GB/s at 512 MB
    # (held out; 512 MiB is the nearest size on the doubling grid).
    assert busbw[2**27] == pytest.approx(85.0, rel=0.15)
    assert busbw[2**29] == pytest.approx(98.4, rel=0.15)


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        (
            "num_groups: 0",
            "'topology.num_groups' must be an integer in 1..4096 (got 0)",
        ),
        ("routing: adaptive", "'topology.routing' must be 'minimal', 'valiant' or 'ugal'"),
    ],
)
def test_bad_dragonfly_input_is_one_line_and_exit_2(capsys, tmp_path, override, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "cluster:\n  accelerator: MI250X\n  num_gpus: 16\n  nics_per_node: 4\n"
        f"  topology:\n    kind: dragonfly\n    {override}\n"
    )
    code, _, err = run(capsys, "topology", str(path))
    assert code == 2
    assert err.startswith("error: ") and needle in err
    assert len(err.strip().splitlines()) == 1
