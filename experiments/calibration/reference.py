"""Where the published reference data (calibration input) lives on this machine.

The measured runs that calibration scripts read are not part of the repository; they sit in
a ``shared/reference`` folder beside a checkout (or any ancestor folder of it, so that git
worktrees find it too). ``SIMTRAIN_REFERENCE_DIR`` overrides the search.
"""

from __future__ import annotations

import os
from pathlib import Path


def reference_dir() -> Path:
    """The reference-data folder: ``$SIMTRAIN_REFERENCE_DIR`` or the nearest ``shared/reference``.

    Raises:
        FileNotFoundError: neither exists; the message says how to point at the data.
    """
    override = os.environ.get("SIMTRAIN_REFERENCE_DIR")
    if override:
        return Path(override)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "reference"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "no shared/reference folder above this checkout; set SIMTRAIN_REFERENCE_DIR to the "
        "folder holding vtrain-measured-runs.csv"
    )


def has_reference(name: str) -> bool:
    """Whether the reference file ``name`` is on this machine (tests skip without it)."""
    try:
        return (reference_dir() / name).is_file()
    except FileNotFoundError:
        return False
