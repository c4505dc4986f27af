"""Paths: where simtrain's data folders live, and the checks every output path goes through."""

from __future__ import annotations

import os
import stat
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


# ---------------------------------------------------------------------------------------------
# Output paths: resolved, checked and confined before anything is computed or written.
#
# Every file simtrain writes goes through one of these functions, called by the CLI *before*
# the (possibly long) simulation, so a bad path costs nothing and gives one line naming the
# flag: an empty path (which would mean the working directory), a NUL byte, a directory where a
# file is expected (or the reverse), a device or pipe such as /dev/null, a parent that is a
# file, an unknown image format, or a store that is not a SQLite file.

SQLITE_HEADER = b"SQLite format 3\x00"
"""First 16 bytes of every SQLite 3 database file."""


def _checked(path: str | Path, flag: str) -> Path:
    """A non-empty path without NUL bytes, expanded (``~``) and made absolute."""
    text = str(path)
    if not text.strip():
        raise SpecError(f"'{flag}' must be a path (got an empty string)")
    if "\0" in text:
        raise SpecError(f"'{flag}' must be a path without NUL bytes (got {text[:60]!r})")
    resolved = Path(os.path.abspath(os.path.expanduser(text)))
    for parent in resolved.parents:
        if parent.exists() and not parent.is_dir():
            raise SpecError(
                f"'{flag}' must be inside a directory (got '{text}': '{parent}' is a file)"
            )
    return resolved


def _kind(path: Path) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    return "device or pipe"


def output_dir(path: str | Path, flag: str) -> Path:
    """Check an output folder (create it with :func:`make_dir` when writing starts).

    Raises:
        SpecError: empty, NUL byte, an existing file, device or pipe, or a parent that is a
            file.
    """
    resolved = _checked(path, flag)
    kind = _kind(resolved)
    if kind not in ("missing", "directory"):
        raise SpecError(f"'{flag}' must be a directory (got '{path}': a {kind})")
    return resolved


def output_file(path: str | Path, flag: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Check an output file path and its suffix (its folder is created on writing).

    Args:
        path: the path the user gave.
        flag: the option it came from, named in errors.
        suffixes: allowed suffixes without the dot (empty: any).

    Raises:
        SpecError: empty, NUL byte, a directory, a device or pipe (``/dev/null``), a parent
            that is a file, or a suffix not in ``suffixes``.
    """
    resolved = _checked(path, flag)
    kind = _kind(resolved)
    if kind not in ("missing", "file"):
        raise SpecError(f"'{flag}' must be a regular file path (got '{path}': a {kind})")
    suffix = resolved.suffix.lower().lstrip(".")
    if suffixes and suffix not in suffixes:
        raise SpecError(
            f"'{flag}' must end in one of {', '.join('.' + s for s in suffixes)} "
            f"(got '{resolved.name}')"
        )
    return resolved


def image_formats() -> tuple[str, ...]:
    """File formats matplotlib can save (``png``, ``svg``, ``pdf``, ...), sorted."""
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted(FigureCanvasBase.get_supported_filetypes()))


def image_file(path: str | Path, flag: str) -> Path:
    """Check an image path before anything is drawn: matplotlib's formats, an existing folder.

    Raises:
        SpecError: see :func:`output_file`; also a folder that does not exist (an image is
            one file: a typo in its folder should not create a directory tree).
    """
    resolved = output_file(path, flag, image_formats())
    if not resolved.parent.is_dir():
        raise SpecError(f"'{flag}' must be in an existing directory (got '{path}')")
    return resolved


def store_file(path: str | Path, flag: str) -> Path:
    """Check a SQLite store path: missing (created later), or an existing SQLite 3 file.

    Raises:
        SpecError: empty, NUL byte, a directory, device or pipe, a parent that is a file, or
            an existing file that is not a SQLite database (a store never overwrites one).
    """
    resolved = output_file(path, flag)
    if resolved.exists() and resolved.stat().st_size > 0:
        with open(resolved, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
        if head != SQLITE_HEADER:
            raise SpecError(
                f"'{flag}' must be a SQLite store or a new file (got '{path}': an existing file "
                "that is not a SQLite database)"
            )
    return resolved


def make_dir(folder: Path, flag: str) -> Path:
    """Create an output folder (and its parents), turning OS errors into one line."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(
            f"'{flag}' must be a directory simtrain can create (got '{folder}': {exc.strerror})"
        ) from None
    return folder


def inside(folder: Path, name: str, flag: str) -> Path:
    """``folder / name`` for a generated file name, refusing anything that leaves ``folder``.

    Examples:
        >>> inside(Path("/tmp/out"), "report.json", "--out")
        PosixPath('/tmp/out/report.json')
        >>> inside(Path("/tmp/out"), "../x", "--out")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        simtrain.errors.SpecError: '--out' file names must stay inside '/tmp/out' (got '../x')
    """
    target = Path(os.path.normpath(folder / name))
    if name in ("", ".", "..") or "\0" in name or target.parent != Path(os.path.normpath(folder)):
        raise SpecError(f"'{flag}' file names must stay inside '{folder}' (got '{name}')")
    return target


def safe_file_name(name: str, default: str = "unnamed") -> str:
    """``name`` with every character outside ``[A-Za-z0-9._+-]`` replaced, never hidden.

    Examples:
        >>> safe_file_name("../../etc/passwd")
        'etc_passwd'
        >>> safe_file_name("")
        'unnamed'
    """
    kept = "".join(c if c.isascii() and (c.isalnum() or c in "._+-") else "_" for c in name)
    kept = kept.strip("._")
    while "__" in kept:
        kept = kept.replace("__", "_")
    return kept[:100] or default
