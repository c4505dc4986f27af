"""Where simtrain's data folders (workloads/, topologies/, experiments/) live."""

from __future__ import annotations

from pathlib import Path

from simtrain.errors import SpecError

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def data_dir(name: str) -> Path:
    """The top-level data folder ``name`` of a source checkout (editable install)."""
    path = PROJECT_ROOT / name
    if not path.is_dir():
        raise SpecError(
            f"data folder '{name}/' not found next to the package ({PROJECT_ROOT}); "
            "install simtrain from a source checkout with 'pip install -e .'"
        )
    return path
