"""Fast start (issue 17): light commands never import the heavy libraries or the engine.

Each check runs the command line in a fresh interpreter (the only way to see what a
command imports) and lists the heavy modules left in ``sys.modules`` afterwards. Other
developers add commands and imports all the time; this test is the guard.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "matplotlib", "networkx", "simpy", "simtrain.engine")
"""Never needed to print help or the catalog."""
HELP_EXTRA = ("numpy", "pydantic")
"""Not needed for help either: ``simtrain --help`` has a 0.3 s budget."""

PROBE = """
import contextlib, io, json, sys
argv, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["simtrain", *argv]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        from simtrain.cli import main
        main()
    except SystemExit:
        pass
print(json.dumps(sorted(set(sys.modules) & set(heavy))))
"""


def imported_after(argv: list[str], heavy: tuple[str, ...] = HEAVY) -> set[str]:
    """Which of ``heavy`` are loaded after running ``simtrain argv``."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(heavy)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--help"],
        ["plan", "--help"],
        ["list", "accelerators"],
        ["list", "topologies"],
    ],
)
def test_light_commands_import_nothing_heavy(argv):
    assert imported_after(argv) == set()


def test_help_imports_neither_numpy_nor_pydantic():
    assert imported_after(["--help"], HEAVY + HELP_EXTRA) == set()


def test_the_probe_sees_heavy_imports():
    # The guard must be able to fail: a command that simulates does load the engine.
    loaded = imported_after(["schedule", "--schedule", "1f1b", "--pp", "2", "--microbatches", "2"])
    assert {"simpy", "simtrain.engine"} <= loaded


def test_importing_simtrain_is_free():
    code = "import sys, simtrain; print(sorted(m for m in sys.modules if m.startswith('simtrain')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert json.loads(out.stdout.replace("'", '"')) == ["simtrain", "simtrain.sweep"]
