"""The ``simtrain`` command line: thin wrappers that parse, call the public API and print.

Each subcommand lives in its own module and registers itself on the shared ``app``.
"""

from __future__ import annotations

import sys

from simtrain.cli import (
    commands_calibrate,  # noqa: F401
    commands_core,  # noqa: F401  (registers run, validate, trace, list)
    commands_network,  # noqa: F401
    commands_reliability,  # noqa: F401
    commands_replay,  # noqa: F401
    commands_schedule,  # noqa: F401
    commands_sweep,  # noqa: F401
)
from simtrain.cli.app import app, run_app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``simtrain`` console script."""
    sys.exit(run_app(sys.argv[1:]))
