"""Trace import and export: Chakra execution traces and PyTorch profiler (Kineto) traces.

Readers turn per-rank trace files into :class:`~simtrain.traceio.model.RankTrace` s (plain
data, checked against :mod:`~simtrain.traceio.limits`); :mod:`~simtrain.traceio.replay`
assembles them into a :class:`~simtrain.parallel.program.Program` the engine replays.
Every malformed input raises :class:`~simtrain.errors.TraceFormatError` naming the rank file
and the node id.
"""
