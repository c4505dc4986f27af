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


def recomputed_layers(layers: range, fraction: float) -> frozenset[int]:
    """Layers of a chunk that full recomputation re-runs when only ``fraction`` of them are.

    Spread evenly through the chunk: with 0.5 every second layer (torchtitan's selective
    layer checkpointing), with 1 all of them.

    Examples:
        >>> sorted(recomputed_layers(range(4, 10), 0.5))
        [5, 7, 9]
        >>> len(recomputed_layers(range(8), 1.0))
        8
    """
    return frozenset(
        layer
        for j, layer in enumerate(layers)
        if int((j + 1) * fraction + 1e-9) > int(j * fraction + 1e-9)
    )


def recomputed_layer_count(num_layers: int, num_chunks: int, fraction: float) -> int:
    """How many of the model's layers full recomputation re-runs (all chunks together).

    Examples:
        >>> recomputed_layer_count(32, 1, 0.5)
        16
    """
    return sum(len(recomputed_layers(r, fraction)) for r in chunk_layers(num_layers, num_chunks))
