"""GEMM shapes of PyTorch matmul operators recorded in Chakra nodes' ``inputs``.

The Chakra PyTorch converter copies each operator's input shapes and types as Python
literals (``inputs.shapes = "[[64, 256], [256, 512]]"``,
``inputs.types = "['Tensor(float)', 'Tensor(float)']"``). For the matmul family the shapes
give M, N, K, so ``--retarget`` can re-estimate the kernel with the compute model instead of
scaling its measured time. Anything unparseable simply yields no op.

Examples:
    >>> op = gemm_op("aten::mm", "[[64, 256], [256, 512]]", "['Tensor(float)', 'Tensor(float)']")
    >>> (op.m, op.n, op.k, op.flops)
    (64, 512, 256, 16777216.0)
"""

from __future__ import annotations

import ast
import math
from typing import Any

from simtrain.workload.ops import Op

MAX_LITERAL_CHARS = 10_000
"""Longest shapes/types string parsed (matmul inputs are short; longer ones are skipped)."""
MATMUL_OPERATORS = frozenset(
    {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"}
)
DTYPE_BYTES = {"float": 4, "double": 8, "c10::half": 2, "c10::bfloat16": 2, "half": 2}


def _literal(text: str) -> Any:
    if not text or len(text) > MAX_LITERAL_CHARS:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return None


def _dims(shape: Any) -> list[int] | None:
    if isinstance(shape, list) and shape and all(isinstance(d, int) and d > 0 for d in shape):
        return shape
    return None


def _mnk(name: str, shapes: list[Any]) -> tuple[int, int, int, int] | None:
    """(batch, m, n, k) of a matmul operator from its input shapes."""
    if name in ("aten::addmm", "aten::baddbmm"):
        shapes = shapes[1:]  # the bias comes first
    if len(shapes) < 2:
        return None
    a, b = _dims(shapes[0]), _dims(shapes[1])
    if a is None or b is None or len(a) < 2:
        return None
    if name == "aten::linear":  # input [..., k] times weight [n, k] transposed
        if len(b) != 2 or a[-1] != b[1]:
            return None
        return 1, math.prod(a[:-1]), b[0], b[1]
    if len(b) < 2 or a[-1] != b[-2]:
        return None
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    return batch, a[-2], b[-1], a[-1]


def gemm_op(name: str, shapes_text: str, types_text: str) -> Op | None:
    """The GEMM op of a matmul operator node, or None if it is not one or shapes are unknown."""
    if name not in MATMUL_OPERATORS:
        return None
    return gemm_op_from_dims(name, _literal(shapes_text), _literal(types_text))


def gemm_op_from_dims(name: str, shapes: Any, types: Any) -> Op | None:
    """The GEMM op of a matmul operator from parsed input shapes and types, or None.

    Kineto records them as lists (``Input Dims``, ``Input type``); None when they do not fit.

    Examples:
        >>> op = gemm_op_from_dims("aten::addmm", [[512], [64, 256], [256, 512]], ["float"] * 3)
        >>> (op.m, op.n, op.k)
        (64, 512, 256)
    """
    if name not in MATMUL_OPERATORS or not isinstance(shapes, list):
        return None
    found = _mnk(name, shapes)
    if found is None:
        return None
    batch, m, n, k = found
    first = str(types[-1]).lower() if isinstance(types, list) and types else ""
    width = next((w for key, w in DTYPE_BYTES.items() if key in first), 4)
    return Op(
        name,
        "gemm",
        flops=2.0 * batch * m * n * k,
        bytes_accessed=float(width * batch * (m * k + k * n + m * n)),
        m=m,
        n=n,
        k=k,
        batch=batch,
    )
