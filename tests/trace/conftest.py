"""Fixtures of the trace import/replay tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trace.helpers import QUICKSTART, SMALL_3D, cli


@pytest.fixture
def chakra_dir(tmp_path, capsys) -> Path:
    """The small TP×DP×PP experiment exported with ``--format chakra``."""
    out = tmp_path / "chakra"
    code, _, err = cli(
        capsys, "trace", QUICKSTART, *SMALL_3D, "--format", "chakra", "--out", str(out)
    )
    assert code == 0, err
    return out
