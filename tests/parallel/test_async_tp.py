"""PyTorch's async TP (symmetric memory) and torchao's 8-bit TP all-gathers, in closed form.

``tp_comm_overlap: gemm`` under a profile with ``overlaps.tp_comm_impl: symmetric_memory``
(torchtitan) decomposes the operators as ``torch.distributed._symmetric_memory`` runs them
(docs/references/frameworks.md §Async TP in PyTorch): a shard copy before each fused
all-gather, a sum of the partials after each fused reduce-scatter, copy-engine transfers, and
the reduce-scatters fed by a sum of matmuls left as plain collectives.
"""

from __future__ import annotations

import pytest

from simtrain.parallel.builder import chunk_ops, make_shard
from simtrain.parallel.overlap import tp_overlapped
from simtrain.workload.primitives import collective, gemm
from tests.conftest import LLAMA_TINY, make_experiment
from tests.parallel.test_overlap import TP_CASE, replay, sums

TP = 4
SIZE = 8e6  # bytes of the gathered input / of the reduce-scatter's input


def _ops(dtype: str = "") -> list:
    ag = collective("attn_all_gather", "all_gather", "tp", "fwd", SIZE, 0)
    qkv = gemm("qkv", "fwd", 4096, 1024, 512, 2, 0, dtype=dtype)
    out = gemm("attn_out", "fwd", 4096, 512, 1024, 2, 0, dtype=dtype)
    rs = collective("attn_reduce_scatter", "reduce_scatter", "tp", "fwd", SIZE, 0)
    return [ag, qkv, out, rs]


def test_fused_all_gather_copies_the_shard_first_and_pulls_by_copy_engine():
    ops = _ops()
    out = tp_overlapped(ops, "gemm", TP, 1, "symmetric_memory")
    names = [op.name for op in out]
    assert names[:4] == ["attn_all_gather_shard_copy", "attn_all_gather", "qkv", "qkv"]
    copy, gather, many, one = out[:4]
    assert copy.bytes_accessed == pytest.approx(2 * SIZE / TP)  # read and write one shard
    assert (gather.comm_bytes, gather.overlap_ops, gather.copy_engine) == (SIZE, 1, True)
    assert (many.m, many.batch, one.m, one.batch) == (1024, TP - 1, 1024, 1)
    assert not many.sm_target and not one.sm_target  # cuBLAS launches for the whole device
    assert many.flops + one.flops == pytest.approx(ops[1].flops)


def test_fused_reduce_scatter_sums_its_partials_after_one_transfer():
    ops = _ops()
    out = tp_overlapped(ops, "gemm", TP, 1, "symmetric_memory")
    first, transfer, rest, partial_sum = out[4:]
    assert (first.name, first.batch, rest.name, rest.batch) == ("attn_out", 1, "attn_out", 3)
    assert first.flops + rest.flops == pytest.approx(ops[2].flops)
    # one transfer of every other rank's chunk (the same bytes as NCCL's), under chunks 2..c
    assert (transfer.comm_bytes, transfer.overlap_ops, transfer.copy_engine) == (SIZE, 1, True)
    # the tp partials it received (S in all) read, its own shard (S/tp) written
    assert partial_sum.name == "attn_reduce_scatter_partial_sum"
    assert partial_sum.bytes_accessed == pytest.approx(SIZE * (1 + 1 / TP))
    assert partial_sum.kind == "elementwise" and partial_sum.phase == "fwd"


def test_reduce_scatter_of_a_sum_of_matmuls_stays_a_plain_collective():
    rs = collective("attn_grad_reduce_scatter", "reduce_scatter", "tp", "bwd_input", SIZE, 0, 1)
    dgrad = gemm("qkv_dgrad", "bwd_input", 4096, 1024, 512, 2, 0)
    wgrad = gemm("qkv_wgrad", "bwd_weight", 1024, 512, 4096, 2, 0)
    summed = frozenset({"qkv_dgrad"})
    out = tp_overlapped([dgrad, rs, wgrad], "gemm", TP, 1, "symmetric_memory", False, summed)
    assert [op.name for op in out] == ["qkv_dgrad", "attn_grad_reduce_scatter", "qkv_wgrad"]
    assert out[0] == dgrad  # not chunked
    assert (out[1].overlap_ops, out[1].copy_engine) == (0, False)  # exposed, NCCL on the SMs
    # the same GEMM fed by one matmul is fused
    fused = tp_overlapped([dgrad, rs, wgrad], "gemm", TP, 1, "symmetric_memory")
    assert any(op.name.endswith("partial_sum") for op in fused)


def test_userbuffers_decomposition_is_unchanged():
    out = tp_overlapped(_ops(), "gemm", TP, 1)
    assert [op.name for op in out if op.is_comm] == [
        "attn_all_gather",
        "attn_reduce_scatter_chunks",
        "attn_reduce_scatter_last",
    ]
    assert all(op.sm_target for op in out if op.kind == "gemm")
    assert not any(op.copy_engine for op in out)
    assert not any(op.kind == "elementwise" for op in out)


