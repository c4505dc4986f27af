"""Does caching-allocator fragmentation explain torchtitan's reserved memory? (issue 13)

Builds a tensor-level allocation trace of one pipeline rank of each torchtitan run with
reported memory (:func:`experiments.calibration.stacks.torchtitan_memory_rows`), replays it
through PyTorch's caching allocator (`caching_allocator.py` next to it, fixed segments and
``expandable_segments``) and prints, per run, the measured peak, simtrain's estimate, the
replay's allocated and reserved peaks and what simtrain would give if the replay's
fragmentation (reserved - allocated) replaced its allocator terms (the loss-cache block)::

    PYTHONPATH=. python experiments/calibration/allocator_replay.py [--rows 405b ...] [--steps 2]

Nothing is fitted. The trace is this script's reading of what the stack allocates, the same
for every run (docs/references/frameworks.md §torchtitan, §FSDP2 under pipeline parallelism,
§Pipeline receive buffers and outputs, §Caching allocator rules); it is eager PyTorch op by
op, also for the compiled runs, whose fused kernels allocate fewer intermediates:

- model states: per parameter, the fp32 shard (the master) and Adam's two moments, over the
  FSDP group (dp x cp), allocated first and kept;
- FSDP2 gathers a unit (a block, or the root: embedding, final norm, LM head) into a flat
  buffer on its all-gather stream, then into one 16-bit (FP8 for linear weights when the run
  gathers in FP8) tensor per parameter; without pipelining it reshards after each block's
  forward and backward, with pipelining it gathers once per step and reshards after the
  last backward;
- a block's forward (torchtitan's Llama: RMSNorm via fp32, the sequence-parallel gather under
  TP, Q/K/V, repeat_kv, attention and its log-sum-exp, the output projection and its
  reduce-scatter, the residual, the gated MLP) frees everything but its output under full
  recomputation; per-operator recomputation keeps Q, V, the attention output, w1's and w2's
  outputs; the backward recomputes the rest, then allocates the gradients layer by layer;
- a block's 16-bit weight gradients are reduce-scattered after its backward (fp32 input on
  the reduce-scatter stream, fp32 shard out) or, under pipelining, added into fp32 unsharded
  accumulators until the last microbatch;
- pipelining: one receive buffer per microbatch and stage (kept across steps), the stage
  output kept until its backward, the last stage's 16-bit logits kept until the step ends;
  the loss allocates fp32 copies (forward) and fp32 gradients (backward) of the logits.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from experiments.calibration.caching_allocator import Alloc, AllocatorReplay, Free, replay
from experiments.calibration.stacks import MemoryRow, torchtitan_memory_rows
from simtrain.memory import estimate_memory
from simtrain.memory.model_states import rank_stages
from simtrain.parallel.overlap import step_actions
from simtrain.parallel.stages import chunk_layers
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import experiment_from_dict

GIB = 2**30
COMPUTE, ALL_GATHER, REDUCE_SCATTER = 0, 1, 2  # streams


@dataclass(frozen=True)
class Shape:
    """The sizes one rank's trace needs (elements per TP rank unless said)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tp: int
    shard: int  # FSDP group: dp x cp
    tokens: int  # tokens of one microbatch on this rank (a CP rank holds seq / cp)
    weight_bytes: int  # gathered linear weights: 1 in FP8, 2 otherwise
    per_op: bool

    @classmethod
    def of(cls, spec: ExperimentSpec) -> Shape:
        """The shape of ``spec``'s ranks."""
        m, p = spec.model, spec.parallel
        heads = m.num_heads
        return cls(
            hidden=m.hidden_size,
            heads=heads,
            kv_heads=m.num_kv_heads or heads,
            head_dim=m.head_dim or m.hidden_size // heads,
            ffn=m.ffn_hidden_size or 4 * m.hidden_size,
            vocab=m.vocab_size,
            tp=p.tp,
            shard=(p.dp or 1) * p.cp,
            tokens=p.micro_batch_size * m.seq_length // p.cp,
            weight_bytes=1 if spec.training.dtype == "fp8" else 2,
            per_op=p.recompute == "per_op",
        )

    @property
    def block_bytes(self) -> tuple[int, int, int, int, int]:
        """A block's tensor sizes: local and gathered hidden states, queries, keys/values, MLP."""
        return self.local_bytes, self.gathered_bytes, self.q_bytes, self.kv_bytes, self.mlp_bytes

    @property
    def local_bytes(self) -> int:
        """A 16-bit hidden-state tensor of the rank (sequence-split under TP)."""
        return self.tokens * self.hidden // self.tp * 2

    @property
    def gathered_bytes(self) -> int:
        """The same gathered over TP (0 without TP: no gather)."""
        return self.tokens * self.hidden * 2 if self.tp > 1 else 0

    @property
    def q_bytes(self) -> int:
        """Queries (or the attention output) of the rank's heads, 16-bit."""
        return self.tokens * self.heads * self.head_dim // self.tp * 2

    @property
    def kv_bytes(self) -> int:
        """Keys or values before ``repeat_kv``, 16-bit."""
        return self.tokens * self.kv_heads * self.head_dim // self.tp * 2

    @property
    def mlp_bytes(self) -> int:
        """One MLP intermediate of the rank, 16-bit."""
        return self.tokens * self.ffn // self.tp * 2

    def block_params(self) -> dict[str, int]:
        """A block's parameters on one TP rank (the norms are replicated)."""
        h, t = self.hidden, self.tp
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {
            "wq": h * q // t,
            "wk": h * kv // t,
            "wv": h * kv // t,
            "wo": q * h // t,
            "w1": h * self.ffn // t,
            "w3": h * self.ffn // t,
            "w2": self.ffn * h // t,
            "attention_norm": h,
            "ffn_norm": h,
        }


