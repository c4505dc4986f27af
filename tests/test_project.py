"""Project-level contracts: the public API, and README's test command in CI."""

import re
from pathlib import Path

import simtrain

ROOT = Path(__file__).resolve().parents[1]


def test_public_api_is_pinned():
    assert sorted(simtrain.__all__) == sorted(
        [
            "ClusterSpec",
            "ExpectedSpec",
            "ExperimentSpec",
            "ModelSpec",
            "ParallelSpec",
            "ReliabilitySpec",
            "SimulationSpec",
            "SweepSpec",
            "TopologySpec",
            "TrainingSpec",
            "load_experiment",
            "plan",
            "simtrain_version",
            "simulate",
            "sweep",
        ]
    )
    for name in simtrain.__all__:
        assert hasattr(simtrain, name)


def test_ci_runs_readme_test_command_verbatim():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.+?)\n```", quickstart)
    assert len(commands) == 2, "README's Quickstart must have exactly two commands"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci
    assert "simtrain run experiments/quickstart.yaml" in commands[0]


def test_readme_commands_table_lists_every_flag():
    import typer.main

    from simtrain.cli import app

    readme = (ROOT / "README.md").read_text()
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^\| `simtrain ([a-z]+)[^\n]*$", readme, flags=re.MULTILINE)
    }
    group = typer.main.get_command(app)
    missing = {}
    for name, command in group.commands.items():
        assert name in rows, f"README's Commands table has no row for simtrain {name}"
        flags = {opt for param in command.params for opt in param.opts if opt.startswith("--")}
        if absent := sorted(f for f in flags if f not in rows[name]):
            missing[name] = absent
    assert missing == {}


def test_ci_also_runs_the_tests_that_need_optional_extras():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install --quiet -e '.[dev]' && pytest -m 'needs_extra and not slow'" in ci
    pyproject = (ROOT / "pyproject.toml").read_text()
    for extra in ("test", "ray", "parquet", "chakra", "notebooks", "perfetto", "dev"):
        assert f"\n{extra} = [" in pyproject
