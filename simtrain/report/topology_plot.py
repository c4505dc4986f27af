"""A drawing of a cluster's network that fits on a slide, from a ``Topology``.

Tiers are rows (GPUs at the bottom, then the node fabric, leaf, spine and core switches),
each labelled with what it holds; link classes differ by colour, and line width grows with
the bandwidth a line stands for. Small clusters are drawn device by device. Large ones are
aggregated so that every preset draws in a second: one glyph per node (its GPUs and its
NVSwitch), or per block of nodes or switches when a tier would hold too many glyphs, and one
line per pair of glyphs carrying the summed bandwidth of the links it stands for. A 3D torus is
drawn as its X × Y face, each glyph a column of Z chips.

Everything is computed from the topology's flat link arrays (no networkx), so a 75,000-device
preset draws as fast as a 16-device one.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from simtrain.topology.base import LINK_CLASSES, Topology

MAX_GLYPHS_PER_TIER = 32
"""Above this many nodes or switches in a tier, neighbours are drawn as one glyph."""
MAX_DETAILED_DEVICES = 64
"""Clusters with at most this many devices are drawn device by device."""

_TIER_OF_KIND = {"device": 0, "nvswitch": 1, "pcie_switch": 1, "leaf": 2, "group_switch": 2,
                 "spine": 3, "core": 4}  # fmt: skip
_TIER_NAMES = {0: "GPUs", 1: "node fabric", 2: "leaf switches", 3: "spine switches",
               4: "core switches"}  # fmt: skip
_KIND_NAMES = {"nvswitch": "NVSwitch", "pcie_switch": "PCIe switch"}
_MARKERS = {0: "s", 1: "D", 2: "o", 3: "o", 4: "o"}
_FACE = {0: "#4c72b0", 1: "#55a868", 2: "#8172b2", 3: "#c44e52", 4: "#937860"}

# Line classes: (tier of the lower end, tier of the upper end) or the link class.
_LINE_STYLES = {
    "scale-up": ("#55a868", "scale-up inside a node"),
    "nic": ("#4c72b0", "NIC ↔ leaf"),
    "leaf-spine": ("#dd8452", "leaf ↔ spine"),
    "spine-core": ("#c44e52", "spine ↔ core"),
    "ici": ("#8172b2", "chip ↔ chip (ICI)"),
    "global": ("#c44e52", "dragonfly group ↔ group (global)"),
}


@dataclass(frozen=True)
class _Glyphs:
    """Graph nodes mapped to drawn glyphs: ``glyph[node]``, and each glyph's place and size."""

    glyph: np.ndarray
    x: np.ndarray
    y: np.ndarray
    tier: np.ndarray
    members: np.ndarray


def _dragonfly_group(topo: Topology, nodes: np.ndarray) -> np.ndarray:
    """Group index of dragonfly switches, from their names ``g<group>/sw<switch>``."""
    return np.array([int(topo.node_names[n].split("/", 1)[0][1:]) for n in nodes])


