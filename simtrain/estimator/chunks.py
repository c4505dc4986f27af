"""Timing of one model chunk's actions, from a few of its layers.

A chunk of n identical transformer layers (plus the embedding on the first chunk and the LM
head on the last) repeats the same ops per layer, so every time its action walk produces
(:mod:`simtrain.estimator.walk`) grows by the same amount per added layer. The ops of the
chunk are therefore built for k = 1, 2 and 3 of its layers only (with
:func:`simtrain.parallel.builder.chunk_ops`, the builder's own function), walked, and
extrapolated linearly to n layers. Each sample's walk is exact, and the extrapolation is
exact when the increments from 1 to 2 and from 2 to 3 layers agree, which is checked; when
they do not (a transient longer than a layer), when the chunk mixes dense and MoE layers, or
when n <= 3, the whole chunk is built and walked instead.

A dense model's layers are all alike, so its samples are layers 0-2 whatever the chunk:
chunks of every size and position share one set of samples (per first/last flags). Timings
and weight counts therefore name a chunk's transformer layers by their position in the chunk
(0 for its first layer), keeping -1 for the input embedding and ``num_layers`` for the head,
so chunks of one size share them wherever they sit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simtrain.estimator.walk import ActionTiming
from simtrain.parallel.builder import ChunkOps, LayerCache, chunk_ops
from simtrain.parallel.segments import SegmentPlan, segment_ops
from simtrain.specs.experiment import ExperimentSpec
from simtrain.workload.transformer import Shard

SAMPLE_LAYERS: tuple[int, int, int] = (1, 2, 3)
"""Layers per sample; the increments 1→2 and 2→3 must agree for the extrapolation.

