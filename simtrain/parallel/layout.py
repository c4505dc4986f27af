"""Rank layout: which global rank sits where on the device mesh, and its process groups.

A :class:`RankLayout` is a mixed-radix numbering of the ranks, in the manner of Megatron-LM's
``RankGenerator`` (``parallel_state.py``, ``generate_masked_orthogonal_rank_groups``). The order
string lists the axes from innermost (adjacent ranks) to outermost; with degrees d_0, d_1, ... in
that order, the rank of coordinates (c_0, c_1, ...) is

    rank = c_0 + d_0 * (c_1 + d_1 * (c_2 + ...)) = Σ_k c_k · Π_{j<k} d_j.

The default order ``tp-cp-ep-dp-pp`` keeps a tensor-parallel group on consecutive ranks (hence
inside a node) and the pipeline stages outermost.

Expert parallelism with MoE parallel folding: the dense layers use the grid above with ep = 1,
so world = tp·cp·dp·pp. For MoE layers the same ranks are renumbered on a second grid, like
Megatron-Core's expert rank generator (``RankGenerator(tp=etp, ep, dp=edp, pp, cp=1, order)``):
the same order string with the tp axis sized etp (expert tensor parallelism), cp = 1, ep = ep
and a dp axis of size edp = tp·cp·dp/(etp·ep) (expert data parallelism). So the tp·cp·dp ranks
of one stage are re-split into etp × ep × edp: with etp = tp (the default) that re-splits the
dp·cp ranks of each tensor-parallel position into ep × edp, and with etp < tp expert groups
may span tensor-parallel ranks (ep = 32 over tp = 2 × dp = 16). When ep > 1 the order must keep
ep next to dp (Megatron raises "The ep and dp must be adjacent in order") and cp, ep, dp in
one block. Axes ``etp``, ``ep`` and ``edp`` in :meth:`RankLayout.groups` address this expert
grid; pp groups are the same on both grids (and tp groups, which are etp groups, when
etp = tp).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from simtrain.errors import SpecError
from simtrain.specs.parallel import ParallelSpec

DENSE_AXES = ("tp", "cp", "dp", "pp")
EXPERT_AXES = ("etp", "ep", "edp")


class _Grid:
    """A mixed-radix numbering of ranks over ordered axes (internal)."""

    def __init__(self, axes: tuple[str, ...], degrees: Mapping[str, int]) -> None:
        self.axes = axes
        self.sizes = tuple(degrees[a] for a in axes)
        strides, stride = [], 1
        for size in self.sizes:
            strides.append(stride)
            stride *= size
        self.strides = tuple(strides)
        self.world_size = stride

    def coords(self, rank: int) -> dict[str, int]:
        return {
            a: (rank // st) % size
            for a, st, size in zip(self.axes, self.strides, self.sizes, strict=True)
        }

    def rank(self, coords: Mapping[str, int]) -> int:
        return sum(coords[a] * st for a, st in zip(self.axes, self.strides, strict=True))

    def _offsets(self, indices: list[int]) -> list[int]:
        """Rank offsets of all coordinates along ``indices``, innermost axis fastest.

        Built axis by axis (each outer coordinate repeats the offsets of the axes inside
        it), not summed per coordinate: a data-parallel group of a large job has thousands.
        """
        offsets = [0]
        for i in indices:
            stride = self.strides[i]
            offsets = [o + c * stride for c in range(self.sizes[i]) for o in offsets]
        return offsets

    def groups(self, axes: Iterable[str]) -> list[tuple[int, ...]]:
        inside = set(axes)
        varying = [i for i, a in enumerate(self.axes) if a in inside]
        fixed = [i for i, a in enumerate(self.axes) if a not in inside]
        inner = self._offsets(varying)
        return [tuple(base + off for off in inner) for base in self._offsets(fixed)]

    def group_of(self, rank: int, axes: Iterable[str]) -> tuple[int, ...]:
        inside = set(axes)
        varying = [i for i, a in enumerate(self.axes) if a in inside]
        coords = self.coords(rank)
        base = rank - sum(coords[self.axes[i]] * self.strides[i] for i in varying)
        return tuple(base + off for off in self._offsets(varying))


class RankLayout:
    """The device mesh of a job: coordinates of each rank and process groups per axis.

    Args:
        degrees: degree of each axis among ``tp``, ``cp``, ``ep``, ``dp``, ``pp`` and ``etp``
            (missing axes are 1; ``etp`` defaults to ``tp``). ``ep·etp`` must divide tp·cp·dp.
        order: axes from innermost to outermost, joined by ``-``; must name every axis of
            ``degrees`` with a degree above 1 (Megatron's default ``tp-cp-ep-dp-pp``).

    Raises:
        SpecError: an unknown axis, a degree below 1, an order that repeats or misses an axis,
            or ep not dividing dp·cp.

    Examples:
        Eight ranks with tp=2, dp=2, pp=2: rank = tp + 2·dp + 4·pp.

        >>> layout = RankLayout({"tp": 2, "dp": 2, "pp": 2})
        >>> layout.coords(5)
        {'tp': 1, 'cp': 0, 'dp': 0, 'pp': 1, 'ep': 0, 'edp': 0}
        >>> layout.rank({"tp": 1, "dp": 0, "pp": 1})
        5
        >>> layout.groups("tp")
        [(0, 1), (2, 3), (4, 5), (6, 7)]
        >>> layout.groups("dp")
        [(0, 2), (1, 3), (4, 6), (5, 7)]
        >>> layout.groups("tp-dp")
        [(0, 1, 2, 3), (4, 5, 6, 7)]
        >>> layout.group_of(6, "pp")
        (2, 6)

        With ep=2 the dp·cp = 2 ranks of a (tp, pp) position form one expert group (edp = 1):

        >>> RankLayout({"tp": 2, "dp": 2, "pp": 2, "ep": 2}).groups("ep")
        [(0, 2), (1, 3), (4, 6), (5, 7)]

        Folded (etp = 1): the four tp x dp ranks of a stage form one expert group of 4:

        >>> RankLayout({"tp": 2, "dp": 2, "pp": 2, "ep": 4, "etp": 1}).groups("ep")
        [(0, 1, 2, 3), (4, 5, 6, 7)]
    """

    def __init__(self, degrees: Mapping[str, int], order: str = "tp-cp-ep-dp-pp") -> None:
        for axis, degree in degrees.items():
            if axis not in (*DENSE_AXES, "ep", "etp"):
                valid = ", ".join((*DENSE_AXES, "ep", "etp"))
                raise SpecError(f"'degrees' axis must be one of {valid} (got {axis!r})")
            if not isinstance(degree, int) or degree < 1:
                raise SpecError(f"'degrees.{axis}' must be a positive integer (got {degree!r})")
        full = {a: int(degrees.get(a, 1)) for a in (*DENSE_AXES, "ep")}
        full["etp"] = int(degrees.get("etp", full["tp"]))
        axes = tuple(order.split("-"))
        if len(set(axes)) != len(axes) or not set(axes) <= set(full):
            raise SpecError(
                f"'order' must list distinct axes among tp, cp, ep, dp, pp (got {order!r})"
            )
        if missing := [a for a, d in full.items() if d > 1 and a not in axes and a != "etp"]:
            raise SpecError(f"'order' must include axis {missing[0]} (got {order!r})")
        ranks = full["tp"] * full["cp"] * full["dp"]
        if ranks % (full["ep"] * full["etp"]):
            raise SpecError(
                f"'degrees.ep*etp'={full['ep'] * full['etp']} must divide tp*cp*dp={ranks}"
            )
        if full["ep"] > 1 and not _expert_compatible(axes):
            raise SpecError(
                f"'order' must keep ep next to dp and cp, ep, dp together when ep > 1 "
                f"(got {order!r}), so that ep x edp re-splits the dp*cp ranks"
            )
        self.degrees = full
        self.order = order
        dense_axes = tuple(a for a in axes if a != "ep") + tuple(
            a for a in DENSE_AXES if a not in axes
        )
        self._dense = _Grid(dense_axes, full)
        expert_degrees = {"etp": full["etp"], "ep": full["ep"], "pp": full["pp"]}
        expert_degrees["edp"] = ranks // (full["ep"] * full["etp"])
        expert_axes = tuple(
            {"dp": "edp", "tp": "etp"}.get(a, a)
            for a in (*axes, *(x for x in DENSE_AXES if x not in axes))
        )
        expert_axes = tuple(a for a in expert_axes if a != "cp")
        if "ep" not in expert_axes:
            expert_axes = ("ep", *expert_axes)
        self._expert = _Grid(expert_axes, expert_degrees)

    @classmethod
    def from_spec(cls, parallel: ParallelSpec) -> RankLayout:
        """The layout of a resolved ParallelSpec (``dp`` filled in by ExperimentSpec)."""
        if parallel.dp is None:
            raise SpecError("'parallel.dp' must be resolved before building a layout (got None)")
        degrees = {"tp": parallel.tp, "cp": parallel.cp, "dp": parallel.dp, "pp": parallel.pp}
        degrees |= {"ep": parallel.ep, "etp": parallel.expert_tp}
        return cls(degrees, parallel.rank_order)

    @property
    def world_size(self) -> int:
        """Number of ranks: tp·cp·dp·pp."""
        return self._dense.world_size

    def coords(self, rank: int) -> dict[str, int]:
        """Coordinates of ``rank``: dense axes tp, cp, dp, pp, then expert axes ep, edp."""
        self._check_rank(rank)
        dense = self._dense.coords(rank)
        if self._folded_like_dense:
            edp = self._dense.group_of(rank, ("dp", "cp")).index(rank)
            return {**{a: dense[a] for a in DENSE_AXES}, "ep": 0, "edp": edp}
        expert = self._expert.coords(rank)
        return {**{a: dense[a] for a in DENSE_AXES}, "ep": expert["ep"], "edp": expert["edp"]}

    @property
    def _folded_like_dense(self) -> bool:
        """Without expert parallelism and with etp = tp, expert groups are dense ones."""
        return self.degrees["ep"] == 1 and self.degrees["etp"] == self.degrees["tp"]

    def rank(self, coords: Mapping[str, int]) -> int:
        """The rank at dense coordinates ``coords`` (missing axes are 0).

        ``ep``/``edp`` entries, if given, must agree with the dense coordinates.

        Raises:
            SpecError: a coordinate out of range, or inconsistent ep/edp coordinates.
        """
        for axis, c in coords.items():
            size = (
                self.degrees.get(axis)
                if axis != "edp"
                else self._expert.sizes[self._expert.axes.index("edp")]
            )
            if size is None or not 0 <= c < size:
                raise SpecError(f"'coords.{axis}' must be in [0, {size}) (got {c})")
        rank = self._dense.rank({a: coords.get(a, 0) for a in DENSE_AXES})
        actual = self.coords(rank)
        for axis in EXPERT_AXES:
            if axis in coords and coords[axis] != actual[axis]:
                raise SpecError(
                    f"'coords.{axis}' must be {actual[axis]} for rank {rank} (got {coords[axis]})"
                )
        return rank

    def groups(self, axes: str) -> list[tuple[int, ...]]:
        """Process groups spanning ``axes`` (joined by ``-`` or ``+``), e.g. ``tp``, ``dp-cp``.

        Ranks inside a group are ordered with the layout's innermost axis fastest, whatever the
        order of ``axes``. Groups involving ``etp``, ``ep`` or ``edp`` come from the expert grid
        and may only combine them with each other and ``pp`` (and ``tp`` when etp = tp).
        """
        expert, names = self._grid_axes(axes)
        return (self._expert if expert else self._dense).groups(names)

    def _grid_axes(self, axes: str) -> tuple[bool, list[str]]:
        """Parse ``axes``; True when they address the expert grid.

        With ep = 1 expert groups are dense ones (edp = dp·cp, ep groups are single ranks), so
        they stay right for any order, e.g. Llama 3's ``tp-cp-pp-dp``.
        """
        names = [a for a in re.split(r"[-+]", axes) if a]
        valid = (*DENSE_AXES, *EXPERT_AXES)
        if not names or any(a not in valid for a in names):
            raise SpecError(f"'axes' must join names among {', '.join(valid)} (got {axes!r})")
        if not any(a in EXPERT_AXES for a in names):
            return False, names
        if bad := [a for a in names if a in ("cp", "dp")]:
            raise SpecError(
                f"'axes' must not mix {bad[0]} with ep/edp (got {axes!r}); "
                "use edp for the expert-data-parallel group"
            )
        if "tp" in names:  # tp next to expert axes means the experts' tensor parallelism
            if self.degrees["etp"] != self.degrees["tp"]:
                raise SpecError(
                    f"'axes' must use etp, not tp, with ep/edp when etp differs from tp "
                    f"(got {axes!r})"
                )
            names = ["etp" if a == "tp" else a for a in names]
        if self._folded_like_dense:
            dense = [{"etp": "tp"}.get(a, a) for a in names if a in ("etp", "pp")]
            return False, dense + (["dp", "cp"] if "edp" in names else [])
        return True, names

    def group_of(self, rank: int, axes: str) -> tuple[int, ...]:
        """The group along ``axes`` that contains ``rank``."""
        self._check_rank(rank)
        names = self._grid_axes(axes)
        return (self._expert if names[0] else self._dense).group_of(rank, names[1])

    def within_node(self, axes: str, gpus_per_node: int) -> bool:
        """Whether every group along ``axes`` sits inside one node of ``gpus_per_node`` ranks.

        Ranks fill nodes in order (rank // gpus_per_node is the node), so with the default order
        a tp group of at most gpus_per_node ranks stays on NVLink.

        Examples:
            >>> layout = RankLayout({"tp": 8, "dp": 2})
            >>> layout.within_node("tp", 8), layout.within_node("dp", 8)
            (True, False)
        """
        return all(len({r // gpus_per_node for r in group}) == 1 for group in self.groups(axes))

    def _check_rank(self, rank: int) -> None:
        if not 0 <= rank < self.world_size:
            raise SpecError(f"'rank' must be in [0, {self.world_size}) (got {rank})")

    def __repr__(self) -> str:
        degrees = ", ".join(f"{a}={d}" for a, d in self.degrees.items() if d > 1)
        return f"RankLayout({degrees or 'world=1'}, order={self.order!r})"


def _expert_compatible(axes: tuple[str, ...]) -> bool:
    """Whether ep sits next to dp, and cp, ep, dp form one block (as Megatron requires).

    Examples:
        >>> _expert_compatible(("tp", "cp", "ep", "dp", "pp"))
        True
        >>> _expert_compatible(("cp", "tp", "ep", "dp", "pp"))
        False
    """
    position = {a: i for i, a in enumerate(axes)}
    block = sorted(position[a] for a in ("cp", "ep", "dp") if a in position)
    return abs(position["ep"] - position["dp"]) == 1 and block[-1] - block[0] == len(block) - 1