class Trace:
    """Events in program order; frees of tensors not alive are dropped."""

    def __init__(self) -> None:
        self.events: list[Alloc | Free] = []
        self._live: set[object] = set()

    def alloc(self, key: object, size_bytes: float, stream: int = COMPUTE) -> None:
        """Allocate ``key`` (nothing for an empty tensor)."""
        assert key not in self._live, key
        if size_bytes > 0:
            self.events.append(Alloc(key, int(size_bytes), stream))
            self._live.add(key)

    def ensure(self, key: object, size_bytes: float, stream: int = COMPUTE) -> None:
        """Allocate ``key`` unless it is alive (a tensor accumulated into)."""
        if key not in self._live:
            self.alloc(key, size_bytes, stream)

    def free(self, *keys: object) -> None:
        """Free the ``keys`` that are alive."""
        for key in keys:
            if key in self._live:
                self._live.remove(key)
                self.events.append(Free(key))


def block_forward(trace: Trace, s: Shape, tag: object) -> None:
    """Allocate a block's forward tensors under ``tag`` (freed by the caller)."""
    a = trace.alloc
    local, gathered, q, kv, mlp = s.block_bytes
    a((tag, "norm1_fp32"), 2 * local)
    a((tag, "norm1"), local)
    trace.free((tag, "norm1_fp32"))
    a((tag, "gathered1"), gathered)
    for name, size in (("q", q), ("k", kv), ("v", kv), ("k_rep", q), ("v_rep", q), ("attn", q)):
        a((tag, name), size)
    a((tag, "lse"), s.tokens * s.heads // s.tp * 4)
    a((tag, "wo_partial"), gathered)
    a((tag, "wo"), local)
    trace.free((tag, "wo_partial"))
    a((tag, "residual"), local)
    trace.free((tag, "wo"))
    a((tag, "norm2_fp32"), 2 * local)
    a((tag, "norm2"), local)
    trace.free((tag, "norm2_fp32"))
    a((tag, "gathered2"), gathered)
    for name in ("w1", "w3", "silu", "prod"):
        a((tag, name), mlp)
    a((tag, "w2_partial"), gathered)
    a((tag, "w2"), local)
    trace.free((tag, "w2_partial"))


RECOMPUTED_PER_OP = ("norm1", "gathered1", "k", "k_rep", "v_rep", "residual", "norm2")
RECOMPUTED_PER_OP += ("gathered2", "w3", "silu", "prod")
"""What per-operator checkpointing drops after a block's forward (it keeps Q, V, the
attention output and log-sum-exp, w1 and w2)."""
FORWARD_ONLY = ("norm1", "gathered1", "q", "k", "v", "k_rep", "v_rep", "attn", "lse")
FORWARD_ONLY += ("residual", "norm2", "gathered2", "w1", "w3", "silu", "prod")


def recompute_per_op(trace: Trace, s: Shape, tag: object) -> None:
    """Re-allocate what per-operator checkpointing dropped, before a block's backward."""
    local, gathered, q, kv, mlp = s.block_bytes
    sizes = {"norm1": local, "gathered1": gathered, "k": kv, "k_rep": q, "v_rep": q}
    sizes |= {"residual": local, "norm2": local, "gathered2": gathered}
    sizes |= {"w3": mlp, "silu": mlp, "prod": mlp}
    for name in RECOMPUTED_PER_OP:
        trace.alloc((tag, name), sizes[name])


def block_backward(trace: Trace, s: Shape, tag: object, layer: int) -> None:
    """A block's backward: activation gradients come and go, weight gradients stay."""
    a, f = trace.alloc, trace.free
    local, q, kv, mlp = s.local_bytes, s.q_bytes, s.kv_bytes, s.mlp_bytes
    full = s.tokens * s.hidden * 2  # an activation gradient before its TP reduce-scatter
    params = s.block_params()

    def grad(name: str) -> None:
        a(("grad", ("block", layer), name), params[name] * 2)

    a(("d", "out_gathered"), full)
    a(("d", "prod"), mlp)
    grad("w2")
    f(("d", "out_gathered"), (tag, "prod"))
    a(("d", "silu"), mlp)
    a(("d", "w3"), mlp)
    f(("d", "prod"), (tag, "silu"))
    a(("d", "w1"), mlp)
    f(("d", "silu"), (tag, "w1"), (tag, "w3"))
    a(("d", "gathered2"), full)
    grad("w1")
    grad("w3")
    f(("d", "w1"), ("d", "w3"), (tag, "gathered2"))
    a(("d", "norm2"), local)
    f(("d", "gathered2"))
    grad("ffn_norm")
    a(("d", "residual"), local)
    f(("d", "norm2"), (tag, "norm2"))
    a(("d", "residual_gathered"), full)
    a(("d", "attn"), q)
    grad("wo")
    f(("d", "residual_gathered"))
    for name in ("q", "k_rep", "v_rep"):
        a(("d", name), q)
    f(("d", "attn"), (tag, "attn"), (tag, "lse"), (tag, "k_rep"), (tag, "v_rep"))
    a(("d", "k"), kv)
    a(("d", "v"), kv)
    f(("d", "k_rep"), ("d", "v_rep"))
    a(("d", "gathered1"), full)
    for name in ("wq", "wk", "wv"):
        grad(name)
    f(("d", "q"), ("d", "k"), ("d", "v"), (tag, "q"), (tag, "k"), (tag, "v"), (tag, "gathered1"))
    a(("d", "norm1"), local)
    f(("d", "gathered1"))
    grad("attention_norm")
    f(("d", "norm1"), (tag, "norm1"), (tag, "residual"), ("d", "residual"), (tag, "w2"))


def rank_trace(
    spec: ExperimentSpec, rank: int, steps: int, rs_stream: int = REDUCE_SCATTER
) -> list[Alloc | Free]:
    """Allocation events of pipeline rank ``rank`` over ``steps`` training steps.

    ``rs_stream`` is the stream FSDP2's reduce-scatter input and output are allocated on: its
    own (``REDUCE_SCATTER``) or the compute stream (``COMPUTE``); FSDP2 versions differ.
    """
    p, s = spec.parallel, Shape.of(spec)
    trace = Trace()
    a, f = trace.alloc, trace.free
    stages = rank_stages(p.pp, p.vpp, p.pipeline_schedule, rank)
    last = p.pp * p.vpp - 1
    chunks = chunk_layers(spec.model.num_layers, p.pp * p.vpp)
    zero3 = p.pp == 1  # torchtitan reshards after the forward only without pipelining
    local = s.local_bytes
    logits = s.tokens * s.vocab // s.tp

    units: dict[tuple[str, int], dict[str, int]] = {}  # ("block", layer) or ("root", stage)
    for stage in stages:
        for layer in chunks[stage]:
            units[("block", layer)] = s.block_params()
        root = {"embedding": s.vocab * s.hidden // s.tp} if stage == 0 else {}
        if stage == last:
            root |= {"norm": s.hidden, "output": s.vocab * s.hidden // s.tp}
        if root:
            units[("root", stage)] = root

    def stage_units(stage: int) -> list[tuple[str, int]]:
        blocks = [("block", layer) for layer in chunks[stage]]
        return [u for u in units if u == ("root", stage) or u in blocks]

    for unit, params in units.items():
        for name, size in params.items():
            for state in ("master", "exp_avg", "exp_avg_sq"):
                a(("state", unit, name, state), size * 4 / s.shard)

    def gathered_bytes(name: str, size: int) -> int:
        return size * (s.weight_bytes if name.startswith("w") else 2)

    def gather(unit: tuple[str, int]) -> None:
        params = units[unit]
        a(("flat", unit), sum(gathered_bytes(n, k) for n, k in params.items()), ALL_GATHER)
        for name, size in params.items():
            a(("unsharded", unit, name), gathered_bytes(name, size))
        f(("flat", unit))

    def reshard(unit: tuple[str, int]) -> None:
        f(*(("unsharded", unit, name) for name in units[unit]))

    def reduce_scatter(unit: tuple[str, int], source: str) -> None:
        params = units[unit]
        total = 4 * sum(params.values())
        a(("rs_input", unit), total, rs_stream)
        f(*((source, unit, name) for name in params))
        trace.ensure(("sharded_grad", unit), total / s.shard, rs_stream)  # to the optimizer
        f(("rs_input", unit))

    def unit_backward_done(unit: tuple[str, int], first: bool) -> None:
        """FSDP2's post-backward of a unit: reduce-scatter, or accumulate in fp32 under PP."""
        if zero3:
            reduce_scatter(unit, "grad")
            if unit[0] == "block":
                reshard(unit)
            return
        for name, size in units[unit].items():
            if first:
                a(("accumulated", unit, name), 4 * size)
            f(("grad", unit, name))

    if zero3:  # the root unit stays gathered (docs/references/frameworks.md §FSDP2 root unit)
        for unit in units:
            if unit[0] == "root":
                gather(unit)
    received: set[tuple[int, int]] = set()
    for _ in range(steps):
        gathered: set[int] = set()
        backwards = dict.fromkeys(stages, 0)
        for action in step_actions(p)[rank]:
            stage, mb = action.stage, action.microbatch
            if action.kind == "F":
                if not zero3 and stage not in gathered:
                    gathered.add(stage)
                    for unit in stage_units(stage):
                        gather(unit)
                if stage == 0:
                    a(("embedding_out", mb), local)
                elif (stage, mb) not in received:  # one receive buffer per microbatch, kept
                    received.add((stage, mb))
                    a(("recv", stage, mb), local)
                for layer in chunks[stage]:
                    tag = ("fwd", layer, mb)
                    if zero3:
                        gather(("block", layer))
                    block_forward(trace, s, tag)
                    a(("out", layer, mb), local)  # the next block's input, kept
                    if s.per_op:
                        f(*((tag, name) for name in RECOMPUTED_PER_OP))
                    else:
                        f(*((tag, name) for name in (*FORWARD_ONLY, "w2")))
                    if zero3:
                        reshard(("block", layer))
                if stage == last:
                    a(("final_norm", mb), 3 * local)  # fp32 input copy + normalised output
                    a(("head_input", mb), local * s.tp)
                    a(("logits", mb), 2 * logits)  # kept until the step ends
                    a(("loss_fp32", mb), 4 * logits)
                    a(("log_softmax", mb), 4 * logits)
                    f(("loss_fp32", mb))
            elif action.kind == "B":
                first = backwards[stage] == 0
                root = ("root", stage)
                if stage == last:
                    a(("dlogits_fp32", mb), 4 * logits)
                    a(("dlog_softmax", mb), 4 * logits)
                    f(("log_softmax", mb), ("dlogits_fp32", mb))
                    a(("dlogits", mb), 2 * logits)
                    f(("dlog_softmax", mb))
                    a(("d_head_input", mb), local * s.tp)
                    a(("grad", root, "output"), 2 * units[root]["output"])
                    a(("grad", root, "norm"), 2 * units[root]["norm"])
                    f(("dlogits", mb), ("head_input", mb), ("final_norm", mb))
                a(("dy", stage, mb), local)
                f(("d_head_input", mb), ("out", chunks[stage][-1], mb))
                dy: object = ("dy", stage, mb)
                for layer in reversed(chunks[stage]):
                    tag = ("fwd", layer, mb)
                    if zero3:
                        gather(("block", layer))
                    if s.per_op:
                        recompute_per_op(trace, s, tag)
                    else:
                        block_forward(trace, s, tag)
                    block_backward(trace, s, tag, layer)
                    a(("dx", layer, mb), local)
                    f(dy)
                    dy = ("dx", layer, mb)
                    if layer != chunks[stage][0]:
                        f(("out", layer - 1, mb))
                    unit_backward_done(("block", layer), first)
                if stage == 0:
                    a(("grad", root, "embedding"), 2 * units[root]["embedding"])
                    f(("embedding_out", mb))
                f(dy)
                if root in units:
                    unit_backward_done(root, first)
                backwards[stage] += 1
                if not zero3 and backwards[stage] == p.num_microbatches:
                    for unit in stage_units(stage):
                        reduce_scatter(unit, "accumulated")
                        reshard(unit)
        if last in stages:
            f(*(("logits", mb) for mb in range(p.num_microbatches)))
        f(*(("sharded_grad", unit) for unit in units))  # optimizer step, then zero_grad
    return trace.events


def replay_row(
    row: MemoryRow, steps: int, expandable: bool, rs_stream: int = REDUCE_SCATTER
) -> tuple[int, AllocatorReplay]:
    """The pipeline rank with the highest reserved peak, and its replay."""
    spec = experiment_from_dict(row.spec_dict, row.key)
    results = [
        (rank, replay(rank_trace(spec, rank, steps, rs_stream), expandable_segments=expandable))
        for rank in range(spec.parallel.pp)
    ]
    return max(results, key=lambda r: r[1].peak_reserved_bytes)


def main() -> None:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="*", default=[], help="run keys containing any of these")
    parser.add_argument("--steps", type=int, default=2, help="training steps to replay")
    parser.add_argument(
        "--rs-on-compute-stream",
        action="store_true",
        help="allocate FSDP2's reduce-scatter buffers on the compute stream",
    )
    args = parser.parse_args()
    rs_stream = COMPUTE if args.rs_on_compute_stream else REDUCE_SCATTER
    print(
        f"{'run':32s} {'meas':>5s} {'simtrain':>14s} {'alloc':>6s} {'fixed':>11s} "
        f"{'expandable':>11s}  {'simtrain - loss cache + expandable frag':>16s}"
    )
    for row in torchtitan_memory_rows():
        if args.rows and not any(k in row.key for k in args.rows):
            continue
        spec = experiment_from_dict(row.spec_dict, row.key)
        estimate = estimate_memory(spec, row.capacity_gib * GIB)
        _, fixed = replay_row(row, args.steps, False, rs_stream)
        _, grown = replay_row(row, args.steps, True, rs_stream)
        peak = estimate.peak_bytes / GIB
        cache = estimate.breakdown_bytes.get("overhead.loss_cache", 0.0) / GIB
        swapped = peak - cache + grown.fragmentation_bytes / GIB
        error = peak / row.measured_gib - 1
        print(
            f"{row.key:32s} {row.measured_gib:5.1f} {peak:5.1f} ({error:+6.1%})"
            f" {fixed.peak_allocated_bytes / GIB:6.1f}"
            f" {fixed.peak_reserved_bytes / GIB:5.1f} +{fixed.fragmentation_bytes / GIB:4.1f}"
            f" {grown.peak_reserved_bytes / GIB:5.1f} +{grown.fragmentation_bytes / GIB:4.1f}"
            f"  {swapped:5.1f} ({swapped / row.measured_gib - 1:+6.1%})"
        )


if __name__ == "__main__":
    main()
