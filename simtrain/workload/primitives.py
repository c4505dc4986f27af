"""Constructors of single ops: GEMMs, linear layers, memory-bound kernels, collectives."""

from __future__ import annotations

from simtrain.workload.ops import Op

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "mxfp8": 1}
FP8_DTYPES = frozenset({"fp8", "mxfp8"})
ACT_BYTES = 2  # activations and their gradients are kept in 16 bits (also under fp8 GEMMs)


def gemm(
    name: str,
    phase: str,
    m: int,
    n: int,
    k: int,
    dtype_bytes: int,
    layer: int,
    batch: int = 1,
    dtype: str = "",
) -> Op:
    """A GEMM with FLOPs 2*M*N*K*batch and bytes for reading A, B and writing C.

    ``dtype`` is the precision the kernel runs at ("" = the training dtype).
    """
    return Op(
        name=name,
        kind="gemm",
        phase=phase,  # type: ignore[arg-type]
        flops=2.0 * m * n * k * batch,
        bytes_accessed=float(batch * (dtype_bytes * (m * k + k * n) + ACT_BYTES * m * n)),
        m=m,
        n=n,
        k=k,
        batch=batch,
        layer=layer,
        dtype=dtype,
    )


def linear(
    name: str,
    tokens: int,
    n_in: int,
    n_out: int,
    dtype_bytes: int,
    layer: int,
    batch: int = 1,
    dtype: str = "",
) -> tuple[Op, Op, Op]:
    """Forward, input-gradient and weight-gradient GEMMs of a linear layer y = x @ W.

    The input gradient (tokens x n_in = dY @ W^T) and the weight gradient
    (n_in x n_out = X^T @ dY) each cost as much as the forward.
    """
    return (
        gemm(name, "fwd", tokens, n_out, n_in, dtype_bytes, layer, batch, dtype),
        gemm(f"{name}_dgrad", "bwd_input", tokens, n_in, n_out, dtype_bytes, layer, batch, dtype),
        gemm(f"{name}_wgrad", "bwd_weight", n_in, n_out, tokens, dtype_bytes, layer, batch, dtype),
    )


def memory_op(
    name: str,
    kind: str,
    phase: str,
    bytes_accessed: float,
    layer: int,
    flops: float = 0.0,
    strided: bool = False,
) -> Op:
    """A memory-bound op (norm, activation, dropout, residual...): its cost is its bytes.

    ``strided``: an eager PyTorch elementwise kernel over a non-contiguous iteration
    (``Op.strided``).
    """
    return Op(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        phase=phase,  # type: ignore[arg-type]
        flops=flops,
        bytes_accessed=float(bytes_accessed),
        layer=layer,
        strided=strided,
    )


def collective(
    name: str,
    comm: str,
    axis: str,
    phase: str,
    size_bytes: float,
    layer: int,
    overlap_ops: int = 0,
) -> Op:
    """A collective on a mesh axis (size in the nccl-tests convention, see ``network.base``)."""
    return Op(
        name=name,
        kind="collective",
        phase=phase,  # type: ignore[arg-type]
        comm=comm,
        axis=axis,
        comm_bytes=float(size_bytes),
        layer=layer,
        overlap_ops=overlap_ops,
    )
