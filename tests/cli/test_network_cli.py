import json

import pytest

from simtrain.cli.app import run_app


def run(capsys, *argv):
    code = run_app(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, needle):
    assert code != 0
    assert err.startswith("error: ") and needle in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_collective_json_has_the_documented_keys_and_busbw(capsys):
    code, out, _ = run(
        capsys,
        "collective",
        "--topology",
        "dgx-a100-superpod",
        "--op",
        "all_reduce",
        "--ranks",
        "8",
        "--algo",
        "ring",
        "--sizes",
        "1G",
        "--json",
    )
    assert code == 0
    rows = json.loads(out)
    keys = {"size_bytes", "time_s", "algbw_gbps", "busbw_gbps", "algo", "protocol"}
    assert [set(r) for r in rows] == [keys]
    row = rows[0]
    assert row["size_bytes"] == 2**30 and row["algo"] == "ring" and row["protocol"] == "simple"
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 7 / 8)
    assert row["busbw_gbps"] == pytest.approx(230, rel=0.10)


def test_collective_table_lists_every_size(capsys):
    code, out, _ = run(
        capsys,
        "collective",
        "--topology",
        "dgx-h100-superpod",
        "--op",
        "all_gather",
        "--ranks",
        "16",
        "--sizes",
        "1M:8M",
    )
    assert code == 0
    for size in ("1 MiB", "2 MiB", "4 MiB", "8 MiB"):
        assert size in out


def test_topology_command_prints_bisection(capsys):
    code, out, _ = run(capsys, "topology", "rail-only-h100")
    assert code == 0
    assert "bisection" in out and "24.06 TB/s" in out


def test_topology_png_draws_a_small_cluster(capsys, tmp_path):
    cfg = tmp_path / "small.yaml"
    cfg.write_text(
        "cluster:\n  accelerator: H100-SXM\n  num_gpus: 32\n"
        "  topology: {kind: fat_tree, switch_radix: 8}\n"
    )
    png = tmp_path / "small.png"
    code, _, _ = run(capsys, "topology", str(cfg), "--png", str(png))
    assert code == 0 and png.stat().st_size > 1000


def test_group_larger_than_topology(capsys):
    code, _, err = run(capsys, "collective", "--topology", "dgx-h100-superpod", "--ranks", "5000")
    assert_one_line_error(code, err, "'--ranks' must be between 1 and the topology's 1024 devices")


def test_nvls_over_pcie(capsys, tmp_path):
    cfg = tmp_path / "pcie.yaml"
    cfg.write_text("cluster:\n  accelerator: H100-SXM\n  num_gpus: 8\n  scale_up_link: pcie5\n")
    code, _, err = run(
        capsys, "collective", "--topology", str(cfg), "--algo", "nvls", "--ranks", "8"
    )
    assert_one_line_error(code, err, "nvls needs NVSwitches")


def test_unknown_preset_lists_the_presets(capsys):
    code, _, err = run(capsys, "topology", "dgx-z100")
    assert_one_line_error(code, err, "presets: dgx-a100-superpod")


def test_unknown_topology_kind(capsys, tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "cluster:\n  accelerator: H100-SXM\n  num_gpus: 8\n  topology: {kind: hypercube}\n"
    )
    code, _, err = run(capsys, "topology", str(cfg))
    assert_one_line_error(code, err, "'topology.kind'")


def test_unknown_algorithm(capsys):
    code, _, err = run(capsys, "collective", "--topology", "dgx-h100-superpod", "--algo", "magic")
    assert_one_line_error(code, err, "valid: auto, direct")


def test_bad_sizes(capsys):
    code, _, err = run(capsys, "collective", "--topology", "dgx-h100-superpod", "--sizes", "4G:1M")
    assert_one_line_error(code, err, "'--sizes'")


def test_topology_png_draws_a_large_preset_and_a_bad_path_fails_before_the_table(capsys, tmp_path):
    png = tmp_path / "superpod.png"
    code, out, err = run(capsys, "topology", "dgx-h100-superpod", "--png", str(png))
    assert code == 0 and png.stat().st_size > 10_000 and err == ""
    assert "spine switches" in out and f"wrote {png}" in out
    code, out, err = run(capsys, "topology", "dgx-h100-superpod", "--png", "/nonexistent/x.png")
    assert code == 2 and out == "" and err.startswith("error: ") and len(err.splitlines()) == 1


@pytest.mark.parametrize("network", ["nccl", "flow"])
def test_collective_json_protocol_matches_the_table(capsys, network):
    argv = ["collective", "--topology", "dgx-a100-superpod", "--ranks", "8", "--sizes", "4K:16M"]
    code, out, _ = run(capsys, *argv, "--network", network, "--json")
    assert code == 0
    rows = json.loads(out)
    assert rows[0]["protocol"] == "ll" and rows[-1]["protocol"] in ("ll128", "simple")
    code, table, _ = run(capsys, *argv, "--network", network)
    assert code == 0 and f"({network} model)" in table
    lines = [line for line in table.splitlines() if "KiB" in line or "MiB" in line]
    assert [line.split()[-2] for line in lines] == [r["protocol"] for r in rows]


def test_collective_unknown_network_is_a_one_line_error(capsys):
    code, _, err = run(capsys, "collective", "--topology", "dgx-a100-superpod", "--network", "x")
    assert_one_line_error(code, err, "'--network' must be one of nccl, flow")
