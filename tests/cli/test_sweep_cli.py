"""simtrain sweep / plan: resume after SIGINT and SIGKILL, JSON keys, one-line errors."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from simtrain.cli.app import run_app
from tests.sweep.helpers import TINY_BASE, tiny_sweep, write_sweep

SIMTRAIN = [sys.executable, "-c", "from simtrain.cli import main; main()"]
TINY_MODEL = TINY_BASE["model"]


def run(capsys, *argv):
    code = run_app([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# ---- resume after an interrupted and a killed driver -------------------------------------


def slow_sweep(folder: Path) -> Path:
    """48 configurations of a model big enough that one worker needs several seconds (about
    0.15 s each on this project's 2-core machine), so a loaded machine's stall cannot let the
    sweep finish between reaching a row count and the signal."""
    base = {**TINY_BASE, "model": {**TINY_MODEL, "num_layers": 32, "hidden_size": 1024}}
    data = tiny_sweep(
        base={**base, "parallel": {"global_batch_size": 64}},
        axes={
            "parallel.tp": [1, 2, 4, 8],
            "parallel.pp": [1, 2, 4],
            "parallel.zero_stage": [1, 3],
            "parallel.recompute": ["none", "full"],
        },
    )
    path = folder / "slow.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def stored(store: Path) -> int:
    if not store.exists():
        return 0
    with sqlite3.connect(store) as db:
        try:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        except sqlite3.OperationalError:  # table not created yet
            return 0


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start(sweep: Path, store: Path, *extra: str) -> subprocess.Popen:
    """The exhaustive sweep (every configuration simulated and stored) in a child process.

    Its output goes to ``<store>.<n>.out`` / ``.err`` files.
    """
    argv = [*SIMTRAIN, "sweep", str(sweep), "--store", str(store), "--workers", "1",
            "--exhaustive", *extra]  # fmt: skip
    n = len(list(store.parent.glob("*.out")))
    with open(f"{store}.{n}.out", "w") as out, open(f"{store}.{n}.err", "w") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
    proc.out_path, proc.err_path = Path(out.name), Path(err.name)
    return proc


def output(proc: subprocess.Popen) -> tuple[str, str]:
    return proc.out_path.read_text(), proc.err_path.read_text()


def interrupt_after(proc: subprocess.Popen, store: Path, rows: int, sig: int) -> int:
    """Send ``sig`` to the driver once the store holds ``rows`` rows; return rows then."""
    deadline = time.monotonic() + 120
    while stored(store) < rows:
        assert proc.poll() is None, "the sweep finished before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    workers = children(proc.pid)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    proc.send_signal(sig)
    proc.wait(timeout=60)
    # the workers stop too: terminated by the driver (SIGINT) or on their own (SIGKILL)
    give_up = time.monotonic() + 10
    while any(alive(w) for w in workers) and time.monotonic() < give_up:
        time.sleep(0.1)
    left = [w for w in workers if alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, "workers outlived their driver"
    return stored(store)


def test_sigint_then_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path):
    sweep = slow_sweep(tmp_path)
    store = tmp_path / "store.sqlite"

    first = start(sweep, store)
    after_int = interrupt_after(first, store, 5, signal.SIGINT)
    assert first.returncode == 130
    message = one_line_error(output(first)[1])
    assert "interrupted" in message and "--resume" in message

    second = start(sweep, store, "--resume")
    after_kill = interrupt_after(second, store, after_int + 5, signal.SIGKILL)
    assert second.returncode == -signal.SIGKILL
    assert after_kill >= after_int + 5

    third = start(sweep, store, "--resume", "--out", str(tmp_path / "resumed.csv"))
    assert third.wait(timeout=300) == 0, output(third)[1]
    assert "found in the store" in output(third)[0]

    clean = start(sweep, tmp_path / "clean.sqlite", "--out", str(tmp_path / "clean.csv"))
    assert clean.wait(timeout=300) == 0, output(clean)[1]

    resumed = pd.read_csv(tmp_path / "resumed.csv").drop(columns="wall_time_s")
    expected = pd.read_csv(tmp_path / "clean.csv").drop(columns="wall_time_s")
    pd.testing.assert_frame_equal(resumed, expected)
    simulated = resumed[resumed.status.isin(["ok", "oom", "error"])]
    assert simulated["key"].is_unique  # no duplicates
    assert stored(store) == len(simulated) > after_kill  # no losses
    assert (resumed.status == "ok").sum() > 0


# ---- output ------------------------------------------------------------------------------


def test_json_rows_have_the_swept_fields_and_the_issue_keys(capsys, tmp_path):
    path = write_sweep(tmp_path)
    code, out, err = run(
        capsys, "sweep", path, "--store", tmp_path / "s.sqlite", "--workers", "1", "--json",
        "--out", tmp_path / "rows.csv",
    )  # fmt: skip
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 12
    assert all(
        list(r) == ["parallel.tp", "parallel.pp", "parallel.micro_batch_size",
                    "step_time_s", "mfu", "fits", "status"]
        for r in rows
    )  # fmt: skip
    assert {r["status"] for r in rows} == {"ok", "invalid"}
    assert "12 configurations: 5 pruned without simulating (5 invalid" in err
    assert "7 simulated" in err
    assert len(pd.read_csv(tmp_path / "rows.csv")) == 12


@pytest.mark.needs_extra("parquet")
def test_out_parquet_writes_every_row(capsys, tmp_path):
    path = write_sweep(tmp_path)
    code, _, err = run(
        capsys, "sweep", path, "--store", tmp_path / "s.sqlite", "--workers", "1",
        "--out", tmp_path / "rows.parquet",
    )  # fmt: skip
    assert code == 0, err
    assert len(pd.read_parquet(tmp_path / "rows.parquet")) == 12


def test_table_output_ranks_the_top_configurations(capsys, tmp_path):
    path = write_sweep(tmp_path)
    code, out, _ = run(
        capsys, "sweep", path, "--store", tmp_path / "s.sqlite", "--workers", "1", "--top", "3",
        "--plot", tmp_path / "front.png",
    )  # fmt: skip
    assert code == 0
    assert "top 3 of tiny by tokens_per_s" in out
    assert (tmp_path / "front.png").exists()


def test_plan_json_has_the_issue_keys(capsys, tmp_path):
    model = tmp_path / "tiny-model.yaml"
    model.write_text(yaml.safe_dump({"model": TINY_MODEL}))
    code, out, err = run(
        capsys, "plan", "--model", model, "--tokens", "1e9", "--deadline-days", "1",
        "--accelerator", "H100-SXM", "--batch-tokens", "8192", "--workers", "1", "--json",
    )  # fmt: skip
    assert code == 0, err
    plan = json.loads(out)
    assert list(plan)[:4] == ["num_gpus", "parallel", "days", "cost_usd"]
    assert plan["num_gpus"] == 1 and plan["parallel"]["tp"] == 1  # a toy: one GPU will do
    assert 0 < plan["days"] < 1 and plan["cost_usd"] > 0
    assert plan["simulated"] and plan["search"]["estimated"] > plan["search"]["simulated"] >= 1


def test_plan_searches_the_frameworks_asked_for(capsys, tmp_path):
    model = tmp_path / "tiny-model.yaml"
    model.write_text(yaml.safe_dump({"model": TINY_MODEL}))
    argv = ["plan", "--model", model, "--tokens", "1e9", "--deadline-days", "1", "--accelerator",
            "H100-SXM", "--batch-tokens", "8192", "--workers", "1", "--json"]  # fmt: skip
    code, out, err = run(capsys, *argv, "--frameworks", "megatron-core, pytorch-fsdp2")
    assert code == 0, err
    both = json.loads(out)
    assert both["framework"] in ("megatron-core", "pytorch-fsdp2")
    code, out, err = run(capsys, *argv, "--frameworks", "pytorch-fsdp2")
    assert code == 0, err
    one = json.loads(out)
    assert one["framework"] == "pytorch-fsdp2"
    # two stacks: about twice the layouts of one (FSDP refuses ZeRO-1 and -2)
    assert both["search"]["enumerated"] == 2 * one["search"]["enumerated"]
    code, _, err = run(capsys, *argv, "--frameworks", "megatron-9")
    assert code == 2 and "'--frameworks' must be a known framework" in one_line_error(err)
    code, _, err = run(capsys, *argv, "--frameworks", " , ")
    assert code == 2 and "'--frameworks' must name a profile or all" in one_line_error(err)


# ---- bad input: one line, non-zero exit --------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"axes": {"parallel.tpp": [1, 2]}}, "'axes.parallel.tpp' names an unknown"),
        ({"axes": {}}, "the sweep is empty"),
        ({"axes": {"parallel.tp": []}}, "'axes.parallel.tp' must have at least one value"),
        ({"constraints": ["parallel.tp <"]}, "'constraints.0' must be an expression"),
        ({"metric": "speed"}, "'metric' must be 'tokens_per_s'"),
    ],
)
def test_bad_sweeps_fail_on_one_line(capsys, tmp_path, changes, expected):
    path = write_sweep(tmp_path, **changes)
    code, _, err = run(capsys, "sweep", path, "--store", tmp_path / "s.sqlite")
    assert code == 2
    assert expected in one_line_error(err)


@pytest.mark.needs_extra("ray")
@pytest.mark.parametrize("address", ["127.0.0.1:9", "ray://127.0.0.1:9", "nonsense"])
def test_unreachable_ray_address_fails_on_one_line(capsys, tmp_path, address):
    path = write_sweep(tmp_path)
    code, _, err = run(
        capsys, "sweep", path, "--store", tmp_path / "s.sqlite", "--executor", "ray",
        "--address", address,
    )  # fmt: skip
    assert code == 2
    assert "'--address' must" in one_line_error(err)


def test_unknown_executor_and_model_fail_on_one_line(capsys, tmp_path):
    code, _, err = run(
        capsys,
        "sweep",
        write_sweep(tmp_path),
        "--store",
        tmp_path / "s.sqlite",
        "--executor",
        "slurm",
    )
    assert code == 2 and "'--executor' must be one of local, ray" in one_line_error(err)
    code, _, err = run(
        capsys, "plan", "--model", "llama9", "--tokens", "1e12", "--deadline-days", "9",
        "--accelerator", "H100-SXM",
    )  # fmt: skip
    assert code == 2 and "'--model' must name a preset" in one_line_error(err)
