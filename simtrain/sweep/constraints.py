"""Sweep constraints: small Python-like expressions checked against a resolved experiment.

A constraint such as ``parallel.tp <= cluster.gpus_per_node`` or
``parallel.vpp == 1 or parallel.pp > 1`` reads fields and properties of the experiment
(``parallel.num_microbatches`` works too). Only literals, dotted names, arithmetic,
comparisons and ``and``/``or``/``not`` are allowed; the expression is parsed with :mod:`ast`
and walked here, never passed to ``eval``.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from simtrain.errors import SpecError
from simtrain.specs.sweep import resolve_attribute

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
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise SpecError(f"'{where}' must be an expression (got {text!r}: {exc.msg})") from None
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


def evaluate_constraint(tree: ast.Expression, spec: Any, where: str) -> bool:
    """Whether the resolved experiment ``spec`` satisfies the parsed constraint."""
    return bool(_eval(tree.body, spec, where))


def _eval(node: ast.AST, spec: Any, where: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name | ast.Attribute):
        return resolve_attribute(spec, _dotted(node) or "", where)
    if isinstance(node, ast.List | ast.Tuple):
        return [_eval(e, spec, where) for e in node.elts]
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, spec, where)
        return not value if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, spec, where) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left, spec, where), _eval(node.right, spec, where))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, spec, where)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, spec, where)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    raise SpecError(f"'{where}' cannot evaluate {type(node).__name__}")
