"""Which layers each pipeline model chunk holds."""

from __future__ import annotations


def chunk_layers(num_layers: int, num_chunks: int) -> list[range]:
    """Split layers into contiguous model chunks as evenly as possible.

    When the layers do not divide evenly, the chunks that carry the LM head and the input
    embedding get one layer fewer first (last chunk, then first, then second-to-last, ...),
    as Llama 3 arranges its 126 layers over 16 stages (``docs/references/training-runs.md``
    §3.3: the first and the last stage each hold one layer fewer).

    Examples:
        >>> [len(r) for r in chunk_layers(126, 16)]
        [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]
        >>> [list(r) for r in chunk_layers(5, 2)]
        [[0, 1, 2], [3, 4]]
    """
    base, extra = divmod(num_layers, num_chunks)
    sizes = [base + 1] * num_chunks
    ends = []
    for i in range((num_chunks + 1) // 2):
        ends += [num_chunks - 1 - i, i] if num_chunks - 1 - i != i else [i]
    for chunk in ends[: num_chunks - extra]:
        sizes[chunk] -= 1
    bounds, start = [], 0
    for size in sizes:
        bounds.append(range(start, start + size))
        start += size
    return bounds
