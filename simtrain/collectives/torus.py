"""Multi-dimensional ring collectives on a 3D torus (TPU ICI), using all six links per chip.

The data is split into three channels. Channel c reduce-scatters along dimension c, then
c+1, then c+2 (each stage on the shard left by the previous one), so at every stage the
three channels work on three different dimensions at once; within a dimension the shard
goes half each way round the two directions of the ring. All-gather runs the stages in
reverse. Each stage along a dimension of n chips takes n-1 ring steps.

On a 16x16x16 TPU v4 pod every link is busy all the time: all-reduce bus bandwidth
≈ 6 links x 44.8 GB/s = 269 GB/s per chip, i.e. 4,096 x 269 GB/s = 1.1 PB/s, the published
pod all-reduce bandwidth (``docs/references/hardware.md`` §7.1, TPU v4 row), from link
rates that also reproduce the published 24 TB/s bisection (``topology/torus.py``).
"""

from __future__ import annotations

import numpy as np

from simtrain.collectives.base import Schedule, register
from simtrain.errors import SpecError
from simtrain.network.flow import Phase
from simtrain.topology.base import Topology


def _stage(
    shape: tuple[int, int, int], dims: list[int], data_bytes: list[float], first: int
) -> Phase | None:
    """One ring step of every channel c along ``dims[c]`` on ``data_bytes[c]`` per chip.

    The phase repeats for the longest ring; shorter rings spread their bytes over it.
    """
    chips = np.arange(int(np.prod(shape)))
    coords = np.stack(np.unravel_index(chips, shape, order="F"))
    steps = max(shape[d] - 1 for d in dims)
    if steps == 0:
        return None
    srcs, dsts, sizes = [], [], []
    for dim, data in zip(dims, data_bytes, strict=True):
        n = shape[dim]
        if n == 1:
            continue
        directions = (1, -1) if n > 2 else (1,)
        per_step = data / n / len(directions) * (n - 1) / steps
        for step in directions:
            moved = coords.copy()
            moved[dim] = (moved[dim] + step) % n
            srcs.append(first + chips)
            dsts.append(first + np.ravel_multi_index(tuple(moved), shape, order="F"))
            sizes.append(np.full(chips.size, per_step))
    return Phase.of(np.concatenate(srcs), np.concatenate(dsts), np.concatenate(sizes), steps)


@register("torus", ("all_reduce", "reduce_scatter", "all_gather"))
def torus(kind: str, devices: np.ndarray, size_bytes: float, topology: Topology) -> Schedule:
    """Multi-dimensional ring schedule of ``kind`` (see the module docstring).

    Raises:
        SpecError: not a wrap-around torus, or a group that is not one whole slice (the
            whole torus) in chip order.
    """
    shape = topology.torus_shape
    per_slice = topology.chips_per_slice or topology.num_devices
    first = int(devices[0]) if devices.size else 0
    whole = first % per_slice == 0 and np.array_equal(devices, first + np.arange(per_slice))
    if shape is None or not whole:
        raise SpecError(
            "'algo' torus needs a torus_3d topology with wrap-around and a group of all the "
            f"chips of one slice in order (got {devices.size} devices of slices of "
            f"{per_slice} on {topology.kind}; use ring)"
        )
    channel_bytes = size_bytes / 3
    reduce_stages = []
    shard = [channel_bytes] * 3
    for stage in range(3):
        dims = [(c + stage) % 3 for c in range(3)]
        reduce_stages.append(_stage(shape, dims, shard, first))
        shard = [s / shape[d] for s, d in zip(shard, dims, strict=True)]
    gather_stages = reduce_stages[::-1]
    stages = {
        "reduce_scatter": reduce_stages,
        "all_gather": gather_stages,
        "all_reduce": reduce_stages + gather_stages,
    }[kind]
    return Schedule(tuple(p for p in stages if p is not None))
