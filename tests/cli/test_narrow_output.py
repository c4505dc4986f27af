"""Every command's table at 80 and at 200 columns: no name a user types and no number is cut.

Rich shrinks an over-wide table by eliding cells (``A100…``) or folding them mid-number;
``simtrain.report.fit`` drops decoration, folds the table into column groups or switches to a
plain layout instead. This renders each command's terminal output at both widths and checks
that no cell was elided, every line fits, every catalog name shows whole, and every number of
the wide rendering also appears whole in the narrow one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from simtrain.catalog import ACCELERATORS, LINKS
from simtrain.cli.app import console, run_app
from simtrain.paths import data_dir
from simtrain.report.fit import fit_table, plain_text
from tests.sweep.helpers import TINY_BASE, write_sweep

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
KINETO = ROOT / "tests" / "trace" / "fixtures" / "kineto"
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?")

NAMES = sorted(
    {*ACCELERATORS, *LINKS}
    | {p.name for folder in ("workloads", "topologies") for p in data_dir(folder).glob("*.yaml")}
)


def _reliability_experiment(folder: Path) -> Path:
    path = folder / "rel.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": str(QUICKSTART),
                "reliability": {"failure_preset": "llama3-405b", "horizon_days": 5, "num_runs": 2},
            }
        )
    )
    return path


def _validation_dir(folder: Path) -> Path:
    cases = folder / "cases"
    cases.mkdir()
    (cases / "case.yaml").write_text(
        f"extends: {QUICKSTART}\nname: case\n"
        # a wide tolerance: this test is about rendering, not about the model's numbers
        "expected: {metric: step_time_s, value: 4.4, tolerance: 0.9, source: test}\n"
    )
    return cases


def _tiny_model(folder: Path) -> Path:
    path = folder / "tiny-model.yaml"
    path.write_text(yaml.safe_dump({"model": TINY_BASE["model"]}))
    return path


COMMANDS = {
    "list accelerators": lambda tmp: ["list", "accelerators"],
    "list links": lambda tmp: ["list", "links"],
    "list frameworks": lambda tmp: ["list", "frameworks"],
    "list workloads": lambda tmp: ["list", "workloads"],
    "list topologies": lambda tmp: ["list", "topologies"],
    "run": lambda tmp: ["run", QUICKSTART],
    "validate": lambda tmp: ["validate", _validation_dir(tmp)],
    "topology": lambda tmp: ["topology", "dgx-h100-superpod"],
    "collective": lambda tmp: [
        "collective",
        "--topology",
        "dgx-h100-superpod",
        "--op",
        "all_reduce",
        "--ranks",
        "64",
        "--algo",
        "auto",
        "--sizes",
        "1M:64M",
    ],
    "schedule": lambda tmp: [
        "schedule",
        "--schedule",
        "interleaved",
        "--pp",
        "4",
        "--vpp",
        "2",
        "--microbatches",
        "8",
    ],
    "reliability": lambda tmp: ["reliability", _reliability_experiment(tmp), "--runs", "2"],
    "replay": lambda tmp: [
        "replay",
        KINETO,
        "--topology",
        "dgx-h100-superpod",
        "--accelerator",
        "H100-SXM",
    ],
    "sweep": lambda tmp: [
        "sweep",
        write_sweep(tmp),
        "--store",
        "s.sqlite",  # relative: the test runs in tmp, so the store line stays short
        "--workers",
        "1",
        "--resume",
    ],
    "plan": lambda tmp: [
        "plan",
        "--model",
        _tiny_model(tmp),
        "--tokens",
        "1e9",
        "--deadline-days",
        "1",
        "--accelerator",
        "H100-SXM",
        "--batch-tokens",
        "8192",
        "--workers",
        "1",
    ],
}


def render(capsys, monkeypatch, argv: list, width: int) -> str:
    monkeypatch.setattr(console, "_width", width)
    code = run_app([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def numbers(text: str) -> set[str]:
    """Numbers in ``text``, leaving out wall-clock times (they differ between two runs)."""
    return set(NUMBER.findall(re.sub(r"[\d.]+ s(?=\s|$)", "", text)))


def names_in(text: str) -> set[str]:
    return {n for n in NAMES if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", text)}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_tables_keep_names_and_numbers_whole_at_80_and_200_columns(
    capsys, monkeypatch, tmp_path, command
):
    monkeypatch.chdir(tmp_path)
    argv = COMMANDS[command](tmp_path)
    wide = render(capsys, monkeypatch, argv, 200)
    narrow = render(capsys, monkeypatch, argv, 80)
    for text, width in ((wide, 200), (narrow, 80)):
        assert "…" not in text
        too_long = [line for line in text.splitlines() if len(line) > width]
        assert too_long == [], f"{command} at {width} columns"
    # Every name a user must type, and every number, shows whole at 80 columns as at 200.
    assert names_in(wide) <= names_in(narrow), command
    missing = numbers(wide) - numbers(narrow)
    assert missing == set(), f"{command}: numbers cut at 80 columns: {sorted(missing)}"


@pytest.mark.parametrize("what", ["accelerators", "links"])
def test_every_catalog_name_is_listed_whole_at_both_widths(capsys, monkeypatch, what):
    expected = set(ACCELERATORS if what == "accelerators" else LINKS)
    for width in (80, 200):
        out = render(capsys, monkeypatch, ["list", what], width)
        assert expected <= names_in(out), width


def test_fit_table_folds_wide_tables_and_falls_back_to_plain():
    from rich.console import Console
    from rich.table import Table

    table = Table(title="t")
    for name in ("name", *(f"column {i}" for i in range(12))):
        table.add_column(name)
    table.add_row("infinity-fabric-mi300x", *(f"{i * 1234567:,}" for i in range(12)))
    fitted = fit_table(table, Console(width=80))
    assert not isinstance(fitted, Table)  # folded into groups (a Group) or plain text
    text = plain_text(table, 40)
    assert "infinity-fabric-mi300x" in text and "13,580,237" in text
    assert all(len(line) <= 40 for line in text.splitlines())
