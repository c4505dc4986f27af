"""Ctrl-C during ``simtrain sweep`` and ``simtrain plan`` (issue 17).

A terminal's Ctrl-C signals the whole foreground process group: the driver and its worker
processes. Each test starts the command in a session of its own, waits until the store
holds a first simulation, sends SIGINT to the group, and checks: exit code 130, one
``error: interrupted`` line on stderr (no traceback, no leaked-semaphore warning from
multiprocessing's resource tracker, no worker left), the finished simulations kept in the
store, and a resumed run giving exactly the table (or plan) of an uninterrupted one.
"""

from __future__ import annotations

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

from tests.sweep.helpers import TINY_BASE, tiny_sweep

ROOT = Path(__file__).resolve().parents[2]
SIMTRAIN = [sys.executable, "-c", "from simtrain.__main__ import run; run()"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, whatever the working directory
MODEL = {**TINY_BASE["model"], "num_layers": 8, "hidden_size": 512}


def stored(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store) as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # being created
        return 0


def processes_in_group(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def interrupt(argv: list[str], store: Path, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``simtrain argv``; Ctrl-C its process group once the store holds a simulation."""
    proc = subprocess.Popen(
        [*SIMTRAIN, *argv], cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while stored(store) < 1:
        assert proc.poll() is None, f"finished before the interrupt: {proc.stderr.read()}"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    give_up = time.monotonic() + 10
    while processes_in_group(proc.pid) and time.monotonic() < give_up:
        time.sleep(0.1)
    left = processes_in_group(proc.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "workers outlived the interrupted driver"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def complete(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([*SIMTRAIN, *argv], cwd=cwd, env=ENV, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return done


def assert_clean_interrupt(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 130, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: interrupted"), done.stderr
    for noise in ("Traceback", "KeyboardInterrupt", "leaked", "resource_tracker"):
        assert noise not in done.stderr


@pytest.mark.slow
def test_ctrl_c_during_a_sweep_keeps_its_simulations_and_resumes_to_the_same_table(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    data = tiny_sweep(
        base={**TINY_BASE, "model": MODEL, "parallel": {"global_batch_size": 64}},
        axes={"parallel.tp": [1, 2, 4, 8], "parallel.pp": [1, 2, 4],
              "parallel.zero_stage": [1, 3], "parallel.recompute": ["none", "full"]},
    )  # fmt: skip
    sweep.write_text(yaml.safe_dump(data, sort_keys=False))
    argv = ["sweep", str(sweep), "--workers", "1", "--simulate-top", "8"]
    store = tmp_path / "store.sqlite"

    first = interrupt([*argv, "--store", str(store)], store, tmp_path)
    assert_clean_interrupt(first)
    assert "--resume" in first.stderr
    kept = stored(store)
    assert 1 <= kept < 8

    resumed = complete([*argv, "--store", str(store), "--resume", "--out", "resumed.csv"],
                       tmp_path)  # fmt: skip
    assert f"{kept} found in the store" in resumed.stdout
    complete([*argv, "--store", str(tmp_path / "clean.sqlite"), "--out", "clean.csv"], tmp_path)
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "resumed.csv").drop(columns="wall_time_s"),
        pd.read_csv(tmp_path / "clean.csv").drop(columns="wall_time_s"),
    )


@pytest.mark.slow
def test_ctrl_c_during_a_plan_keeps_its_simulations_and_resumes_to_the_same_plan(tmp_path):
    model = tmp_path / "model.yaml"
    model.write_text(yaml.safe_dump({"model": {**MODEL, "seq_length": 2048}}))
    argv = ["plan", "--model", str(model), "--tokens", "3e10", "--deadline-days", "1",
            "--accelerator", "H100-SXM", "--batch-tokens", "262144", "--workers", "1",
            "--no-failures", "--simulate-top", "4", "--json"]  # fmt: skip
    store = tmp_path / "plan.sqlite"

    first = interrupt([*argv, "--store", str(store)], store, tmp_path)
    assert_clean_interrupt(first)
    assert "--resume" in first.stderr

    resumed = json.loads(complete([*argv, "--store", str(store), "--resume"], tmp_path).stdout)
    clean = json.loads(complete([*argv, "--store", str(tmp_path / "c.sqlite")], tmp_path).stdout)
    assert resumed["search"]["from_store"] >= 1
    for plan in (resumed, clean):
        for key in ("search",):
            plan.pop(key)
    assert resumed == clean
