"""Communication hidden behind compute: one mechanism, and the overlaps a stack selects.

**The mechanism.** A communication op declares the compute it hides behind: ``Op.overlap_ops``
compute ops that follow it in its rank's op sequence run while it is in flight, and the first
compute op past that window waits for it (:mod:`simtrain.parallel.segments`). Collectives run
on streams of their own, so a collective whose producer is done starts at once. The engine
(:func:`simtrain.engine.core.execute`) slows compute that runs while a collective of its rank
is in flight to what the SMs the collective leaves can do (``collective_sms`` of the
accelerator's calibration; not for a transfer the copy engines move, ``Op.copy_engine``): an
overlap hides a transfer, not for free. Without an overlap, the compute after a collective
waits for it, and the step pays compute plus communication.

**The overlaps**, each declared by the stack's framework profile (``overlaps:``) and
overridable per experiment (``parallel.*``):

- data-parallel gradient reduction (``overlap_grad_reduce``): bucketed reductions on a stream
  of their own as soon as a bucket's weight gradients exist (the builder's gradient reducer);
- ZeRO-1/2 parameter all-gather (``overlap_param_gather``): instead of after the optimizer,
  layer by layer ahead of the next step's first forward, each layer waiting for its own;
- context-parallel ring attention: each K/V transfer runs under the attention block before it
  (:mod:`simtrain.workload.attention`);
- tensor-parallel communication (``tp_comm_overlap``, :func:`tp_overlapped`): ``none``
  (exposed), ``wgrad`` (the input-gradient reduction under the weight-gradient GEMM,
  Megatron's asynchronous TP) or ``gemm`` (additionally, every sequence-parallel all-gather
  and reduce-scatter cut into ``tp`` chunks pipelined with the GEMM that consumes or produces
  it, as TransformerEngine's userbuffers do, or as PyTorch's symmetric-memory async TP does
  under a profile with ``overlaps.tp_comm_impl: symmetric_memory``: copy-engine transfers,
  which slow no compute, a shard copy and a sum of partials around them, and only the
  reduce-scatters fed by one matmul decomposed);
- two-microbatch overlap (``overlap_ep_comm``, :func:`feasible_steps`): a forward and a backward
  of different microbatches run interleaved, so that the expert all-to-alls (and any other
  blocking collective) of one run under the compute of the other: DualPipe's overlapped
  forward-backward chunks and Megatron-Core's combined 1F1B (``--overlap-moe-expert-parallel-
  comm``);
- pipeline send/receive (``overlap_p2p_comm``): asynchronous sends; without it the sender's
  next compute waits until its send is done (Megatron's blocking ``send_forward_recv_backward``).

What a stack performs is in ``docs/references/frameworks.md`` and each profile's sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from simtrain.parallel.schedules import get_schedule
from simtrain.parallel.schedules.base import Action
from simtrain.parallel.schedules.one_f_one_b import one_f_one_b_rank
from simtrain.specs.parallel import ParallelSpec
from simtrain.workload.ops import Op
from simtrain.workload.primitives import FP8_DTYPES, memory_op

TP_CHUNKED = frozenset({"all_gather", "reduce_scatter"})
"""Tensor-parallel collectives that userbuffers pipelines with a GEMM (sequence parallelism)."""


def _chunk_gemm(op: Op, chunks: int, sm_target: bool = True) -> tuple[Op, Op]:
    """A GEMM split along its token rows (M) into one chunk and the other ``chunks - 1``.

    The ``chunks - 1`` run as one op of ``batch`` c-1 GEMMs of M/c rows (each chunk is a GEMM
    of its own shape); FLOPs and bytes add up to the original's. With ``sm_target`` both are
    launched for the SMs the communication leaves (TransformerEngine passes cuBLAS an
    SM-count target when it overlaps a GEMM with userbuffers communication).
    """
    rows = op.m // chunks
    rest_rows = op.m - rows * (chunks - 1)
    share = rows * (chunks - 1) / op.m
    many = replace(
        op,
        m=rows,
        batch=op.batch * (chunks - 1),
        flops=op.flops * share,
        bytes_accessed=op.bytes_accessed * share,
        sm_target=sm_target or op.sm_target,
    )
    one = replace(
        op,
        m=rest_rows,
        flops=op.flops * (1 - share),
        bytes_accessed=op.bytes_accessed * (1 - share),
        sm_target=sm_target or op.sm_target,
    )
    return one, many


def _split_comm(op: Op, chunks: int, overlap_many: int, overlap_one: int) -> tuple[Op, Op]:
    """A collective split into its first ``chunks - 1`` chunks and its last one."""
    share = (chunks - 1) / chunks
    many = replace(op, name=f"{op.name}_chunks", comm_bytes=op.comm_bytes * share)
    one = replace(op, name=f"{op.name}_last", comm_bytes=op.comm_bytes * (1 - share))
    return replace(many, overlap_ops=overlap_many), replace(one, overlap_ops=overlap_one)


def _next_gemm(ops: Sequence[Op], start: int) -> int | None:
    """Index of the GEMM at or after ``start`` past elementwise casts only, or None."""
    for index in range(start, len(ops)):
        op = ops[index]
        if op.kind == "gemm":
            return index
        if op.kind != "elementwise" or not op.name.endswith("cast"):
            return None
    return None


TpCommImpl = Literal["userbuffers", "symmetric_memory"]
"""How a stack realises ``tp_comm_overlap: gemm`` (a profile's ``overlaps.tp_comm_impl``)."""


def tp_overlapped(
    ops: Sequence[Op],
    mode: str,
    tp: int,
    num_layers: int,
    impl: TpCommImpl = "userbuffers",
    fp8_gathers: bool = False,
    summed_dgrads: frozenset[str] = frozenset(),
) -> list[Op]:
    """``ops`` with their tensor-parallel collectives overlapped as ``mode`` says.

    ``wgrad`` is how the workload emits them (each input-gradient reduction overlaps the
    weight-gradient GEMMs after it); ``none`` removes that overlap; ``gemm`` pipelines the
    transformer layers' all-gathers with the GEMM after them and their reduce-scatters with
    the GEMM before them, in ``tp`` chunks, as ``impl`` does it.

    ``userbuffers`` (TransformerEngine):

    - all-gather then GEMM: the GEMM's first chunk needs only the rank's own shard, so
      ``[AG, G]`` becomes ``[AG (under G's first c-1 chunks), G chunks 1..c-1, G chunk c]``:
      time ``(c-1)·max(a, g) + g`` for a chunk transfer ``a`` and a chunk GEMM ``g``;
    - GEMM then reduce-scatter: ``[G, RS]`` becomes ``[G chunk 1, RS of chunks 1..c-1
      (under G chunks 2..c), G chunks 2..c, RS of the last chunk]``: ``g + (c-1)·max(a, g) +
      a``; the last chunk keeps the reduce-scatter's own overlap (the weight-gradient GEMM in
      the backward).

    ``symmetric_memory`` (PyTorch's async TP, ``torch.distributed._symmetric_memory``
    ``fused_all_gather_matmul`` / ``fused_matmul_reduce_scatter`` inserted by Inductor's
    micro-pipeline TP pass; docs/references/frameworks.md §Async TP in PyTorch):

    - all-gather then GEMM as above, after the rank copies its own shard into its symmetric
      buffer and all ranks meet at a barrier, before the first chunk (not overlapped, by
      design): a copy of ``2·S/c`` bytes for a gather of ``S``;
    - GEMM then reduce-scatter: each rank computes the partial result of every other rank's
      rows and the peers pull them (``c - 1`` chunks, the whole transfer under the GEMM's
      chunks 2..c, its own chunk last), then sums the ``c`` partials it holds: ``[G chunk 1,
      RS (under G chunks 2..c), G chunks 2..c, sum]``, the sum reading ``S`` and writing
      ``S/c`` bytes, exposed; no overlap with the weight-gradient GEMM (the fused op returns
      the reduced output);
    - only a reduce-scatter whose input is one matmul's output is fused: the input gradients
      of the GEMMs in ``summed_dgrads`` are sums of several linears' (torchtitan's separate
      ``wq``/``wk``/``wv`` and ``w1``/``w3``), so their reduce-scatters stay plain, exposed
      collectives.

    With ``fp8_gathers`` (or under ``gemm``), an all-gather whose GEMM runs in FP8 moves the
    8-bit copy: the stack casts before gathering (TransformerEngine; torchao's Float8 tensor
    parallelism). The embedding and the LM head keep their collectives as they are; without
    sequence parallelism (all-reduces) ``gemm`` behaves as ``wgrad``.

    Examples:
        >>> from simtrain.workload.primitives import collective, gemm
        >>> ag = collective("ag", "all_gather", "tp", "fwd", 8e6, 0)
        >>> ops = [ag, gemm("fc1", "fwd", 4096, 1024, 512, 2, 0)]
        >>> [(o.name, o.m, o.batch, o.overlap_ops) for o in tp_overlapped(ops, "gemm", 4, 1)]
        [('ag', 0, 1, 1), ('fc1', 1024, 3, 0), ('fc1', 1024, 1, 0)]
        >>> out = tp_overlapped(ops, "gemm", 4, 1, "symmetric_memory")
        >>> [(o.name, o.bytes_accessed, o.overlap_ops) for o in out if o.kind != "gemm"]
        [('ag_shard_copy', 4000000.0, 0), ('ag', 0.0, 1)]
    """
    if tp == 1:
        return list(ops)
    if fp8_gathers or mode == "gemm":
        ops = _eight_bit_gathers(ops, num_layers)
    if mode == "wgrad":
        return list(ops)
    if mode == "none":
        return [replace(op, overlap_ops=0) if op.axis == "tp" else op for op in ops]
    symmetric = impl == "symmetric_memory"
    out: list[Op] = []
    index = 0
    while index < len(ops):
        op = ops[index]
        in_layer = 0 <= op.layer < num_layers
        if op.axis == "tp" and op.comm in TP_CHUNKED and in_layer:
            if op.comm == "all_gather":
                target = _next_gemm(ops, index + 1)
                if target is not None:
                    one, many = _chunk_gemm(ops[target], tp, not symmetric)
                    out += ops[index + 1 : target]
                    if symmetric:
                        out.append(_tp_memory_op(op, "shard_copy", 2 * op.comm_bytes / tp))
                    out += [replace(op, overlap_ops=1, copy_engine=symmetric), many, one]
                    index = target + 1
                    continue
            elif out and out[-1].kind == "gemm" and symmetric:
                if out[-1].name in summed_dgrads:
                    out.append(replace(op, overlap_ops=0))
                else:
                    first, rest = _chunk_gemm(out.pop(), tp, sm_target=False)
                    partials = op.comm_bytes * (1 + 1 / tp)
                    out += [first, replace(op, overlap_ops=1, copy_engine=True), rest]
                    out.append(_tp_memory_op(op, "partial_sum", partials))
                index += 1
                continue
            elif out and out[-1].kind == "gemm":
                first, rest = _chunk_gemm(out.pop(), tp)
                many, last = _split_comm(op, tp, 1, op.overlap_ops)
                out += [first, many, rest, last]
                index += 1
                continue
        out.append(op)
        index += 1
    return _sm_targeted(out)


def _tp_memory_op(collective_op: Op, what: str, size: float) -> Op:
    """A memory-bound kernel of a decomposed collective, in its phase and layer."""
    name = f"{collective_op.name}_{what}"
    return memory_op(name, "elementwise", collective_op.phase, size, collective_op.layer)


def _eight_bit_gathers(ops: Sequence[Op], num_layers: int) -> list[Op]:
    """``ops`` with each layer's TP all-gather that feeds an FP8 GEMM moving 8-bit data."""
    out = list(ops)
    for index, op in enumerate(ops):
        if op.axis != "tp" or op.comm != "all_gather" or not 0 <= op.layer < num_layers:
            continue
        target = _next_gemm(ops, index + 1)
        if target is not None and ops[target].dtype in FP8_DTYPES:
            out[index] = replace(op, comm_bytes=op.comm_bytes / 2)
    return out


def _sm_targeted(ops: list[Op]) -> list[Op]:
    """``ops`` with every GEMM that runs under a tensor-parallel collective marked ``sm_target``.

    Under userbuffers, TransformerEngine launches the GEMMs it overlaps (the pipelined chunks
    and the bulk overlaps of the backward) for the SMs the communication leaves.
    """
    out = list(ops)
    for index, op in enumerate(ops):
        if op.axis != "tp" or not op.overlap_ops or op.copy_engine:
            continue
        for follower in range(index + 1, min(index + 1 + op.overlap_ops, len(out))):
            if out[follower].kind == "gemm" and not out[follower].sm_target:
                out[follower] = replace(out[follower], sm_target=True)
    return out


def paired_steps(actions: Sequence[Action]) -> list[tuple[Action, ...]]:
    """Group a rank's actions into steps; a forward followed by an independent backward pair up.

    Paired actions run interleaved (two-microbatch overlap). A pair needs the backward to be
    of another microbatch or stage than the forward (a backward of the same microbatch and
    stage depends on that forward). DualPipe's overlapped chunks are exactly the F-then-B
    neighbours of its lists (``deepseek-ai/DualPipe``, phases 4 and 5); in 1F1B they are the
    steady state's F(j + warm-up) B(j).

    Examples:
        >>> acts = [Action(0, "F", 0), Action(0, "F", 1), Action(0, "B", 0), Action(0, "B", 1)]
        >>> [[str(a) for a in step] for step in paired_steps(acts)]
        [['0F0'], ['0F1', '0B0'], ['0B1']]
    """
    steps: list[tuple[Action, ...]] = []
    index = 0
    while index < len(actions):
        action = actions[index]
        following = actions[index + 1] if index + 1 < len(actions) else None
        if (
            action.kind == "F"
            and following is not None
            and following.kind == "B"
            and (following.stage, following.microbatch) != (action.stage, action.microbatch)
        ):
            steps.append((action, following))
            index += 2
            continue
        steps.append((action,))
        index += 1
    return steps


SendKey = tuple[str, int, int]  # (kind, chunk, microbatch) of the action that sends


def received(action: Action, num_chunks: int) -> SendKey | None:
    """The transfer ``action`` waits for, if any.

    The previous stage's activations for a forward, the next stage's gradients for a backward
    (the builder's ``F{c-1}`` / ``B{c+1}`` keys).
    """
    if action.kind == "F" and action.stage > 0:
        return ("F", action.stage - 1, action.microbatch)
    if action.kind == "B" and action.stage < num_chunks - 1:
        return ("B", action.stage + 1, action.microbatch)
    return None


def sent(action: Action, num_chunks: int) -> SendKey | None:
    """The transfer ``action`` sends once done (to the next or previous stage), if any."""
    if action.kind == "F" and action.stage < num_chunks - 1:
        return ("F", action.stage, action.microbatch)
    if action.kind == "B" and action.stage > 0:
        return ("B", action.stage, action.microbatch)
    return None


def feasible_steps(
    actions_by_rank: dict[int, list[Action]], num_chunks: int, pair: bool = True
) -> tuple[dict[int, list[tuple[Action, ...]]], list[tuple[int, int]]]:
    """Each pipeline rank's steps (:func:`paired_steps`), minus the pairs that cannot run.

    Returns the steps of each rank and an order in which they can run: (rank, step index),
    ranks advancing in turn as far as their received transfers allow. Without ``pair`` every
    action is a step of its own.

    A paired step runs its forward and backward interleaved, so it needs the transfers of both
    before it can finish. A pair whose backward waits, through the other ranks, on its own
    forward never can: GPipe pairs a rank's last forward with its first backward, whose
    gradients come back only after that forward reached the last stage. Ranks advance in turn
    as far as their received transfers allow; when none can, the lowest rank's blocked pair
    runs as two steps. Schedules whose pairs all run (1F1B, DualPipe) are left as
    :func:`paired_steps` groups them.

    Raises:
        ValueError: the transfers form a cycle even without pairs (a bug in the schedule).
    """
    steps = {
        rank: paired_steps(actions) if pair else [(a,) for a in actions]
        for rank, actions in actions_by_rank.items()
    }
    ranks = sorted(steps)
    position = dict.fromkeys(ranks, 0)
    done: set[SendKey] = set()
    order: list[tuple[int, int]] = []
    while True:
        progress = False
        for rank in ranks:
            rank_steps, s = steps[rank], position[rank]
            while s < len(rank_steps):
                waits = (received(a, num_chunks) for a in rank_steps[s])
                if any(w is not None and w not in done for w in waits):
                    break
                done.update(k for a in rank_steps[s] if (k := sent(a, num_chunks)) is not None)
                order.append((rank, s))
                s += 1
                progress = True
            position[rank] = s
        if all(position[rank] == len(steps[rank]) for rank in ranks):
            return steps, order
        if progress:
            continue
        blocked = [
            r for r in ranks if position[r] < len(steps[r]) and len(steps[r][position[r]]) == 2
        ]
        if not blocked:
            raise ValueError("the schedule's transfers form a cycle (a bug in the schedule)")
        rank, s = blocked[0], position[blocked[0]]
        forward, backward = steps[rank][s]
        steps[rank][s : s + 1] = [(forward,), (backward,)]


def step_actions(parallel: ParallelSpec) -> dict[int, list[Action]]:
    """Every pipeline rank's actions for one step, as the stack orders them.

    One stage is gradient accumulation (1F1B with one rank). Under the two-microbatch overlap
    a 1F1B rank warms up one microbatch more, so that its steady-state forwards and backwards
    are of different microbatches and pair up (:func:`paired_steps`).
    """
    p = parallel
    name = p.pipeline_schedule if p.pp > 1 else "1f1b"
    return schedule_actions(name, p.pp, p.num_microbatches, p.vpp, bool(p.overlap_ep_comm))


def schedule_actions(
    name: str, pp: int, num_microbatches: int, vpp: int, paired: bool
) -> dict[int, list[Action]]:
    """The action lists of schedule ``name`` (with one more warm-up forward for a paired 1F1B).

    What :func:`step_actions` returns for a parallel setting, from its scheduling fields alone
    (the analytical estimator compiles schedules from these).
    """
    if name == "1f1b" and paired:
        return {
            rank: one_f_one_b_rank(rank, pp, num_microbatches, extra_warmup=1) for rank in range(pp)
        }
    return get_schedule(name)(pp, num_microbatches, vpp)
