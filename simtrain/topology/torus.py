"""3D torus (TPU v4/v5p ICI): chips wired to their six neighbours, dimension-order routing.

A TPU v4 cube is 4x4x4 chips; optical circuit switches join cubes into larger X x Y x Z
slices with wrap-around links, up to the 16x16x16 pod of 4,096 chips. Chip ``i`` sits at
``(x, y, z)`` with x fastest: ``i = x + X * (y + Y * z)``.

Per-link bandwidth: the catalog gives the ICI bandwidth of a chip and its number of ports
(``LinkSpec.ports``: six links in a 3D torus, four in TPU v5e's 2D torus). For TPU v4 that is
1.1 PB/s / 4,096 chips / 6 = 44.8 GB/s per link and direction, which makes the bisection of
the 16x16x16 pod 2 x 256 x 44.8 GB/s = 22.9 TB/s, within 5 % of the published 24 TB/s
(``docs/references/tpu.md`` §2). A 2D slice is a torus of shape X x Y x 1.

Dimension-order routing: a transfer first travels along x (the shorter way round when the
dimension wraps), then y, then z, as TPU ICI routes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simtrain.specs.hardware import LinkSpec
from simtrain.topology.base import LinkTable


@dataclass(frozen=True)
class TorusRouter:
    """Dimension-order routes on tori or open meshes of shape ``shape`` (one per slice).

    Chip ``i`` is chip ``i % X*Y*Z`` of slice ``i // X*Y*Z``; routes stay in a slice.
    """

    shape: tuple[int, int, int]
    wraparound: bool
    link: np.ndarray
    """``link[chip, dim, direction]``: id of the link leaving ``chip`` (direction 0 = +1)."""
    neighbour: np.ndarray
    """``neighbour[chip, dim, direction]``: the chip at the other end (-1 if none)."""

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Link ids of each dimension-order route, padded with -1."""
        chips = int(np.prod(self.shape))
        coords_src = np.stack(np.unravel_index(src % chips, self.shape, order="F"), axis=1)
        coords_dst = np.stack(np.unravel_index(dst % chips, self.shape, order="F"), axis=1)
        columns: list[np.ndarray] = []
        current = src.copy()
        for dim, size in enumerate(self.shape):
            delta = coords_dst[:, dim] - coords_src[:, dim]
            if self.wraparound:
                delta = np.mod(delta, size)
                delta = np.where(delta > size // 2, delta - size, delta)
            steps = np.abs(delta)
            direction = (delta < 0).astype(np.int64)
            for t in range(int(steps.max(initial=0))):
                moving = steps > t
                columns.append(np.where(moving, self.link[current, dim, direction], -1))
                current = np.where(moving, self.neighbour[current, dim, direction], current)
        if not columns:
            return np.full((src.size, 1), -1, dtype=np.int64)
        return np.column_stack(columns).astype(np.int64)


def build_torus(
    table: LinkTable,
    shape: tuple[int, int, int],
    wraparound: bool,
    link: LinkSpec,
    num_slices: int = 1,
) -> tuple[TorusRouter, float]:
    """Add the links of ``num_slices`` tori over chips 0..slices*X*Y*Z-1.

    Returns:
        The router and the bisection bandwidth of one slice in bytes/s per direction (the
        cut across the longest dimension, which wrap-around links cross twice).
    """
    per_slice = int(np.prod(shape))
    num_chips = per_slice * num_slices
    bw = link.effective_bandwidth_bytes_per_s / link.ports
    chips = np.arange(num_chips)
    base = chips - chips % per_slice
    coords = np.stack(np.unravel_index(chips % per_slice, shape, order="F"), axis=1)
    link_ids = np.full((num_chips, 3, 2), -1, dtype=np.int64)
    neighbour = np.full((num_chips, 3, 2), -1, dtype=np.int64)
    for dim, size in enumerate(shape):
        if size == 1:
            continue
        for direction, step in enumerate((1, -1)):
            target = coords.copy()
            target[:, dim] += step
            valid = (target[:, dim] >= 0) & (target[:, dim] < size)
            if wraparound:
                target[:, dim] %= size
                valid[:] = True
            dest = base + np.ravel_multi_index(
                tuple(np.where(valid, target.T, 0)), shape, order="F"
            )
            ids = table.add_links(chips[valid], dest[valid], bw, link.latency_s, "ici")
            link_ids[valid, dim, direction] = ids
            neighbour[valid, dim, direction] = dest[valid]
    longest = max(shape)
    crossing = (2 if wraparound and longest > 2 else 1) * (per_slice // longest)
    bisection = crossing * bw if longest > 1 else 0.0
    return TorusRouter(shape, wraparound, link_ids, neighbour), bisection
