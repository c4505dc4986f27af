"""Shared base class for every user-facing spec: frozen, typo-proof, self-documenting."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """A validated, immutable piece of user input.

    Unknown keys are errors (``extra="forbid"``) so a typo never silently falls back to a
    default, and the docstring under each field becomes its description in ``--help`` and in
    the JSON schema.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        validate_default=True,
    )


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
