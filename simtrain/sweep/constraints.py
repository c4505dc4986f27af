"""Sweep constraints: small Python-like expressions checked against a resolved experiment.

A constraint such as ``parallel.tp <= cluster.gpus_per_node`` or
``parallel.vpp == 1 or parallel.pp > 1`` reads fields and properties of the experiment
(``parallel.num_microbatches`` works too). Only literals, dotted names, arithmetic,
comparisons and ``and``/``or``/``not`` are allowed; the expression is parsed with :mod:`ast`
and walked here, never passed to ``eval``.

Evaluation is bounded: strings and lists a constraint builds hold at most
:data:`MAX_ITEMS` items, integers stay within 64 bits and floats finite, and the expression
nests at most :data:`MAX_DEPTH` deep. Division by zero, comparing a string with a number and
every other operation Python would refuse are one-line errors naming the constraint.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from simtrain.errors import SpecError
from simtrain.specs.sweep import resolve_attribute

MAX_ITEMS = 10_000
"""Longest string or list a constraint may build (``'x' * 10**9`` is refused)."""
MAX_INT = 2**63
"""Largest integer magnitude a constraint may use or compute."""
MAX_DEPTH = 50
"""Deepest nesting of a constraint expression."""

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def parse_constraint(text: str, where: str) -> ast.Expression:
    """Parse one constraint, rejecting anything but the allowed syntax.

    Raises:
        SpecError: the text is not a valid constraint expression.
    """
    shown = text if len(text) <= 60 else text[:57] + "..."
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise SpecError(f"'{where}' must be an expression (got {shown!r}: {exc.msg})") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise SpecError(
            f"'{where}' must be a short expression (got {shown!r}: {type(exc).__name__})"
        ) from None
    if _depth(tree) > MAX_DEPTH:
        raise SpecError(f"'{where}' must nest at most {MAX_DEPTH} levels deep (got {shown!r})")
    allowed = (
        ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
        ast.BinOp, ast.Compare, ast.Constant, ast.Name, ast.Attribute, ast.Load,
        ast.List, ast.Tuple, *_BINARY, *_COMPARE,
    )  # fmt: skip
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise SpecError(
                f"'{where}' may use only fields, numbers, strings, arithmetic, comparisons and "
                f"and/or/not (got {type(node).__name__} in {text!r})"
            )
    return tree


def _depth(node: ast.AST) -> int:
    """Nesting depth of an expression tree, iteratively (a deep tree cannot overflow it)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH + 1:
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(current))
    return deepest


def _bounded(value: Any, text: str, where: str) -> Any:
    """``value`` if it is small enough to keep computing with, else a SpecError."""
    too_big = (
        (isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT)
        or (isinstance(value, float) and not math.isfinite(value))
        or (isinstance(value, str | list | tuple) and len(value) > MAX_ITEMS)
    )
    if too_big:
        raise _too_big(text, where)
    return value


def _too_big(text: str, where: str) -> SpecError:
    return SpecError(
        f"'{where}' must keep numbers within 64 bits and finite, and strings and lists "
        f"within {MAX_ITEMS:,} items (got more in {text[:60]!r})"
    )


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | list | tuple) else 1


def _apply(op: ast.AST, left: Any, right: Any, text: str, where: str) -> Any:
    """One binary operation, with its result's size checked before it is built."""
    if isinstance(op, ast.Mult):
        for seq, times in ((left, right), (right, left)):
            sized = isinstance(seq, str | list | tuple) and isinstance(times, int)
            if sized and _size(seq) * max(0, min(times, MAX_ITEMS + 1)) > MAX_ITEMS:
                raise _too_big(text, where)
    if isinstance(op, ast.Add) and _size(left) + _size(right) > MAX_ITEMS + 1:
        raise _too_big(text, where)
    try:
        return _bounded(_BINARY[type(op)](left, right), text, where)
    except ZeroDivisionError:
        raise SpecError(f"'{where}' divides by zero (in {text[:60]!r})") from None
    except (TypeError, ValueError, OverflowError):
        raise SpecError(
            f"'{where}' must combine compatible values (got {type(left).__name__} "
            f"{type(op).__name__} {type(right).__name__} in {text[:60]!r})"
        ) from None


def dotted_names(node: ast.AST) -> list[str]:
    """The dotted names an expression reads, outermost chains only.

    Examples:
        >>> dotted_names(parse_constraint("parallel.tp <= cluster.gpus_per_node", "c"))
        ['parallel.tp', 'cluster.gpus_per_node']
    """
    if isinstance(node, ast.Name | ast.Attribute):
        dotted = _dotted(node)
        return [dotted] if dotted else []
    return [name for child in ast.iter_child_nodes(node) for name in dotted_names(child)]


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def evaluate_constraint(tree: ast.Expression, spec: Any, where: str, text: str = "") -> bool:
    """Whether the resolved experiment ``spec`` satisfies the parsed constraint.

    Raises:
        SpecError: the constraint cannot be evaluated (division by zero, incompatible types,
            a result beyond the bounds above).
    """
    return bool(_eval(tree.body, spec, where, text or where))


def _eval(node: ast.AST, spec: Any, where: str, text: str) -> Any:
    if isinstance(node, ast.Constant):
        return _bounded(node.value, text, where)
    if isinstance(node, ast.Name | ast.Attribute):
        return resolve_attribute(spec, _dotted(node) or "", where)
    if isinstance(node, ast.List | ast.Tuple):
        return _bounded([_eval(e, spec, where, text) for e in node.elts], text, where)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, spec, where, text)
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(
                f"'{where}' must negate numbers only (got -{type(value).__name__} in {text[:60]!r})"
            )
        return -value
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, spec, where, text) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, spec, where, text)
        right = _eval(node.right, spec, where, text)
        return _apply(node.op, left, right, text, where)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, spec, where, text)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, spec, where, text)
            try:
                holds = _COMPARE[type(op)](left, right)
            except TypeError:
                raise SpecError(
                    f"'{where}' must compare values of the same kind (got "
                    f"{type(left).__name__} {type(op).__name__} {type(right).__name__} in "
                    f"{text[:60]!r})"
                ) from None
            if not holds:
                return False
            left = right
        return True
    raise SpecError(f"'{where}' cannot evaluate {type(node).__name__}")
