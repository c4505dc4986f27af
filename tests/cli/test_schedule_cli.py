import json

import pytest

from simtrain.cli import run_app


def run_json(capsys, *args: str) -> dict:
    assert run_app(["schedule", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_reports_closed_form_bubble_and_peaks(capsys):
    report = run_json(capsys, "--schedule", "1f1b", "--pp", "4", "--microbatches", "8")
    assert report["bubble_fraction"] == pytest.approx(3 / 11)
    assert report["step_time"] == pytest.approx(33.0)
    assert report["peak_inflight_microbatches"] == [4, 3, 2, 1]


def test_interleaved_and_zero_bubble_from_the_command_line(capsys):
    inter = run_json(
        capsys, "--schedule", "interleaved", "--pp", "4", "--microbatches", "8", "--vpp", "2"
    )
    assert inter["bubble_fraction"] == pytest.approx(3 / 19)
    zb = run_json(capsys, "--schedule", "zb-h2", "--pp", "4", "--microbatches", "8")
    assert zb["peak_inflight_microbatches"][0] == 7
    dual = run_json(capsys, "--schedule", "dualpipe", "--pp", "4", "--microbatches", "8")
    assert max(dual["peak_inflight_microbatches"]) == 5


def test_stage_times_change_the_step(capsys):
    report = run_json(
        capsys, "--schedule", "gpipe", "--pp", "2", "--microbatches", "2",
        "--t-f", "1", "--t-b", "3", "--t-p2p", "0.5",
    )  # fmt: skip
    # (m+p-1)(t_f+t_b) = 12, plus one crossing each way on the critical path
    assert report["step_time"] == pytest.approx(13.0)


def test_table_and_gantt_chart(capsys, tmp_path):
    out = tmp_path / "gantt.png"
    args = ["--schedule", "zb-h1", "--pp", "3", "--microbatches", "4", "--grid"]
    assert run_app(["schedule", *args, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "peak in-flight" in text and "step  rank0 rank1 rank2" in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--schedule", "interleaved", "--pp", "4", "--microbatches", "6", "--vpp", "2"],
            "error: '--microbatches' must be a multiple of '--pp'=4",
        ),
        (["--schedule", "pipedream", "--pp", "4", "--microbatches", "8"], "error: '--schedule'"),
        (["--schedule", "1f1b", "--pp", "0", "--microbatches", "8"], "error: '--pp' must be"),
        (
            ["--schedule", "1f1b", "--pp", "2", "--microbatches", "4", "--t-w", "3"],
            "error: '--t-w' must be at most '--t-b'",
        ),
    ],
)
def test_bad_input_is_one_line_without_traceback(capsys, args, message):
    assert run_app(["schedule", *args]) != 0
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
