"""TPU multi-slice: ICI tori joined by the data-centre network (DCN), a tier above ICI.

A TPU job larger than one slice (a v5e-256 pod, a v5p or v4 slice) runs on several slices
that share no ICI: XLA reduces gradients across them over DCN, through each host's NICs
(``docs/references/tpu.md`` §3: a v5e host of 8 chips has 2 x 100 Gb/s; a 256-chip pod
6.4 Tb/s). MaxText puts data parallelism on this tier (``dcn_data_parallelism``).

Chips are numbered slice by slice (slice s holds chips s*C .. s*C + C - 1 for C chips per
slice); host h holds chips h*g .. h*g + g - 1 (g = ``cluster.gpus_per_node``). Each host has
one DCN port (the catalog's DCN link is per host) into a non-blocking DCN switch; its
chips share it. A transfer between slices leaves through the source chip's host and enters
through the destination chip's host; inside a slice it stays on ICI (dimension-order
routes, ``torus.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simtrain.specs.hardware import LinkSpec
from simtrain.topology.base import LinkTable
from simtrain.topology.torus import TorusRouter


@dataclass(frozen=True)
class DcnLinks:
    """Link ids of the hosts' DCN ports."""

    up: np.ndarray
    """``up[host]``: host to the DCN switch."""
    down: np.ndarray
    """``down[host]``: DCN switch to the host."""


def build_dcn(table: LinkTable, num_chips: int, chips_per_host: int, link: LinkSpec) -> DcnLinks:
    """Add one DCN switch and every host's port to it (a host is drawn as its first chip)."""
    switch = table.add_nodes(["dcn"], "dcn_switch")[0]
    hosts = np.arange(-(-num_chips // chips_per_host))
    first_chip = hosts * chips_per_host
    bw = link.effective_bandwidth_bytes_per_s
    up = table.add_links(first_chip, np.full(hosts.size, switch), bw, link.latency_s, "net")
    down = table.add_links(np.full(hosts.size, switch), first_chip, bw, 0.0, "net")
    return DcnLinks(up, down)


@dataclass(frozen=True)
class MultiSliceRouter:
    """ICI routes inside a slice, host DCN ports between slices."""

    torus: TorusRouter
    chips_per_slice: int
    chips_per_host: int
    dcn: DcnLinks

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Link ids of each route, padded with -1."""
        same = src // self.chips_per_slice == dst // self.chips_per_slice
        inside = self.torus(src[same], dst[same]) if same.any() else np.zeros((0, 1), np.int64)
        width = max(inside.shape[1], 2)
        out = np.full((src.size, width), -1, dtype=np.int64)
        out[np.flatnonzero(same)[:, None], np.arange(inside.shape[1])] = inside
        cross = np.flatnonzero(~same)
        out[cross, 0] = self.dcn.up[src[cross] // self.chips_per_host]
        out[cross, 1] = self.dcn.down[dst[cross] // self.chips_per_host]
        return out


def dcn_bisection(num_chips: int, chips_per_host: int, link: LinkSpec) -> float:
    """DCN bandwidth across half of the hosts, per direction."""
    hosts = -(-num_chips // chips_per_host)
    return hosts // 2 * link.effective_bandwidth_bytes_per_s