def _blocks(count: int, limit: int) -> tuple[np.ndarray, int]:
    """Block index of each of ``count`` items so that at most ``limit`` blocks remain."""
    size = max(1, -(-count // limit))
    return np.arange(count) // size, size


def _glyphs(topo: Topology) -> tuple[_Glyphs, str]:
    """Assign every graph node to a glyph; returns the glyphs and a note on the aggregation."""
    kinds = np.array(topo.node_kinds)
    tier = np.array([_TIER_OF_KIND.get(k, 2) for k in kinds])
    glyph = np.full(len(kinds), -1)
    xs, ys, tiers, members = [], [], [], []
    notes = []
    detailed = topo.num_devices <= MAX_DETAILED_DEVICES
    for t in sorted(set(tier.tolist())):
        nodes = np.flatnonzero(tier == t)
        if t == 0 and topo.torus_shape is not None:
            x_dim, y_dim, z_dim = topo.torus_shape
            # chip i sits at (x, y, z) = (i % X, (i // X) % Y, i // (X * Y)); glyph = (x, y)
            local = (nodes % x_dim) + x_dim * ((nodes // x_dim) % y_dim)
            block_size = z_dim
            order = local
            positions = [(0.08 + 0.84 * (g % x_dim) / max(1, x_dim - 1),
                          0.05 + 0.9 * (g // x_dim) / max(1, y_dim - 1))
                         for g in range(x_dim * y_dim)]  # fmt: skip
        else:
            if t <= 1 and not detailed:
                # one glyph per node: its devices and its NVSwitch together
                host = nodes // topo.gpus_per_node if t == 0 else np.arange(nodes.size)
                block, size = _blocks(topo.num_nodes, MAX_GLYPHS_PER_TIER)
                order = block[host]
                block_size = size * (topo.gpus_per_node if t == 0 else 1)
                if t == 1:
                    continue  # drawn as part of the node glyph
            elif t == 2 and kinds[nodes[0]] == "group_switch":
                # a dragonfly: one circle per group (or block of groups), local links inside
                group = _dragonfly_group(topo, nodes)
                block, size = _blocks(int(group.max()) + 1, MAX_GLYPHS_PER_TIER)
                order = block[group]
                block_size = size
                notes.append(
                    f"each circle: {size:,} dragonfly group{'s' if size > 1 else ''} of "
                    f"{int(np.bincount(group).max())} switches"
                )
            else:
                order, block_size = _blocks(nodes.size, 10**9 if t == 0 else MAX_GLYPHS_PER_TIER)
            count = int(order.max()) + 1
            positions = [(0.05 + 0.9 * (i + 0.5) / count, float(t)) for i in range(count)]
        base = len(xs)
        glyph[nodes] = base + order
        for x, y in positions:
            xs.append(x)
            ys.append(y)
            tiers.append(t)
        members += np.bincount(order, minlength=len(positions)).tolist()
        if t >= 2 and block_size > 1 and kinds[nodes[0]] != "group_switch":
            notes.append(f"{_TIER_NAMES[t]} drawn {block_size:,} per circle")
    if not detailed and topo.torus_shape is None:
        # node fabric switches join their node's glyph
        fabric = np.flatnonzero(tier == 1)
        host_glyph = glyph[np.arange(topo.num_devices)][:: topo.gpus_per_node]
        glyph[fabric] = host_glyph[: fabric.size]
        per = -(-topo.num_nodes // MAX_GLYPHS_PER_TIER)
        gpus = per * topo.gpus_per_node
        notes.insert(0, f"each square: {per:,} node{'s' if per > 1 else ''} ({gpus:,} GPUs)")
    return (
        _Glyphs(glyph, np.array(xs), np.array(ys), np.array(tiers), np.array(members)),
        "; ".join(notes),
    )


_KIND_CODES = ("scale-up", "nic", "leaf-spine", "spine-core", "ici", "global")
_TORUS_Y = "#da8bc3"


def _line_kinds(tier_a: np.ndarray, tier_b: np.ndarray, link_class: np.ndarray) -> np.ndarray:
    """Index into ``_KIND_CODES`` of every link, from the tiers of its ends and its class."""
    low, high = np.minimum(tier_a, tier_b), np.maximum(tier_a, tier_b)
    kind = np.where(low == 2, 2, 3)
    kind = np.where(low <= 1, 1, kind)
    kind = np.where(high <= 1, 0, kind)
    kind = np.where((low == 2) & (high == 2), 5, kind)  # dragonfly switch to switch
    return np.where(link_class == LINK_CLASSES.index("ici"), 4, kind)


def topology_figure(topo: Topology, title: str) -> Figure:
    """The network of ``topo`` as a labelled, layered drawing (see the module docstring)."""
    glyphs, note = _glyphs(topo)
    torus = topo.torus_shape is not None
    node_tier = np.array([_TIER_OF_KIND.get(k, 2) for k in topo.node_kinds])
    kinds = _line_kinds(node_tier[topo.link_src], node_tier[topo.link_dst], topo.link_class)
    src, dst = glyphs.glyph[topo.link_src], glyphs.glyph[topo.link_dst]
    drawn = src != dst  # links inside one glyph (a node's NVLinks when aggregated) are not drawn
    # One line per glyph pair and kind, carrying the summed bandwidth; a pair of directed links
    # counts once (bandwidths are per direction).
    num = glyphs.x.size
    key = (np.minimum(src, dst) * num + np.maximum(src, dst)) * len(_KIND_CODES) + kinds
    uniq, inverse = np.unique(key[drawn], return_inverse=True)
    summed = np.bincount(inverse, weights=topo.link_bandwidth_bytes_per_s[drawn]) / 2.0
    pair, line_kind = uniq // len(_KIND_CODES), uniq % len(_KIND_CODES)
    lows, highs = pair // num, pair % num

    # Rows: the tiers present, packed (no empty row where a merged node fabric would be).
    rows = {t: i for i, t in enumerate(sorted(set(glyphs.tier.tolist())))}
    y = glyphs.y if torus else np.array([rows[int(t)] for t in glyphs.tier], dtype=float)

    fig = Figure(figsize=(11.0, 6.4))
    ax = fig.add_subplot()
    top = float(summed.max(initial=1.0))
    # Dense meshes (every leaf to every spine) fade so the tiers stay readable.
    lines_of_kind = np.bincount(line_kind, minlength=len(_KIND_CODES))
    alphas = (
        np.clip(40 / np.maximum(1, lines_of_kind), 0.15, 0.8)
        if not torus
        else [0.8] * len(_KIND_CODES)
    )
    for lo, hi, kind, total in zip(lows, highs, line_kind, summed, strict=True):
        x0, y0, x1, y1 = glyphs.x[lo], y[lo], glyphs.x[hi], y[hi]
        if torus and (abs(x1 - x0) > 0.5 or abs(y1 - y0) > 0.5):
            continue  # wrap-around links: stated in the legend instead of crossing the grid
        colour, _ = _LINE_STYLES[_KIND_CODES[int(kind)]]
        if torus and y0 != y1:
            colour = _TORUS_Y
        width = 0.4 + 3.0 * (total / top) ** 0.5
        if y0 == y1 and not torus:  # within one row (dragonfly groups): an arc above it
            xs = np.linspace(x0, x1, 24)
            bump = 0.12 + 0.5 * abs(x1 - x0)
            ys = y0 + bump * np.sin(np.pi * (xs - x0) / (x1 - x0))
            ax.plot(xs, ys, color=colour, linewidth=width, alpha=alphas[kind], zorder=1)
            continue
        ax.plot([x0, x1], [y0, y1], color=colour, linewidth=width, alpha=alphas[kind], zorder=1)

    for t in rows:
        sel = glyphs.tier == t
        sizes = 30 + 70 * np.sqrt(glyphs.members[sel] / max(1, glyphs.members[sel].max()))
        ax.scatter(glyphs.x[sel], y[sel], s=sizes, marker=_MARKERS[t], c=_FACE[t],
                   edgecolors="black", linewidths=0.5, zorder=3)  # fmt: skip
    counts = topo.count_nodes()
    dragonfly = "group_switch" in counts
    aggregated = topo.num_devices > MAX_DETAILED_DEVICES
    if torus:
        x_dim, y_dim, _ = topo.torus_shape  # type: ignore[misc]
        ax.text(0.5, -0.06, f"X: {x_dim} chips", ha="center", va="top", fontsize=9)
        ax.text(0.02, 0.5, f"Y: {y_dim} chips", ha="right", va="center", rotation=90, fontsize=9)
        ax.set_xlim(-0.06, 1.02)
        ax.set_ylim(-0.12, 1.02)
    else:
        for t, row in rows.items():
            names = [k for k, tt in _TIER_OF_KIND.items() if tt == t and k in counts]
            total = sum(counts[k] for k in names)
            if t == 0:
                fabric = next((k for k in ("nvswitch", "pcie_switch") if k in counts), None)
                label = f"GPUs: {topo.num_devices:,}\n{topo.gpus_per_node} per node"
                if aggregated and fabric:
                    label += f" + {_KIND_NAMES[fabric]}"
            elif t == 1:
                label = f"{_KIND_NAMES.get(names[0], names[0])}\n{total:,} (one per node)"
            elif "group_switch" in names:
                label = f"dragonfly switches\n{total:,}"
            else:
                label = f"{_TIER_NAMES[t]}\n{total:,}"
            ax.text(0.02, row, label, ha="right", va="center", fontsize=9)
        ax.set_xlim(-0.2, 1.0)
        ax.set_ylim(-0.5, len(rows) - 0.5 + (0.75 if dragonfly else 0.0))
    ax.set_axis_off()

    handles = []
    for code in sorted(set(kinds[drawn].tolist())):
        colour, label = _LINE_STYLES[_KIND_CODES[code]]
        if dragonfly and _KIND_CODES[code] == "nic":
            label = "NIC ↔ dragonfly switch"
        per_link = float(np.median(topo.link_bandwidth_bytes_per_s[drawn & (kinds == code)]))
        if torus:
            label = "ICI link along x"
        handles.append(Line2D([], [], color=colour, linewidth=2.5,
                              label=f"{label}: {per_link / 1e9:,.1f} GB/s per link"))  # fmt: skip
        if torus:
            handles.append(Line2D([], [], color=_TORUS_Y, linewidth=2.5,
                                  label="ICI link along y (same rate)"))  # fmt: skip
    handles.append(Line2D([], [], color="grey", linewidth=1.0,
                          label="wider line: more bandwidth between its ends"))  # fmt: skip
    for t in rows:
        shape = _TIER_NAMES[t]
        if t == 2 and dragonfly:
            shape = "a dragonfly group (all-to-all local links inside)"
        if t == 0 and torus:
            shape = f"a column of {topo.torus_shape[2]} chips joined in z"  # type: ignore[index]
        elif t == 0 and aggregated:
            shape = "a block of nodes (GPUs and their node fabric)"
        handles.append(Line2D([], [], marker=_MARKERS[t], linestyle="", color=_FACE[t],
                              markeredgecolor="black", label=shape))  # fmt: skip
    if torus:
        handles.append(Line2D([], [], linestyle="", label="(wrap-around links not drawn)"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=8,
              frameon=False, ncol=2)  # fmt: skip
    subtitle = f"bisection {topo.bisection_bandwidth_bytes_per_s / 1e12:,.2f} TB/s per direction"
    if note:
        subtitle += f"; {note}"
    ax.set_title("\n".join([title, *textwrap.wrap(subtitle, 110)]), fontsize=10)
    fig.tight_layout()
    return fig
