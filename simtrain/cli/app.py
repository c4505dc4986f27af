"""The typer application shared by all ``simtrain`` subcommands, and its error boundary."""

from __future__ import annotations

import functools
import sys
import warnings
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from simtrain.errors import SimtrainError

if TYPE_CHECKING:
    from rich.table import Table

COMMAND_ORDER = (
    "run",
    "validate",
    "trace",
    "replay",
    "calibrate",
    "list",
    "schedule",
    "topology",
    "collective",
    "reliability",
    "sweep",
    "plan",
)
"""The order ``simtrain --help`` lists the subcommands in: README's "Commands" table, one
step of a study after another (registration order is the modules' import order)."""


class _Commands(typer.core.TyperGroup):
    """The subcommands in :data:`COMMAND_ORDER`, any other after them by name."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
        return sorted(names, key=lambda name: (rank.get(name, len(rank)), name))


app = typer.Typer(
    name="simtrain",
    cls=_Commands,
    help="Discrete-event simulator of LLM training clusters: step time, MFU, pipeline bubble, "
    "exposed communication, memory, goodput and cost.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
console = Console()
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def _print_version(value: bool) -> None:
    """``--version``: print the installed version (the one every report embeds) and stop."""
    if value:
        from simtrain.api import simtrain_version

        typer.echo(f"simtrain {simtrain_version()}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the simtrain version and exit.",
    ),
) -> None:
    """Options that apply before any subcommand."""


def show(*tables: Table) -> None:
    """Print tables fitted to the terminal: names and numbers are never cut (see ``fit_table``)."""
    from simtrain.report.fit import fit_table

    for table in tables:
        console.print(fit_table(table, console))


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr on one line and return the Exit to raise."""
    err_console.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def _one_line_warning(message: Warning | str, category: type[Warning], *args: Any) -> None:
    """Print a warning as one ``warning:`` line (not Python's two-line source excerpt)."""
    err_console.print(f"warning: {message}", markup=False)


@functools.cache
def _command() -> Any:
    """The click command behind ``app``, built once (typer rebuilds it per call: 0.2 s)."""
    return typer.main.get_command(app)


def run_app(argv: list[str] | None = None) -> int:
    """Run the CLI, turning every expected error into one line on stderr and a non-zero exit."""
    try:
        # Without standalone mode click returns the exit code of a typer.Exit instead of
        # raising it.
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            code = _command().main(args=argv, prog_name="simtrain", standalone_mode=False)
        if isinstance(code, int):
            return code
    except typer.Exit as exc:
        return exc.exit_code
    except SimtrainError as exc:
        err_console.print(f"error: {exc}", markup=False)
        return 2
    except Warning as exc:  # a warning turned into an error (python -W error)
        err_console.print(f"error: {exc}", markup=False)
        return 2
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("error: interrupted", markup=False)
        return 130
    except OSError as exc:
        err_console.print(f"error: {exc.strerror or exc}: {exc.filename or ''}", markup=False)
        return 2
    except Exception as exc:
        if _is_validation_error(exc):
            from simtrain.specs.loader import format_validation_error

            err_console.print(f"error: {format_validation_error(exc)}", markup=False)  # type: ignore[arg-type]
            return 2
        # Usage errors (unknown option, missing argument, a value of the wrong type) are
        # click exceptions, which typer vendors: one line naming the option, plus where help is.
        message, exit_code = getattr(exc, "format_message", None), getattr(exc, "exit_code", None)
        if callable(message) and isinstance(exit_code, int):
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `simtrain`: the help, intact
                err_console.print(str(message()), markup=False)
                return exit_code
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            text = " ".join(str(message()).split())
            err_console.print(f"error: {text}{hint}", markup=False)
            return exit_code
        raise
    return 0


def _is_validation_error(exc: Exception) -> bool:
    """A pydantic ValidationError, checked without importing pydantic (startup time).

    pydantic is only loaded by commands that validate specs, so an exception can only be
    one of its errors once it is in ``sys.modules``.
    """
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(exc, pydantic.ValidationError)
