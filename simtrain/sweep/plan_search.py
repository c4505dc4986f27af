"""Stage 1 of a plan: the best layouts of each cluster size by the estimate (branch and bound).

:func:`search_sizes` is the task a plan's workers run (or the driver, for a small search):
it rebuilds the plan's experiments from plain data (:class:`PlanProblem`, :class:`_Layouts`)
and keeps, per size, the ``top`` layouts by estimated tokens/s that fit in memory
(:func:`_best_of_size`). It lives apart from :mod:`simtrain.sweep.planner` so that a
worker imports the estimator and the specs only, not the whole-run reliability model, the
sweep store or pandas.
"""

from __future__ import annotations

import bisect
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from simtrain.errors import SpecError
from simtrain.gcpause import cyclic_gc_paused
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.framework_resolve import resolve_framework_defaults
from simtrain.specs.model import ModelSpec
from simtrain.specs.parallel import ParallelSpec
from simtrain.specs.training import TrainingSpec
from simtrain.sweep.enumerate import config_key
from simtrain.sweep.search import ESTIMATED, Stage1
from simtrain.sweep.space import LayoutSpace


@dataclass(frozen=True)
class PlanProblem:
    """What a plan searches, as plain picklable data (stage-1 workers rebuild it).

    Attributes:
        model: the model section.
        cluster: the cluster section, without its size.
        sizes: cluster sizes to try.
        batch_tokens: target tokens per step.
        total_tokens: tokens of the run.
        space: the layouts of each size.
    """

    model: dict[str, Any]
    cluster: dict[str, Any]
    sizes: tuple[int, ...]
    batch_tokens: float
    total_tokens: float
    space: LayoutSpace

    @property
    def per_node(self) -> int:
        """GPUs per node of the cluster."""
        return int(self.cluster.get("gpus_per_node", 8))

    def points(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every (cluster size, layout), in a fixed order."""
        for n in self.sizes:
            for point in self.space.layouts(
                self.model, n, min(self.per_node, n), self.batch_tokens
            ):
                yield n, point

    def layouts(self) -> _Layouts:
        """The experiment builder of this problem."""
        model = ModelSpec.model_validate(self.model)
        return _Layouts(
            name=f"plan-{model.name}",
            model=model,
            training=TrainingSpec(dtype="bf16", total_tokens=float(self.total_tokens)),
            clusters={
                n: ClusterSpec.model_validate(
                    {**self.cluster, "num_gpus": n, "gpus_per_node": min(self.per_node, n)}
                )
                for n in self.sizes
            },
        )


_WORKER: dict[str, Any] = {}
"""The estimator and experiment builder of the plan a process is searching (see below)."""


def forget_search() -> None:
    """Drop the caches of the plan this process searched (the driver keeps none past it)."""
    _WORKER.clear()


def search_sizes(payload: dict[str, Any]) -> dict[str, Any]:
    """Stage-1 task: the best layouts of some cluster sizes by the estimate (runs in a worker).

    Payload: ``problem``, ``sizes``, ``top`` (layouts kept per size; None keeps every one
    that fits), ``version`` (of the store keys) and ``search`` (a token naming the plan: a
    worker keeps one estimator for all the sizes of a plan it is given, so that they share
    its caches: the compute model's op times, chunk ops, bounds). Returns, per size, the
    kept layouts as (store key, enumeration index, row) best first; the counts
    (``invalid``, ``estimated``, ``bounded``, ``memory_checked``, ``oom``, ``error``); and
    the smallest peak memory of the layouts found out of memory (None: none was).
    """
    with cyclic_gc_paused(freeze=True):  # the caches only grow, free of cycles
        problem: PlanProblem = payload["problem"]
        if _WORKER.get("search") != payload["search"]:  # a worker's tasks share its caches
            _WORKER.update(search=payload["search"], layouts=problem.layouts(), stage1=Stage1())
        layouts, stage1 = _WORKER["layouts"], _WORKER["stage1"]
        counts: Counter[str] = Counter()
        peaks: list[float] = []
        by_size: dict[int, list[tuple[int, dict[str, Any]]]] = {n: [] for n in payload["sizes"]}
        for index, (n, point) in enumerate(problem.points()):
            if n in by_size:
                by_size[n].append((index, point))
        top, version = payload["top"], payload["version"]
        kept = {
            n: _best_of_size(layouts, stage1, n, points, top, version, counts, peaks)
            for n, points in by_size.items()
        }
    return {"kept": kept, "counts": dict(counts), "min_peak": min(peaks, default=None)}


def _best_of_size(
    layouts: _Layouts,
    stage1: Stage1,
    n: int,
    points: list[tuple[int, dict[str, Any]]],
    top: int | None,
    version: str,
    counts: Counter[str],
    peaks: list[float],
) -> list[tuple[str, int, dict[str, Any]]]:
    """The ``top`` layouts of one size by tokens/s that fit in memory (branch and bound).

    Each layout's step time has a lower bound (its compute and pipeline fill alone:
    :meth:`~simtrain.estimator.Estimator.lower_bound`), hence its tokens/s an upper
    bound. Layouts are estimated from the highest bound down, and each that would enter
    the best ``top`` so far is checked for memory. Once a layout's bound cannot beat the
    ``top``-th best that fits, no later one's can: they are counted ``bounded`` and not
    estimated. A layout whose actions' walks already show it slower than that (a second
    bound: :meth:`~simtrain.estimator.Estimator.estimate_within`) is counted ``bounded``
    too, its estimate left half done. The result is the one estimating every layout would
    give (ties: enumeration order).
    """
    estimator = stage1.estimator
    queue: list[tuple[float, int, ExperimentSpec]] = []
    for index, point in points:
        try:
            spec = layouts.spec(n, point)
        except SpecError:
            counts["invalid"] += 1
            continue
        except Exception:  # a rule that crashes is a bug elsewhere: counted, the search goes on
            counts["error"] += 1
            continue
        try:
            bound = _tokens(spec) / (estimator.lower_bound(spec) * _BOUND_SLACK)
        except Exception:  # a layout the estimator cannot time: counted, the search goes on
            counts["error"] += 1
            continue
        queue.append((-bound, index, spec))
    queue.sort(key=lambda entry: entry[:2])
    best: list[tuple[float, int, str, dict[str, Any]]] = []  # (-tokens/s, index, key, row)
    for position, (negative_bound, index, spec) in enumerate(queue):
        if top is not None and len(best) >= top and (negative_bound, index) > best[-1][:2]:
            counts["bounded"] += len(queue) - position
            break
        limit = None  # a step time that cannot enter the best kept (with rounding's margin)
        if top is not None and len(best) >= top:
            limit = _tokens(spec) / (-best[-1][0] * _BOUND_SLACK)
        try:
            estimate = estimator.estimate_within(spec, limit)
        except Exception:  # a layout the estimator cannot time: counted, the search goes on
            counts["error"] += 1
            continue
        if estimate is None:  # its walked actions alone are too slow already
            counts["bounded"] += 1
            continue
        counts["estimated"] += 1
        entry = (-_tokens(spec) / estimate.step_time_s, index)
        if top is not None and len(best) >= top and entry > best[-1][:2]:
            continue
        key = config_key(spec, version)
        row = stage1.evaluate(key, spec, estimate)
        counts["memory_checked"] += 1
        if row["status"] == "oom":
            counts["oom"] += 1
            peaks.append(row["peak_memory_bytes"])
        elif row["status"] == ESTIMATED:
            bisect.insort(best, (*entry, key, row))
            del best[len(best) if top is None else top :]
        else:
            counts["error"] += 1
    return [(key, index, row) for _, index, key, row in best]


_BOUND_SLACK = 1.0 - 1e-9
"""The lower bound is shaded by rounding's worth, so that it never exceeds an estimate."""


