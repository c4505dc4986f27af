"""Shared base class for every user-facing spec: frozen, typo-proof, bounded, self-documenting.

**Ranges (the convention every new field follows).** Every number a user can write is finite
(``allow_inf_nan=False`` on :class:`Spec`) and lies in a documented *physical* range that
lives beside the field's description. Write numeric fields with :func:`bounded`::

    num_gpus: int = bounded(gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    # ... followed, as every field, by its docstring (the description)

``bounded`` is ``pydantic.Field`` with the bounds plus a one-line ``why`` (where the upper
limit comes from), which the error message quotes::

    error: 'cluster.num_gpus' must be an integer in 1..1,048,576 (got 2147483648): ...

Pick the limit generously: ten times the largest real value is a good rule; it exists to
stop absurd input (``1e300``, ``2**80``) before it becomes a hang or a huge allocation, not to
second-guess a plausible experiment. ``tests/specs/test_ranges.py`` fails for any numeric
field of any spec without an upper bound and a reason, and the hostile-input corpus
(``tests/hostile``) sends every such field ``.inf``, ``.nan`` and ``1e300`` automatically.
Shared limits (devices, layers, bytes) are the ``MAX_*`` constants below.

Cross-field rules go in one ``model_validator(mode="after")`` per spec that raises
``ValueError`` with a one-line message naming the fields, their values and what is valid
(see :func:`must_divide`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticUndefined

from simtrain.limits import MAX_DEVICES, MAX_DEVICES_WHY, MAX_LAYERS

__all__ = [
    "MAX_BYTES",
    "MAX_DEVICES",
    "MAX_DEVICES_WHY",
    "MAX_LAYERS",
    "Spec",
    "bounded",
    "check_file_name",
    "divisors",
    "field_range",
    "must_divide",
]

MAX_BYTES = float(1 << 60)
"""Largest byte count or bandwidth in bytes/s anywhere in a spec: 1 EiB."""
MAX_SECONDS = 1e9
"""Longest duration in seconds anywhere in a spec: about 31 years."""
MAX_COUNT = 1 << 30
"""Largest count of anything a simulation enumerates (sequences, tokens per step, ...)."""


def bounded(
    default: Any = PydanticUndefined,
    *,
    why: str,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    **kwargs: Any,
) -> Any:
    """A numeric ``Field`` with its physical range and the one-line reason for its limit.

    Args:
        default: the default value (omit for a required field).
        why: where the upper limit comes from; quoted in the error message.
        ge: inclusive lower bound.
        gt: exclusive lower bound.
        le: inclusive upper bound.
        lt: exclusive upper bound.
        **kwargs: anything else ``pydantic.Field`` takes (``default_factory``, ...).

    Examples:
        >>> from simtrain.specs.base import Spec
        >>> class Demo(Spec):
        ...     n: int = bounded(1, ge=1, le=8, why="eight is plenty")
        >>> Demo(n=3).n
        3
        >>> field_range(Demo.model_fields["n"])
        ('1..8', 'eight is plenty')
    """
    return Field(default, ge=ge, gt=gt, le=le, lt=lt, json_schema_extra={"why": why}, **kwargs)


def field_range(info: Any) -> tuple[str, str]:
    """A field's range as text (``'1..8'``, ``'> 0 and <= 1'``) and the reason for its limit.

    Returns ``("", "")`` for a field without bounds.
    """
    bounds: dict[str, Any] = {}
    for item in getattr(info, "metadata", ()):
        for name in ("ge", "gt", "le", "lt"):
            value = getattr(item, name, None)
            if value is not None:
                bounds[name] = value
    extra = getattr(info, "json_schema_extra", None)
    why = extra.get("why", "") if isinstance(extra, dict) else ""
    if not bounds:
        return "", str(why)

    def show(x: Any) -> str:
        return f"{x:,}" if isinstance(x, int) and abs(x) >= 10_000 else f"{x:g}"

    if "ge" in bounds and "le" in bounds:
        text = f"{show(bounds['ge'])}..{show(bounds['le'])}"
    else:
        ops = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
        parts = [f"{op} {show(bounds[name])}" for name, op in ops if name in bounds]
        text = " and ".join(parts)
    return text, str(why)


class Spec(BaseModel):
    """A validated, immutable piece of user input.

    Unknown keys are errors (``extra="forbid"``) so a typo never silently falls back to a
    default, numbers must be finite (``allow_inf_nan=False``), and the docstring under each
    field becomes its description in ``--help`` and in the JSON schema.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        validate_default=True,
        allow_inf_nan=False,
    )


MAX_NAME_CHARS = 100
"""Longest name that becomes a file name."""


def check_file_name(value: str, field: str) -> str:
    """Return ``value`` if it is safe as a file name, else raise a one-line ValueError.

    Safe: 1-100 characters among letters, digits, ``.``, ``_``, ``+`` and ``-``, not starting
    with a dot (so never ``..``, a hidden file, a path or an empty name).

    Examples:
        >>> check_file_name("llama3-70b_1024", "name")
        'llama3-70b_1024'
        >>> check_file_name("../x", "name")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: 'name' must be 1-100 letters, digits, '.', '_', '+' or '-'...
    """
    ok = (
        0 < len(value) <= MAX_NAME_CHARS
        and not value.startswith(".")
        and all(c.isascii() and (c.isalnum() or c in "._+-") for c in value)
    )
    if not ok:
        shown = repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
        raise ValueError(
            f"'{field}' must be 1-{MAX_NAME_CHARS} letters, digits, '.', '_', '+' or '-', not "
            f"starting with a dot (it names a file) (got {shown})"
        )
    return value


def divisors(n: int) -> list[int]:
    """Return the positive divisors of ``n`` in increasing order.

    Examples:
        >>> divisors(12)
        [1, 2, 3, 4, 6, 12]
    """
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def must_divide(field: str, value: int, target_field: str, target: int) -> str | None:
    """Message when ``value`` does not divide ``target``, naming both fields and the valid values.

    Examples:
        >>> must_divide("parallel.tp", 3, "model.num_heads", 64)
        'parallel.tp=3 must divide model.num_heads=64 (valid: 1, 2, 4, 8, 16, 32, 64)'
        >>> must_divide("parallel.tp", 4, "model.num_heads", 64) is None
        True
    """
    if target % value == 0:
        return None
    valid = ", ".join(str(d) for d in divisors(target))
    return f"{field}={value} must divide {target_field}={target} (valid: {valid})"
