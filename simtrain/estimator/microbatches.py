"""Microbatch counts of a shorter step whose time extrapolates to the whole step.

A pipeline schedule repeats once every stage is in its steady state, so a step's time is
linear in its microbatch count from there on. :class:`~simtrain.estimator.step.Estimator`
times three shorter steps (:func:`reduced_microbatches`), checks that they are linear, and
extends them to the full count (:func:`extend_samples`); a schedule that is not linear there
yet is tried with a longer warm-up (:data:`WARMUP_STAGES`) or chained in full.
"""

from __future__ import annotations

WARMUP_STAGES: dict[str, tuple[int, ...]] = {
    "default": (2, 6, 12),
    "zb-h1": (6, 12, 24),
    "zb-h2": (6, 12, 24),
}
"""Microbatches per pipeline stage before the reduced counts start, tried in turn until the
step is linear there: from 2 (the least DualPipe runs; the other schedules are periodic from
there). The zero-bubble schedules place their weight passes greedily and settle only after
about 5·pp microbatches, or more when the backward is much longer than the forward (full
recomputation); their first increments can repeat before changing, so they start at 6."""


def reduced_microbatches(pp: int, num_microbatches: int, warmup: int = 2) -> tuple[int, ...]:
    """Three smaller microbatch counts whose steps extrapolate to ``num_microbatches``, or ().

    Once every stage is in its steady state, each further group of microbatches adds the
    same time to the step (the schedule repeats), so the step is linear in the microbatch
    count along counts ``Δ = pp`` apart (a multiple of pp, as the interleaved schedule needs;
    even whenever DualPipe runs, which needs an even pp). The three counts are the first at least
    ``warmup·pp`` that are congruent to ``num_microbatches`` modulo Δ; () when that saves
    nothing. The caller checks that the three steps are linear, and tries a longer warm-up
    or the full count if not.

    Examples:
        >>> reduced_microbatches(4, 512)
        (8, 12, 16)
        >>> reduced_microbatches(4, 702)
        (10, 14, 18)
        >>> reduced_microbatches(4, 30)
        ()
    """
    delta = pp
    first = warmup * pp
    start = first + (num_microbatches - first) % delta
    counts = (start, start + delta, start + 2 * delta)
    return () if sum(counts) >= num_microbatches else counts


def extend_samples(
    samples: list[tuple[float, float, float, int]], counts: tuple[int, ...], target: int
) -> tuple[float, float, float, int] | None:
    """Extrapolate linear samples to ``target`` microbatches; None if they are not linear."""
    (a, b, c), delta = samples, counts[1] - counts[0]
    steps = (target - counts[2]) / delta
    out = []
    for i in range(3):
        inc1, inc2 = b[i] - a[i], c[i] - b[i]
        if abs(inc1 - inc2) > 1e-9 * max(1.0, abs(c[i])):
            return None
        out.append(c[i] + steps * inc2)
    return out[0], out[1], out[2], c[3] + round(steps * (c[3] - b[3]))