Each added layer adds its ops and one layer-to-layer boundary, so a chunk's times are
linear in its layers from one layer on unless something spans layers (then the check fails
and the whole chunk is walked)."""
_TOLERANCE = 1e-9
BODIES: tuple[str, ...] = ("first_forward", "forward", "backward", "backward_input", "weight")
"""The op sequences of a chunk an action can run (:class:`~simtrain.parallel.builder.ChunkOps`)."""
Walker = Callable[[SegmentPlan], ActionTiming]
"""Times a plan on one rank (:func:`~simtrain.estimator.walk.walk` with that rank's models)."""
CommKey = tuple[str, str, float]
"""(axis, collective kind, size) of a communication op: what its time depends on."""


def chunk_base(spec: ExperimentSpec, layers: range) -> tuple[int, bool]:
    """Where a chunk's ops are built from, and whether it is sampled.

    Every layer of a dense model is alike, so a chunk's ops are built from layer 0 whatever
    its position (chunks of one size share them; an MoE model's are built from the chunk's
    own layers). A chunk is sampled when it has more layers than the largest sample and
    they are all of one kind.

    Examples:
        >>> from simtrain.specs.loader import load_experiment
        >>> spec = load_experiment("experiments/quickstart.yaml")
        >>> chunk_base(spec, range(8, 16)), chunk_base(spec, range(8, 11))
        ((0, True), (0, False))
    """
    model = spec.model
    base = layers.start if model.is_moe else 0
    uniform = len({model.is_moe_layer(i) for i in layers}) == 1
    return base, uniform and len(layers) > SAMPLE_LAYERS[-1]


@dataclass
class ChunkSource:
    """Ops and segment plans of the chunks with given first/last flags (built once, shared).

    Attributes:
        spec: an experiment with the op settings of every spec using this source.
        shard: how a rank's share of each layer is cut.
        first: the chunks hold the input embedding.
        last: the chunks hold the head and the loss.
    """

    spec: ExperimentSpec
    shard: Shard
    first: bool
    last: bool
    _ops: dict[tuple[int, int], ChunkOps] = field(default_factory=dict)
    _plans: dict[tuple[str, bool, int, int], SegmentPlan] = field(default_factory=dict)
    _comm: dict[tuple[int, int], tuple[CommKey, ...]] = field(default_factory=dict)
    _elements: dict[tuple[Any, ...], tuple[dict[int, int], int, int]] = field(default_factory=dict)
    _busy: dict[tuple[Any, ...], float] = field(default_factory=dict)
    layers: LayerCache = field(default_factory=dict)
    """Ops of each layer, shared with the other sources of the same op settings."""

    def ops(self, layers: range) -> ChunkOps:
        """The ops of a chunk holding ``layers`` (cached)."""
        key = (layers.start, layers.stop)
        ops = self._ops.get(key)
        if ops is None:
            ops = self._ops[key] = chunk_ops(
                self.spec, self.shard, layers, self.first, self.last, self.layers
            )
        return ops

    def body(self, body: str, layers: range) -> str:
        """``body``, or ``forward`` for a first forward that runs the forward's ops.

        Without parameter gathers in the first forward the builder gives both bodies one op
        tuple (:func:`~simtrain.parallel.builder.chunk_ops`), so they share a plan, its walks
        and timings.
        """
        if body == "first_forward":
            ops = self.ops(layers)
            if ops.first_forward is ops.forward:
                return "forward"
        return body

    def plan(self, body: str, hooks: bool, layers: range) -> SegmentPlan:
        """Segment plan of one body of a chunk holding ``layers`` (cached).

        Cached under the body asked for too, so that a first forward running the forward's
        ops finds the forward's plan without looking at the ops again.
        """
        asked = (body, hooks, layers.start, layers.stop)
        plan = self._plans.get(asked)
        if plan is None:
            body = self.body(body, layers)
            key = (body, hooks, layers.start, layers.stop)
            plan = self._plans.get(key)
            if plan is None:
                plan = self._plans[key] = segment_ops(getattr(self.ops(layers), body), hooks)
            self._plans[asked] = plan
        return plan

    def comm_keys(self, layers: range) -> tuple[CommKey, ...]:
        """The distinct communication ops of a chunk holding ``layers``."""
        key = (layers.start, layers.stop)
        keys = self._comm.get(key)
        if keys is None:
            ops = self.ops(layers)
            found = {
                (op.axis, op.comm, op.comm_bytes)
                for body in BODIES
                for op in getattr(ops, body)
                if op.is_comm
            }
            keys = self._comm[key] = tuple(sorted(found))
        return keys

    def busy(self, chunk: Chunk, body: str, compute: Any) -> float:
        """Compute seconds of one ``body`` action of ``chunk``: its compute ops back to back.

        What the walk's ``busy_s`` sums, without segmenting or walking: a task's time is
        the sum of its ops' (``ComputeModel.task_time_s``), so the cut into tasks does not
        change it. A sampled chunk's busy time grows by the same amount per layer.
        """
        key = (id(compute), body, len(chunk.layers), chunk.base, chunk.sampled)
        found = self._busy.get(key)
        if found is None:

            def of(layers: range) -> float:
                ops = getattr(self.ops(layers), body)
                return float(compute.task_time_s(tuple(op for op in ops if not op.is_comm)))

            if chunk.sampled:  # its layers' ops are alike: one and two layers tell the rest
                one, two = (of(range(chunk.base, chunk.base + k)) for k in (1, 2))
                found = two + (len(chunk.layers) - 2) * (two - one)
            else:
                found = of(range(chunk.base, chunk.base + len(chunk.layers)))
            self._busy[key] = found
        return found

    def elements(self, chunk: Chunk) -> tuple[dict[int, int], int, int]:
        """Local weight elements of ``chunk``: per layer by position, in all, and in FP8 layers.

        A sampled chunk's FP8 elements grow by the same amount per layer (one sample layer
        to two), like its ops.
        """
        size = len(chunk.layers)
        key = (size, chunk.base, chunk.sampled)
        cached = self._elements.get(key)
        if cached is None:
            probe = self.ops(chunk.probe).layer_elements
            num_layers = self.spec.model.num_layers
            per_layer = {k: v for k, v in probe.items() if not 0 <= k < num_layers}
            for position in range(size):
                layer = chunk.base + (0 if chunk.sampled else position)
                per_layer[position] = probe.get(layer, 0)
            if chunk.sampled:
                one, two = (self.ops(range(chunk.base, chunk.base + k)).fp8_elements
                            for k in SAMPLE_LAYERS[:2])  # fmt: skip
                fp8 = one + (size - 1) * (two - one)
            else:
                fp8 = self.ops(chunk.probe).fp8_elements
            cached = self._elements[key] = (per_layer, sum(per_layer.values()), fp8)
        return cached


@dataclass(frozen=True)
class Chunk:
    """One model chunk of a configuration, with where its timing comes from.

    Attributes:
        source: its ops.
        layers: its transformer layers.
        base: the layer its ops are built from (:func:`chunk_base`).
        sampled: its ops are built for 1, 2 and 3 layers and extrapolated.
    """

    source: ChunkSource
    layers: range
    base: int
    sampled: bool

    @property
    def probe(self) -> range:
        """The layers whose ops stand for the chunk's: the widest sample, or the chunk."""
        width = SAMPLE_LAYERS[-1] if self.sampled else len(self.layers)
        return range(self.base, self.base + width)

    def whole(self, body: str, hooks: bool, walker: Walker) -> ActionTiming:
        """Walk the whole chunk (built from ``base``), its layers named by position."""
        whole = range(self.base, self.base + len(self.layers))
        timing = walker(self.source.plan(body, hooks, whole))
        if not self.base:
            return timing
        renamed = tuple(
            (layer - self.base if layer in whole else layer, end)
            for layer, end in timing.layer_end_s
        )
        return timing._replace(layer_end_s=renamed)

    def timing(self, body: str, hooks: bool, walker: Walker) -> ActionTiming:
        """Timing of one action of the whole chunk (see the module docstring)."""
        timing = self.extrapolated(body, hooks, walker)
        if timing is None:  # not sampled, or not linear in its layers: walk the whole chunk
            return self.whole(body, hooks, walker)
        return timing

    def extrapolated(
        self, body: str, hooks: bool, walker: Walker, exact: bool = True
    ) -> ActionTiming | None:
        """The timing grown from the samples' walks; None unless sampled and linear.

        Not ``exact``: grown from the two widest samples without the check (a transient of
        the first layer, such as a long first gradient bucket, is then carried along
        instead of forcing a walk of the whole chunk).
        """
        if not self.sampled:
            return None
        widths = SAMPLE_LAYERS if exact else SAMPLE_LAYERS[1:]
        walked = [
            walker(self.source.plan(body, hooks, range(self.base, self.base + k))) for k in widths
        ]
        if not exact:
            walked.insert(0, walked[0])
        return _extrapolate(*walked, self, hooks, exact)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _TOLERANCE * max(1.0, abs(a), abs(b))


def _extrapolate(
    ta: ActionTiming,
    tb: ActionTiming,
    tc: ActionTiming,
    chunk: Chunk,
    hooks: bool,
    exact: bool = True,
) -> ActionTiming | None:
    """The 3-layer timing grown to the chunk's layers, or None if the samples are not linear.

    Per-layer end times matter only where gradient buckets hook onto layers (``hooks``: the
    plan is cut at layer boundaries); elsewhere a layer's compute may share a task with its
    neighbours, and every layer is given the action's compute end.
    """
    comm_a, comm_b, comm_c = dict(ta.comm_s), dict(tb.comm_s), dict(tc.comm_s)
    if not set(comm_a) == set(comm_b) == set(comm_c):
        return None
    series = [
        (ta.compute_end_s, tb.compute_end_s, tc.compute_end_s),
        (ta.tail_end_s, tb.tail_end_s, tc.tail_end_s),
        (ta.busy_s, tb.busy_s, tc.busy_s),
        (ta.compute_end_host_s, tb.compute_end_host_s, tc.compute_end_host_s),
        (ta.tail_end_host_s, tb.tail_end_host_s, tc.tail_end_host_s),
        (ta.host_s, tb.host_s, tc.host_s),
        (ta.contended_busy_s, tb.contended_busy_s, tc.contended_busy_s),
        *((comm_a[k], comm_b[k], comm_c[k]) for k in comm_c),
    ]
    # The host's shares (series 3-5) are not checked: they are maxima over paths through
    # the action, each linear in the layers, so their increments only grow with the layers,
    # and they bend where the host and the device trade the lead (and by a collective's
    # issue at the samples' ends); they are extrapolated from their last increment.
    if exact:
        for a, b, c in series[:3] + series[6:]:  # _close(b - a, c - b), inlined: hot
            inc1, inc2 = b - a, c - b
            if not abs(inc1 - inc2) <= _TOLERANCE * max(1.0, abs(inc1), abs(inc2)):
                return None
    trailing = _grown_trailing(
        ta.trailing_s, tb.trailing_s, tc.trailing_s, len(chunk.layers), exact
    )
    if trailing is None:
        return None  # the buckets left in flight at its end are not like the chunk's
    extra = len(chunk.layers) - SAMPLE_LAYERS[-1]

    def grow(three: tuple[float, float, float]) -> float:
        return three[2] + extra * (three[2] - three[1])

    if hooks:
        step = tc.compute_end_s - tb.compute_end_s
        layer_ends = _layer_ends(tc.layer_end_s, step, extra, chunk)
        step_host = tc.compute_end_host_s - tb.compute_end_host_s
        host_entries = tuple(
            (layer, b) for (layer, _), b in zip(tc.layer_end_s, tc.layer_end_host_s, strict=True)
        )
        host_ends = _layer_ends(host_entries, step_host, extra, chunk)
        if layer_ends is None or host_ends is None:
            return None
    else:
        end, end_host = grow(series[0]), grow(series[3])
        probe = chunk.probe
        ends = {layer for layer, _ in tc.layer_end_s if layer not in probe}
        layer_ends = tuple((p, end) for p in [*range(len(chunk.layers)), *sorted(ends)])
        host_ends = tuple((p, end_host) for p, _ in layer_ends)

    return ActionTiming(
        compute_end_s=grow(series[0]),
        tail_end_s=grow(series[1]),
        busy_s=grow(series[2]),
        comm_s=tuple((k, grow(s)) for k, s in zip(comm_c, series[7:], strict=True)),
        layer_end_s=layer_ends,
        compute_end_host_s=grow(series[3]),
        tail_end_host_s=grow(series[4]),
        layer_end_host_s=tuple(b for _, b in host_ends),
        host_s=grow(series[5]),
        starts_with_comm=tc.starts_with_comm,
        contended_busy_s=grow(series[6]),
        trailing_s=trailing,
    )


def _grown_trailing(
    ta: tuple[tuple[float, float], ...],
    tb: tuple[tuple[float, float], ...],
    tc: tuple[tuple[float, float], ...],
    size: int,
    exact: bool = True,
) -> tuple[tuple[float, float], ...] | None:
    """The gradient buckets in flight at the end of a chunk of ``size`` layers, or None.

    The same buckets in every sample, each (start, end) linear in the layers (a backlog on
    the gradient stream grows by the same amount per layer), grown like the other times
    (not ``exact``: from the last two samples, unchecked).
    """
    if not len(ta) == len(tb) == len(tc):
        return None
    extra = size - SAMPLE_LAYERS[-1]
    grown = []
    for fa, fb, fc in zip(ta, tb, tc, strict=True):
        for a, b, c in zip(fa, fb, fc, strict=True):
            if exact and not _close(b - a, c - b):
                return None
        grown.append((fc[0] + extra * (fc[0] - fb[0]), fc[1] + extra * (fc[1] - fb[1])))
    return tuple(grown)


def _layer_ends(
    entries_c: tuple[tuple[int, float], ...], step: float, extra: int, chunk: Chunk
) -> tuple[tuple[int, float], ...] | None:
    """Per-layer end times of the whole chunk from the widest sample's, or None.

    The sample's transformer layers appear in one direction (ascending in a forward,
    descending in a backward), each ``step`` after the previous from the second on; the whole
    chunk's appear in the same direction with the same spacing, except that the last keeps
    its distance from the action's end (a transient there, such as a collective of the
    previous layer still slowing it, stays with the last layer). The head and embedding
    entries keep their place: before the layers as they are, after them shifted by the
    added layers.
    """
    sampled = chunk.probe
    entries = list(entries_c)
    at = [i for i, (layer, _) in enumerate(entries) if layer in sampled]
    if len(at) != len(sampled) or at != list(range(at[0], at[0] + len(at))):
        return None
    times = [entries[i][1] for i in at]
    descending = entries[at[0]][0] == sampled[-1]
    positions = range(len(chunk.layers))
    order = reversed(positions) if descending else iter(positions)
    last = len(chunk.layers) - 1
    ends = [
        (layer, times[0] if j == 0 else times[-1] + extra * step if j == last
         else times[1] + (j - 1) * step)
        for j, layer in enumerate(order)
    ]  # fmt: skip
    before = entries[: at[0]]
    after = [(layer, end + extra * step) for layer, end in entries[at[-1] + 1 :]]
    return tuple([*before, *ends, *after])