def _tokens(spec: ExperimentSpec) -> float:
    """Tokens per step."""
    return spec.parallel.global_batch_size * spec.model.seq_length


@dataclass
class _Layouts:
    """Builds a plan's experiments cheaply: the fixed sections validated once (internal)."""

    name: str
    model: ModelSpec
    training: TrainingSpec
    clusters: dict[int, ClusterSpec]
    stacks: dict[str, TrainingSpec] = field(default_factory=dict)

    def spec(self, num_gpus: int, point: dict[str, Any]) -> ExperimentSpec:
        """The experiment of one layout (raises SpecError when the spec's rules reject it)."""
        parallel = {
            k.removeprefix("parallel."): v for k, v in point.items() if k.startswith("parallel.")
        }
        framework = point.get("training.framework", self.training.framework)
        training = self.stacks.get(framework)
        if training is None:
            # resolved once (attention kernel, execution mode, ... from the stack's profile),
            # so that every layout shares the one section
            data = {"training": {**self.training.model_dump(), "framework": framework}}
            training = self.stacks[framework] = TrainingSpec.model_validate(
                resolve_framework_defaults(data)["training"]
            )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a search crosses settings on purpose
                return ExperimentSpec.model_validate(
                    {
                        "name": self.name,
                        "model": self.model,
                        "parallel": ParallelSpec.model_validate(parallel),
                        "cluster": self.clusters[num_gpus],
                        "training": training,
                    }
                )
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise SpecError(str(exc)) from None