@pytest.mark.parametrize("mode", ["none", "wgrad"])
def test_eight_bit_gathers_halve_only_gathers_into_fp8_gemms(mode):
    fp8 = tp_overlapped(_ops("fp8"), mode, TP, 1, fp8_gathers=True)
    assert fp8[0].comm_bytes == SIZE / 2  # the 1-byte copy
    assert fp8[3].comm_bytes == SIZE  # reduce-scatters stay 16-bit
    assert tp_overlapped(_ops(""), mode, TP, 1, fp8_gathers=True)[0].comm_bytes == SIZE
    assert tp_overlapped(_ops("fp8"), mode, TP, 1)[0].comm_bytes == SIZE


ASYNC = (*TP_CASE, "parallel.tp_comm_overlap=gemm")
TITAN = "training.framework=torchtitan"


def _layer_ops(*overrides: str):
    spec = make_experiment(*overrides, model=LLAMA_TINY)
    ops = chunk_ops(spec, make_shard(spec), range(1), False, False)
    return [*ops.forward, *ops.backward]


def test_torchtitan_layer_fuses_all_but_the_summed_input_gradients():
    ops = _layer_ops(*ASYNC, TITAN)
    fused = [op.name for op in ops if op.copy_engine]
    plain = [op.name for op in ops if op.axis == "tp" and op.is_comm and not op.copy_engine]
    # forward: both gathers and both reduce-scatters; backward: the output-gradient gathers
    assert sorted(fused) == sorted(
        [
            "attn_all_gather",
            "attn_reduce_scatter",
            "mlp_all_gather",
            "mlp_reduce_scatter",
            "mlp_grad_all_gather",
            "attn_grad_all_gather",
        ]
    )
    # wq/wk/wv and w1/w3 input gradients are summed before their reduce-scatters
    assert sorted(plain) == ["attn_grad_reduce_scatter", "mlp_grad_reduce_scatter"]
    sums = [op for op in ops if op.name.endswith("partial_sum")]
    copies = [op for op in ops if op.name.endswith("shard_copy")]
    assert len(sums) == 2 and len(copies) == 4
    # Megatron-Core's userbuffers on the same layer: no such ops, every collective on the SMs
    megatron = _layer_ops(*ASYNC)
    assert not any(op.copy_engine or op.name.endswith("partial_sum") for op in megatron)


def test_torchtitan_fp8_gathers_are_8_bit_without_async_tp():
    fp8 = ("training.dtype=fp8", "training.fp8_recipe=current")
    vanilla = (*TP_CASE, "parallel.tp_comm_overlap=none")
    titan = {op.name: op.comm_bytes for op in _layer_ops(*vanilla, TITAN, *fp8) if op.is_comm}
    megatron = {op.name: op.comm_bytes for op in _layer_ops(*vanilla, *fp8) if op.is_comm}
    for name in ("attn_all_gather", "mlp_all_gather", "mlp_grad_all_gather"):
        assert titan[name] == pytest.approx(megatron[name] / 2)
    assert titan["attn_reduce_scatter"] == megatron["attn_reduce_scatter"]
    # delayed scaling: torchao's Float8 TP needs dynamic scales, so 16-bit gathers
    delayed = _layer_ops(*vanilla, TITAN, "training.dtype=fp8", "training.fp8_recipe=delayed")
    assert {op.name: op.comm_bytes for op in delayed if op.is_comm} == megatron


def test_copy_engine_transfers_do_not_slow_compute():
    # The step slows by at most sigma times the collectives on the SMs that overlap compute
    # (outside the layers: the embedding's and LM head's); the copy-engine pulls, which
    # overlap far more, add nothing.
    spec = make_experiment(*ASYNC, TITAN, model=LLAMA_TINY)
    fast, durations, program = replay(spec, 0.0, 5e10)
    slow = replay(spec, 0.5, 5e10)[0]
    _, comm = sums(program, durations)
    on_sms = sum(d for t, d in comm if t.ops[0].overlap_ops and not t.ops[0].copy_engine)
    by_copy_engine = sum(d for t, d in comm if t.ops[0].copy_engine)
    assert by_copy_engine > 2 * on_sms
    assert slow.step_time_s - fast.step_time_s <= 0.5 * on_sms + 1e-12
    # userbuffers' ring exchanges hold SMs: the same layers slow by more than that
    userbuffers = make_experiment(*ASYNC, model=LLAMA_TINY)
    delta = (
        replay(userbuffers, 0.5, 5e10)[0].step_time_s
        - replay(userbuffers, 0.0, 5e10)[0].step_time_s
    )
    assert delta > 0.5 * on_sms
