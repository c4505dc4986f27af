"""Checks of command-line values: finite numbers in documented ranges, one line each.

Typer parses the type (an integer flag given ``1e9`` is a usage error naming the flag); these
helpers check what the type cannot: finiteness and the physical range, with the same message
shape as the specs (``'--runs' must be an integer in 1..1,048,576 (got 0)``).
"""

from __future__ import annotations

import math

from simtrain.errors import SpecError


def _show(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) and abs(x) >= 10_000 else f"{x:g}"


def number(
    value: float | None, flag: str, low: float, high: float, why: str = "", *, above: bool = False
) -> float | None:
    """``value`` if it is finite and within ``low..high`` (``> low`` with ``above``).

    Examples:
        >>> number(3.0, "--t-f", 0, 1e9)
        3.0
        >>> number(float("nan"), "--t-f", 0, 1e9)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        simtrain.errors.SpecError: '--t-f' must be a finite number in 0..1e+09 (got nan)
    """
    if value is None:
        return None
    ok = math.isfinite(value) and (value > low if above else value >= low) and value <= high
    if not ok:
        span = (
            f"> {_show(low)} and <= {_show(high)}" if above else f"in {_show(low)}..{_show(high)}"
        )
        noun = "an integer" if isinstance(value, int) else "a finite number"
        shown = f"{value:g}" if isinstance(value, float) else _show(value)
        if isinstance(value, int) and value.bit_length() > 64:
            shown = f"an integer of {value.bit_length()} bits"
        reason = f": {why}" if why else ""
        raise SpecError(f"'{flag}' must be {noun} {span} (got {shown}){reason}")
    return value


def integer(value: int | None, flag: str, low: int, high: int, why: str = "") -> int | None:
    """``value`` if it lies in ``low..high``."""
    number(value, flag, low, high, why)
    return value
