"""Software-stack validation sets: LLM Foundry (FSDP1), torchtitan (FSDP2), IBM FSDP.

Reads the measured runs of ``shared/reference/calibration-stacks.md`` (§C1 LLM Foundry's
benchmark tables, §C2 torchtitan, §C4 IBM + PyTorch FSDP) and turns each row into a simtrain
experiment under the stack's framework profile. Every set is split into a *fit* part and a
*held-out* part by a rule fixed here, before anything is fitted, and never changed to improve
a number: a row is held out when the CRC-32 of its key (hardware, model, sequence, GPUs,
micro-batch, precision, sharding) is divisible by 3 (about a third of the rows). The suite
``torchtitan-h100`` (torchtitan's H100 runs, §C2 b and c) is a check held out as a whole: never
fitted, and not written as validation cases, since its hardware is not in the catalog.

    PYTHONPATH=. python experiments/calibration/stacks.py --report [--suite llm-foundry]
    PYTHONPATH=. python experiments/calibration/stacks.py --trend --suite llm-foundry
    PYTHONPATH=. python experiments/calibration/stacks.py --write-suites

``--report`` simulates every row and prints fit and held-out error tables (MAPE, max, mean
signed) on throughput; ``--trend`` prints the scaling trend of every FULL_SHARD series
(:func:`trend_table`; with ``--rows`` also how each end of a series was run and its
error); ``--write-suites`` writes the held-out rows as validation cases into
``experiments/validation/<suite>/`` (``simtrain validate`` then checks them). The measured
MFU of a row and its measured tokens/s differ by the source's FLOP convention only (a
constant per row), so their relative errors are the same; the cases compare tokens/s.

Assumptions, per source (labelled, the same for every row of a source):

- LLM Foundry: MPT shapes from its ``mpt-*.yaml`` (GELU MLP of 4·d, LayerNorm, no biases,
  learned positions, tied embeddings, vocabulary 50,368, no dropout); FULL_SHARD = ZeRO-3,
  SHARD_GRAD_OP = ZeRO-2; activation checkpointing = full recomputation; ``amp_bf16`` reduces
  gradients in fp32 (the llm-foundry profile), ``bf16/PURE`` in bf16; A100 nodes with eight
  200 Gb/s RoCE NICs (the tables' 1,600 Gb/s per node); H100 nodes (network not stated) with
  eight 400 Gb/s InfiniBand NICs.
- IBM FSDP (§C4): Llama 2 shapes, sequence 4,096, batch 2 per GPU, one step of gradient
  accumulation, FSDP full shard, SDPA flash attention, fp32 gradient reduction; A100 cluster
  128 GPUs with 400 Gb/s per node (two 200 Gb/s RoCE NICs), H100 cluster 96 GPUs with
  800 Gb/s per node (two 400 Gb/s RoCE NICs); "selective" checkpointing = simtrain's selective.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from experiments.calibration.reference import reference_dir
from simtrain.api import simulate
from simtrain.catalog import get_accelerator
from simtrain.memory.estimate import estimate_memory
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import experiment_from_dict

ROOT = Path(__file__).resolve().parents[2]
SOURCE_FILE = "calibration-stacks.md"


def held_out(key: str) -> bool:
    """The declared split: a third of the rows, by a hash of the row's key."""
    return zlib.crc32(key.encode()) % 3 == 0


@dataclass(frozen=True)
class Row:
    """One measured run and the experiment that reproduces it."""

    suite: str
    key: str
    spec_dict: dict[str, Any]
    tokens_per_s_per_gpu: float
    mfu: float
    source: str
    declared_held_out: bool = False  # the whole set is a check, never fitted on

    @property
    def held_out(self) -> bool:
        """Whether the row is in the held-out part (see :func:`held_out`)."""
        return self.declared_held_out or held_out(self.key)

    @property
    def name(self) -> str:
        """A file-safe name."""
        return re.sub(r"[^a-z0-9.]+", "-", self.key.lower()).strip("-")

    def spec(self) -> ExperimentSpec:
        """The validated experiment."""
        return experiment_from_dict(self.spec_dict, self.key)


def _tables(text: str, heading_prefix: str) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Markdown tables under headings that start with ``heading_prefix``."""
    blocks = re.split(r"\n(?=#### )", text)
    for block in blocks:
        first = block.splitlines()[0]
        if not first.startswith(heading_prefix):
            continue
        lines = []
        for ln in block.splitlines()[1:]:
            if ln.startswith("|"):
                lines.append(ln)
            elif lines:  # the first table under the heading ends here
                break
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        rows = [
            dict(zip(header, (c.strip() for c in ln.strip("|").split("|")), strict=True))
            for ln in lines[2:]
        ]
        yield first, rows


# --- LLM Foundry (§C1) --------------------------------------------------------------------

MPT = {  # d_model, heads, layers (mpt-*.yaml)
    "125m": (768, 12, 12),
    "350m": (1024, 16, 24),
    "760m": (1536, 12, 24),
    "1b": (2048, 16, 24),
    "3b": (2560, 20, 32),
    "7b": (4096, 32, 32),
    "13b": (5120, 40, 40),
    "30b": (7168, 56, 48),
    "70b": (8192, 64, 80),
}
LLM_FOUNDRY_CLUSTERS = {
    "H100 80GB": {"accelerator": "H100-SXM", "scale_out_link": "ib-ndr", "nics_per_node": 8},
    "A100 80GB": {"accelerator": "A100-80GB", "scale_out_link": "roce-200g", "nics_per_node": 8},
    "A100 40GB": {"accelerator": "A100-40GB", "scale_out_link": "roce-200g", "nics_per_node": 8},
}


def llm_foundry_rows(text: str) -> list[Row]:
    """Every row of the LLM Foundry benchmark tables (§C1)."""
    rows = []
    for heading, table in _tables(text, "#### llm-foundry table:"):
        hw = next(k for k in LLM_FOUNDRY_CLUSTERS if k in heading)
        for r in table:
            d, heads, layers = MPT[r["Model"]]
            seq, gpus = int(r["Seq"]), int(r["GPUs"])
            mbs, acc = int(r["micro-bs"]), int(r["grad-acc"])
            precision, sharding = r["precision"], r["sharding"]
            key = f"{hw}|mpt-{r['Model']}|seq{seq}|{gpus}gpu|mbs{mbs}|{precision}|{sharding}"
            training: dict[str, Any] = {
                "framework": "llm-foundry",
                "dtype": "fp8" if precision == "amp_fp8" else "bf16",
            }
            if precision == "bf16/PURE":
                training["grad_reduce_dtype"] = "bf16"
            spec = {
                "name": f"llm-foundry-{key}",
                "model": {
                    "name": f"mpt-{r['Model']}",
                    "num_layers": layers,
                    "hidden_size": d,
                    "num_heads": heads,
                    "vocab_size": 50368,
                    "seq_length": seq,
                    "activation": "gelu",
                    "norm": "layernorm",
                    "use_bias": False,
                    "position_embedding": "learned",
                    "tied_embeddings": True,
                    "dropout": False,
                },
                "parallel": {
                    "micro_batch_size": mbs,
                    "global_batch_size": mbs * acc * gpus,
                    "zero_stage": 3 if sharding == "FULL_SHARD" else 2,
                    "recompute": "full" if r["act. ckpt"] == "True" else "none",
                },
                "cluster": {"num_gpus": gpus, "gpus_per_node": 8, **LLM_FOUNDRY_CLUSTERS[hw]},
                "training": training,
            }
            rows.append(
                Row(
                    "llm-foundry",
                    key,
                    spec,
                    float(r["tok/s/GPU"]),
                    float(r["MFU %"]) / 100,
                    f"MosaicML llm-foundry scripts/train/benchmarking/README.md @4952183, "
                    f"{heading.removeprefix('#### llm-foundry table: ')}; "
                    f"shared/reference/calibration-stacks.md §C1",
                )
            )
    return rows


# --- IBM + PyTorch FSDP (§C4) ------------------------------------------------------------

LLAMA2 = {  # layers, hidden, heads, kv heads, ffn
    "7B": (32, 4096, 32, 32, 11008),
    "13B": (40, 5120, 40, 40, 13824),
    "34B": (48, 8192, 64, 8, 22016),
    "70B": (80, 8192, 64, 8, 28672),
}
IBM_CLUSTERS = {
    "A100": ({"accelerator": "A100-80GB", "scale_out_link": "roce-200g", "nics_per_node": 2}, 128),
    "H100": ({"accelerator": "H100-SXM", "scale_out_link": "roce-400g", "nics_per_node": 2}, 96),
}
IBM_RECOMPUTE = {"No": "none", "Selective": "selective", "Yes": "full"}


def ibm_rows(text: str) -> list[Row]:
    """The IBM + PyTorch FSDP rows (§C4), one per model and cluster."""
    section = text.split("### C4.", 1)[1].split("### C5.", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for ln in lines[2:]:
        r = dict(zip(header, (c.strip() for c in ln.strip("|").split("|")), strict=True))
        layers, h, heads, kv, ffn = LLAMA2[r["Model"]]
        for hw, (cluster, gpus) in IBM_CLUSTERS.items():
            key = f"{hw}|llama2-{r['Model'].lower()}|seq4096|{gpus}gpu|mbs2|bf16|FULL_SHARD"
            spec = {
                "name": f"ibm-fsdp-{key}",
                "model": {
                    "name": f"llama2-{r['Model'].lower()}",
                    "num_layers": layers,
                    "hidden_size": h,
                    "num_heads": heads,
                    "num_kv_heads": kv,
                    "ffn_hidden_size": ffn,
                    "vocab_size": 32000,
                    "seq_length": 4096,
                    "activation": "swiglu",
                    "norm": "rmsnorm",
                    "use_bias": False,
                    "position_embedding": "rope",
                    "dropout": False,
                },
                "parallel": {
                    "micro_batch_size": 2,
                    "global_batch_size": 2 * gpus,
                    "zero_stage": 3,
                    "recompute": IBM_RECOMPUTE[r["Activation ckpt"]],
                },
                "cluster": {"num_gpus": gpus, "gpus_per_node": 8, **cluster},
                "training": {"framework": "pytorch-fsdp1", "grad_reduce_dtype": "fp32"},
            }
            rows.append(
                Row(
                    "ibm-fsdp",
                    key,
                    spec,
                    float(r[f"{hw} tok/s/GPU"]),
                    float(r[f"{hw} MFU"]),
                    "IBM + PyTorch, 'Maximizing training throughput using PyTorch FSDP' "
                    "(PyTorch blog 2024-03-13); shared/reference/calibration-stacks.md §C4",
                )
            )
    return rows


# --- torchtitan (§C2) --------------------------------------------------------------------

LLAMA = {  # layers, hidden, heads, kv heads, ffn, vocab, seq
    "Llama 3 8B": (32, 4096, 32, 8, 14336, 128256, 8192),
    "Llama 3 70B": (80, 8192, 64, 8, 28672, 128256, 8192),
    "Llama 3.1 405B": (126, 16384, 128, 8, 53248, 128256, 8192),
    "Llama 2 13B": (40, 5120, 40, 40, 13824, 32000, 4096),
    "Llama 2 70B": (80, 8192, 64, 8, 28672, 32000, 4096),
}
# torchtitan's activation checkpointing (docs/references/frameworks.md §torchtitan): "full";
# "selective" with option "2" (every second block fully checkpointed) is full recomputation
# of half the layers; per-op "op" checkpointing (keeps the attention output and every other
# matmul output, recomputes the rest) is simtrain's per_op. The Dec-2024 H100 tables print
# "selective" for the Llama 3 8B runs, whose preset (train_configs/llama3_8b.toml) sets
# selective_ac_option = 'op'.
TORCHTITAN_RECOMPUTE = {
    "no": {"recompute": "none"},
    "full": {"recompute": "full"},
    "selective layer": {"recompute": "full", "recompute_layer_fraction": 0.5},
    "selective op": {"recompute": "per_op"},
    "selective": {"recompute": "per_op"},
}


def llama_model(name: str, seq: int | None = None) -> dict[str, Any]:
    """A Llama 2/3 shape as a simtrain model section."""
    layers, h, heads, kv, ffn, vocab, default_seq = LLAMA[name]
    return {
        "name": name.lower().replace(" ", "-"),
        "num_layers": layers,
        "hidden_size": h,
        "num_heads": heads,
        "num_kv_heads": kv,
        "ffn_hidden_size": ffn,
        "vocab_size": vocab,
        "seq_length": seq or default_seq,
        "activation": "swiglu",
        "norm": "rmsnorm",
        "use_bias": False,
        "position_embedding": "rope",
        "dropout": False,
    }


def torchtitan_rows(text: str) -> list[Row]:
    """The 64 x A100-80GB FSDP2 rows of torchtitan's Aug-2024 performance file (§C2a).

    The cluster's network is not stated: nodes of 8 A100 with 8 x 200 Gb/s InfiniBand
    (assumed).
    """
    section = text.split("### C2.", 1)[1].split("**(b)", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| Llama")]
    rows = []
    for ln in lines:
        model, batch, ac, wps, mfu = (c.strip() for c in ln.strip("|").split("|"))
        key = f"A100 80GB|{model.lower().replace(' ', '-')}|64gpu|mbs{batch}|{ac}"
        spec = {
            "name": f"torchtitan-{key}",
            "model": llama_model(model),
            "parallel": {
                "micro_batch_size": int(batch),
                "global_batch_size": int(batch) * 64,
                "zero_stage": 3,
                **TORCHTITAN_RECOMPUTE[ac],
            },
            "cluster": {
                "accelerator": "A100-80GB",
                "num_gpus": 64,
                "gpus_per_node": 8,
                "scale_out_link": "ib-hdr",
                "nics_per_node": 8,
            },
            "training": {"framework": "torchtitan"},
        }
        rows.append(
            Row(
                "torchtitan",
                key,
                spec,
                float(wps),
                float(mfu.rstrip("%")) / 100,
                "pytorch/torchtitan docs/performance.md @3faaa1a (2024-08-23), 64 A100-80GB; "
                "shared/reference/calibration-stacks.md §C2(a)",
            )
        )
    return rows


H100_GRAND_TETON = {
    # Closest catalog part (labelled assumption): the runs' H100 96 GB HBM2e at a 500 W power
    # limit (2.4 TB/s) is not in the catalog; H100-SXM is the 80 GB HBM3 part (3.35 TB/s,
    # 700 W), so simtrain's memory-bound kernels and clocks are those of the faster part.
    "accelerator": "H100-SXM",
    "gpus_per_node": 8,
    "scale_out_link": "roce-400g",  # 400 Gb/s RDMA per GPU
    "nics_per_node": 8,
}


def torchtitan_h100_rows(text: str) -> list[Row]:
    """torchtitan's H100 throughput runs (§C2 b, c): a check, declared held out as a whole.

    Not fitted on, before anything was fitted (every row is held out): the Dec-2024 benchmark
    (tables 1, 3 and 4: 1-D FSDP on 8 and 128 GPUs, eager, compiled, compiled with Float8;
    2-D FSDP x TP with Float8, with and without async TP) and the June-2025 async-TP
    benchmark (bf16 and Float8 tensorwise; the rowwise recipe is not modelled). The context-
    and pipeline-parallel rows (tables 2, 5, 6) are left out. Their hardware is not in the
    catalog (see :data:`H100_GRAND_TETON`). "compile" is ``execution_mode: compiled`` (blocks
    compiled, final norm and loss eager); Float8 is torchao's dynamic tensorwise scaling,
    simtrain's ``current`` recipe; "per-op SAC" is simtrain's ``per_op``.
    """
    del text  # the rows are transcribed below from the same file's §C2 (b) and (c)

    def row(
        key, model, gpus, tp, local, ac, tps, compiled, float8=False, async_tp=False
    ):  # fmt: skip
        dp = gpus // tp
        # the June-2025 benchmark ran a 2025 torchtitan (its loss compiled with the blocks)
        framework = "torchtitan-2025" if key.startswith("2025") else "torchtitan"
        training: dict[str, Any] = {"framework": framework}
        if compiled:
            training["execution_mode"] = "compiled"
        if float8:
            training |= {"dtype": "fp8", "fp8_recipe": "current"}
        spec = {
            "name": f"torchtitan-h100-{key}",
            "model": llama_model(model),
            "parallel": {
                "tp": tp,
                "sp": tp > 1,
                "micro_batch_size": local,
                "global_batch_size": local * dp,
                "zero_stage": 3,
                **TORCHTITAN_RECOMPUTE[ac],
                **({"tp_comm_overlap": "gemm"} if async_tp else {}),
            },
            "cluster": {"num_gpus": gpus, **H100_GRAND_TETON},
            "training": training,
        }
        source = (
            "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md"
            if "2025" not in key
            else "pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md"
        )
        return Row(
            "torchtitan-h100",
            f"H100 96GB|{key}",
            spec,
            tps,
            0.0,
            f"{source}; shared/reference/calibration-stacks.md §C2",
            declared_held_out=True,
        )

    return [
        row("8b-fsdp8-eager", "Llama 3 8B", 8, 1, 2, "selective", 5762, False),
        row("8b-fsdp8-compile", "Llama 3 8B", 8, 1, 2, "selective", 6667, True),
        row("8b-fsdp8-compile-float8", "Llama 3 8B", 8, 1, 2, "selective", 8532, True, True),
        row("8b-fsdp128-eager", "Llama 3 8B", 128, 1, 2, "selective", 5605, False),
        row("8b-fsdp128-compile", "Llama 3 8B", 128, 1, 2, "selective", 6514, True),
        row("8b-fsdp128-compile-float8", "Llama 3 8B", 128, 1, 2, "selective", 8380, True, True),
        row("70b-fsdp32-tp8-float8", "Llama 3 70B", 256, 8, 16, "full", 829, True, True),
        row(
            "70b-fsdp32-tp8-float8-async-tp",
            "Llama 3 70B",
            256,
            8,
            16,
            "full",
            876,
            True,
            True,
            True,
        ),
        row("2025-70b-fsdp32-tp8-bf16", "Llama 3 70B", 256, 8, 16, "full", 597.3, True),
        row(
            "2025-70b-fsdp32-tp8-bf16-async-tp",
            "Llama 3 70B",
            256,
            8,
            16,
            "full",
            652.4,
            True,
            async_tp=True,
        ),
        row("2025-70b-fsdp32-tp8-float8", "Llama 3 70B", 256, 8, 16, "full", 809.8, True, True),
        row(
            "2025-70b-fsdp32-tp8-float8-async-tp",
            "Llama 3 70B",
            256,
            8,
            16,
            "full",
            942.4,
            True,
            True,
            True,
        ),
        row("2025-8b-fsdp8-tp8-bf16", "Llama 3 8B", 64, 8, 12, "selective op", 4378, True),
        row(
            "2025-8b-fsdp8-tp8-bf16-async-tp",
            "Llama 3 8B",
            64,
            8,
            12,
            "selective op",
            4809.4,
            True,
            async_tp=True,
        ),
        row(
            "2025-8b-fsdp8-tp8-float8",
            "Llama 3 8B",
            64,
            8,
            12,
            "selective op",
            5078.1,
            True,
            True,
        ),
        row(
            "2025-8b-fsdp8-tp8-float8-async-tp",
            "Llama 3 8B",
            64,
            8,
            12,
            "selective op",
            5570.1,
            True,
            True,
            True,
        ),
    ]


GPT3_SHAPES = {"1.3B": (24, 2048), "2.7B": (32, 2560)}
"""Layers and hidden size of the GPT-3 paper's 1.3B and 2.7B models (Brown et al. 2020,
Table 2.1), the two models of FlashAttention-2's Table 1 (§D1)."""
FLASH_COLUMNS = {"FlashAttention": "flash1", "FlashAttention-2": "flash"}
"""Table 1 columns of §D1 checked as validation cases, and their attention kernel."""
BASELINE_COLUMN = {"No FlashAttention": "torch"}
"""Table 1's baseline column: the flash-attention repository's GPT model with its own
standard attention (``SelfAttention`` in ``flash_attn/modules/mha.py``, ``use_flash_attn``
off), plain PyTorch kernels: simtrain's ``torch`` (docs/references/kernels.md §Standard
attention). A check, not validation cases (:func:`flash_attention_baseline_rows`)."""


def flash_attention_rows(
    text: str, kernels: dict[str, str] | None = None, suite: str = "flashattention2"
) -> list[Row]:
    """FlashAttention-2's end-to-end GPT training table (§D1, paper Table 1): a check held out
    as a whole, never fitted on.

    8 A100-80GB, GPT3-1.3B and 2.7B at 2K and 8K context, TF/s per GPU with FlashAttention
    (v1) and FlashAttention-2, from the paper's formula 6·seq·params + 12·layers·hidden·seq²
    per sequence; the measured tokens/s per GPU below divide by that formula, and so does the
    comparison, so the parameter count cancels. Labelled assumptions, the same for every row
    (the table states none of them): GPT-3 shapes with 128-wide heads (the benchmarks' head
    dimension), GELU MLP of 4·h, LayerNorm, biases, rotary positions, vocabulary 50,257 padded
    to 50,304, no dropout; one node, 16K tokens per GPU per step (the kernel benchmarks'
    batch x sequence), no activation recomputation, AMP's fp32 gradient reduction, fused
    kernels elsewhere (the profile's default); optimizer states and gradients sharded over
    the 8 GPUs (``pytorch-fsdp1`` at ZeRO-2; the flash-attention repository's recipes use
    apex's distributed fused Adam), because with replicated states (ZeRO-0) the 2.7B model
    would not fit in 80 GB (simtrain: 99 GB, and these runs ran). Across 8K-32K tokens per
    GPU, ZeRO-0 to 3 and learned positions the predictions move by -6 to +3 %.
    """
    section = text.split("### D1.", 1)[1].split("### D2.", 1)[0]
    table = section.split("**End-to-end GPT training", 1)[1]
    header = next(ln for ln in table.splitlines() if ln.startswith("| Model"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    rows = []
    for line in table.splitlines():
        match = re.match(r"\| GPT3-([\d.]+B), (\d+)k context \|", line)
        if not match:
            continue
        model, seq = match.group(1), int(match.group(2)) * 1024
        layers, hidden = GPT3_SHAPES[model]
        vocab = 50304
        params = 12 * layers * hidden**2 + vocab * hidden
        flops_per_token = 6 * params + 12 * layers * hidden * seq
        cells = [c.strip() for c in line.strip("|").split("|")]
        for column, value in zip(columns[1:], cells[1:], strict=True):
            kernel = (FLASH_COLUMNS if kernels is None else kernels).get(column)
            if kernel is None:
                continue
            tflops = float(value.split()[0])
            key = f"A100 80GB|gpt3-{model.lower()}|seq{seq}|8gpu|{kernel}"
            spec = {
                "name": f"flashattention2-{key}",
                "model": {
                    "name": f"gpt3-{model.lower()}",
                    "num_layers": layers,
                    "hidden_size": hidden,
                    "num_heads": hidden // 128,
                    "vocab_size": vocab,
                    "seq_length": seq,
                    "activation": "gelu",
                    "norm": "layernorm",
                    "use_bias": True,
                    "position_embedding": "rope",
                    "dropout": False,
                },
                "parallel": {
                    "micro_batch_size": 16384 // seq,
                    "global_batch_size": 8 * 16384 // seq,
                    "zero_stage": 2,
                    "recompute": "none",
                },
                "cluster": {"accelerator": "A100-80GB", "num_gpus": 8, "gpus_per_node": 8},
                "training": {
                    "framework": "pytorch-fsdp1",
                    "dtype": "bf16",
                    "grad_reduce_dtype": "fp32",
                    "attention_kernel": kernel,
                },
            }
            rows.append(
                Row(
                    suite,
                    key,
                    spec,
                    tflops * 1e12 / flops_per_token,
                    tflops / 312,
                    "Dao 2023, FlashAttention-2 (arXiv:2307.08691) Table 1; "
                    "shared/reference/calibration-stacks.md §D1",
                    declared_held_out=True,
                )
            )
    return rows


def flash_attention_baseline_rows(text: str) -> list[Row]:
    """Table 1's "No FlashAttention" column (§D1) under the FlashAttention rows' assumptions,
    with attention kernel ``torch``: a check reported by ``--suite flashattention2-baseline``,
    never fitted on and not written as validation cases.

    One more labelled assumption: the table states no recomputation, and with the score
    tensors of plain attention kept (2 bytes per score without dropout) three of the four
    runs do not fit in 80 GB at 16K tokens per GPU (simtrain's memory estimate: 2.7B at 2K
    108 GB, 1.3B and 2.7B at 8K 146 and 237 GB), yet they ran. Those rows recompute the
    attention core (``recompute: selective``, Korthikanti's: the s² tensors dropped, 43-65
    GB). This rule was chosen after seeing the alternatives (notes/attnbase): full
    recomputation instead gives -8 to -28 %, and a micro-batch of one sequence alone still
    does not fit the 2.7B model at 8K.
    """
    rows = flash_attention_rows(text, BASELINE_COLUMN, "flashattention2-baseline")
    for row in rows:
        spec = row.spec()
        capacity = get_accelerator(spec.cluster.accelerator).hbm_capacity_bytes
        if estimate_memory(spec, capacity).peak_bytes > capacity:
            row.spec_dict["parallel"]["recompute"] = "selective"
    return rows


H200_RUNS = ((4, 10938.0, 47.96), (8, 10753.0, 46.97))
"""torchtitan's June-2025 H200 runs (§C2d, Trainy on WhiteFiber): nodes of 8 H200, tokens/s
per GPU and peak memory (GiB reserved) at step 100. Llama 3.1 8B, 1-D FSDP, torch.compile,
Float8 with FSDP float8 all-gathers, local batch 2, 400 Gb/s per GPU."""


def h200_spec(nodes: int) -> dict[str, Any]:
    """The experiment of one H200 run (:data:`H200_RUNS`).

    Labelled assumptions, the same for both runs: sequence 8,192 and the 8B preset's
    per-operator activation checkpointing (torchtitan's ``llama3_8b.toml``; the benchmark
    states neither), ``dtype: fp8`` with the ``current`` (dynamic tensorwise) recipe, RoCE
    at 400 Gb/s per GPU (the benchmark's CX-7), and the ``torchtitan-2025`` profile.
    """
    gpus = 8 * nodes
    return {
        "name": f"torchtitan-h200-8b-fsdp{gpus}-compile-float8",
        "model": llama_model("Llama 3 8B"),
        "parallel": {
            "micro_batch_size": 2,
            "global_batch_size": 2 * gpus,
            "zero_stage": 3,
            **TORCHTITAN_RECOMPUTE["selective"],
        },
        "cluster": {
            "accelerator": "H200",
            "num_gpus": gpus,
            "gpus_per_node": 8,
            "scale_out_link": "roce-400g",
            "nics_per_node": 8,
        },
        "training": {
            "framework": "torchtitan-2025",
            "execution_mode": "compiled",
            "dtype": "fp8",
            "fp8_recipe": "current",
        },
    }


def torchtitan_h200_rows(text: str) -> list[Row]:
    """torchtitan's June-2025 H200 runs (§C2d): held out as a whole, never fitted on.

    A standard part of the catalog (H200 SXM, 700 W), unlike the 500 W H100 of the other
    torchtitan H100 runs, so the set checks the Hopper constants and the torchtitan profile
    together.
    """
    del text  # transcribed in H200_RUNS from the same file's §C2(d)
    return [
        Row(
            "torchtitan-h200",
            f"8b-fsdp{8 * nodes}-compile-float8",
            h200_spec(nodes),
            tps,
            0.0,
            "pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md; "
            "shared/reference/calibration-stacks.md §C2(d)",
            declared_held_out=True,
        )
        for nodes, tps, _ in H200_RUNS
    ]


@dataclass(frozen=True)
class MemoryRow:
    """A run whose peak memory the source reports (torchtitan: GiB reserved)."""

    key: str
    spec_dict: dict[str, Any]
    measured_gib: float
    capacity_gib: float


def torchtitan_memory_rows() -> list[MemoryRow]:
    """torchtitan's Dec-2024 H100 (96 GB HBM2e) and Jun-2025 H200 runs with memory (§C2b, d).

    Eager bf16 rows and the compile/Float8 variants, as printed (the 2-D 70B run with and
    without async TP); layouts FSDP, FSDP x TP and FSDP x TP x PP. Seq 8,192; "selective" AC
    (the 8B rows) is the 8B preset's per-operator checkpointing (``TORCHTITAN_RECOMPUTE``).
    Float8 rows (tables 1, 3, 4, 5: "compile + Float8") train in FP8 (``dtype: fp8``).
    Under PP, FSDP keeps the gathered parameters between forward and backward (torchtitan's
    reshard_after_forward=False under PP: ZeRO-2 here) and the local batch is split into as
    many microbatches as there are pipeline stages (torchtitan's default
    pipeline_parallel_microbatches: pp x stages per rank, 2 per rank for the interleaved
    schedule), so 32 sequences make 8 microbatches of 4 (1F1B) or 16 of 2 (interleaved); see
    docs/references/frameworks.md §torchtitan. Context-parallel rows (tables 2, 6): FSDP
    shards over FSDP x CP (8 ranks in every row), each rank holds seq / cp tokens of a
    sequence. The H200 runs (§C2d) come last, with the assumptions of :func:`h200_spec`.
    """
    h100 = {"accelerator": "H100-SXM", "gpus_per_node": 8, "scale_out_link": "roce-400g"}

    def row(
        key, model, gpus, tp, pp, local, recompute, measured, float8=False, vpp=1, cp=1,
        async_tp=False,
    ):  # fmt: skip
        # context-parallel rows run 32K tokens of a sequence per rank (tables 2 and 6)
        seq = 32768 * cp if "-cp" in key else None
        dp = gpus // (tp * pp * cp)
        parallel = {
            "tp": tp,
            "sp": tp > 1,
            "pp": pp,
            "cp": cp,
            "micro_batch_size": local // (pp * vpp) if pp > 1 else local,
            "global_batch_size": local * dp,
            "zero_stage": 3 if pp == 1 else 2,
            **TORCHTITAN_RECOMPUTE[recompute],
            **({"pipeline_schedule": "interleaved", "vpp": vpp} if vpp > 1 else {}),
            **({"tp_comm_overlap": "gemm"} if async_tp else {}),
        }
        training = {"framework": "torchtitan", **({"dtype": "fp8"} if float8 else {})}
        spec = {
            "name": f"torchtitan-memory-{key}",
            "model": llama_model(model, seq),
            "parallel": parallel,
            "cluster": {"num_gpus": gpus, **h100},
            "training": training,
        }
        return MemoryRow(key, spec, measured, 96)

    return [
        row("8b-fsdp8-eager", "Llama 3 8B", 8, 1, 1, 2, "selective", 82.4),
        row("8b-fsdp8-compile", "Llama 3 8B", 8, 1, 1, 2, "selective", 77.0),
        row("8b-fsdp8-compile-float8", "Llama 3 8B", 8, 1, 1, 2, "selective", 76.8, True),
        row("8b-fsdp128-eager", "Llama 3 8B", 128, 1, 1, 2, "selective", 67.0),
        row("8b-fsdp128-compile", "Llama 3 8B", 128, 1, 1, 2, "selective", 62.0),
        row("8b-fsdp128-compile-float8", "Llama 3 8B", 128, 1, 1, 2, "selective", 61.8, True),
        row("70b-fsdp32-tp8", "Llama 3 70B", 256, 8, 1, 16, "full", 71.9, True),
        row(
            "70b-fsdp32-tp8-async-tp",
            "Llama 3 70B",
            256,
            8,
            1,
            16,
            "full",
            67.6,
            True,
            async_tp=True,
        ),
        row("405b-fsdp8-tp8-pp8-1f1b", "Llama 3.1 405B", 512, 8, 8, 32, "full", 82.5, True),
        row(
            "405b-fsdp8-tp8-pp8-interleaved",
            "Llama 3.1 405B",
            512,
            8,
            8,
            32,
            "full",
            72.7,
            True,
            vpp=2,
        ),
        *(
            row(
                f"8b-fsdp{8 // cp}-cp{cp}-{32 * cp}k",
                "Llama 3 8B",
                8,
                1,
                1,
                1,
                "full",
                gib,
                True,
                cp=cp,
            )
            for cp, gib in ((1, 83.9), (2, 84.2), (4, 84.0), (8, 84.5))
        ),
        *(
            row(
                f"405b-fsdp{8 // cp}-cp{cp}-tp8-pp8-{32 * cp}k",
                "Llama 3.1 405B",
                512,
                8,
                8,
                8,
                "full",
                gib,
                True,
                cp=cp,
            )
            for cp, gib in ((1, 75.3), (2, 75.9), (4, 77.1), (8, 84.9))
        ),
        *(
            MemoryRow(
                f"h200-8b-fsdp{8 * nodes}-compile-float8",
                h200_spec(nodes),
                gib,
                get_accelerator("H200").hbm_capacity_bytes / 2**30,
            )
            for nodes, _, gib in H200_RUNS
        ),
    ]


SUITES: dict[str, Callable[[str], list[Row]]] = {
    "llm-foundry": llm_foundry_rows,
    "ibm-fsdp": ibm_rows,
    "torchtitan": torchtitan_rows,
    "torchtitan-h100": torchtitan_h100_rows,
    "torchtitan-h200": torchtitan_h200_rows,
    "flashattention2": flash_attention_rows,
    "flashattention2-baseline": flash_attention_baseline_rows,
}
CHECK_ONLY = frozenset({"torchtitan-h100", "flashattention2-baseline"})
"""Suites reported but not written as validation cases: their hardware is not in the catalog."""


def load_rows(suite: str) -> list[Row]:
    """Rows of ``suite`` from the reference file."""
    text = (reference_dir() / SOURCE_FILE).read_text(encoding="utf-8")
    return SUITES[suite](text)


def predict(row: Row) -> float:
    """Simulated tokens/s per GPU of a row."""
    spec = row.spec()
    return simulate(spec).summary()["tokens_per_s"] / spec.cluster.num_gpus


def error_table(errors: list[float]) -> dict[str, float]:
    """MAPE, max and mean signed of relative errors."""
    if not errors:
        return {"rows": 0}
    return {
        "rows": len(errors),
        "mape": sum(abs(e) for e in errors) / len(errors),
        "max": max(abs(e) for e in errors),
        "mean_signed": sum(errors) / len(errors),
    }


def write_suite(suite: str, rows: list[Row]) -> int:
    """Write the held-out rows as validation cases; return how many."""
    folder = ROOT / "experiments" / "validation" / suite
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.yaml"):
        old.unlink()
    count = 0
    for row in rows:
        if not row.held_out:
            continue
        gpus = row.spec_dict["cluster"]["num_gpus"]
        case = {
            **row.spec_dict,
            "name": f"{suite}-{row.name}",
            "expected": {
                "metric": "tokens_per_s",
                "value": round(row.tokens_per_s_per_gpu * gpus, 3),
                "tolerance": 0.15,
                "source": row.source,
                "note": (
                    "held-out row (experiments/calibration/stacks.py split); measured "
                    + (f"MFU {row.mfu:.4f}, " if row.mfu else "")
                    + f"{row.tokens_per_s_per_gpu:g} tokens/s per GPU"
                ),
            },
        }
        header = (
            f"# {row.key}: held-out row of experiments/calibration/stacks.py "
            f"(written by --write-suites; do not edit by hand)\n"
        )
        text = yaml.safe_dump(case, sort_keys=False, width=100, allow_unicode=True)
        (folder / f"{row.name}.yaml").write_text(header + text, encoding="utf-8")
        count += 1
    return count


def trend_table(rows: list[Row], predicted: dict[str, float]) -> list[dict[str, Any]]:
    """Scaling trend of every FULL_SHARD series: one model, sequence and precision on one
    part across GPU counts (as the source ran them: LLM Foundry grows the batch with the GPUs
    and sometimes changes the micro-batch). Compares the measured and simulated change of
    throughput per GPU (= MFU change) from the smallest to the largest GPU count; a series
    meets the target when the signs agree and the simulated change is at least half the
    measured one (issue 13).
    """
    series: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        parts = row.key.split("|")
        if parts[-1] != "FULL_SHARD":
            continue
        key = tuple(p for p in parts if not p.endswith("gpu") and not p.startswith("mbs"))
        series.setdefault(key, []).append(row)
    table = []
    for key, members in sorted(series.items()):
        by_gpus = sorted(members, key=lambda r: r.spec_dict["cluster"]["num_gpus"])
        first, last = by_gpus[0], by_gpus[-1]
        if first.spec_dict["cluster"]["num_gpus"] == last.spec_dict["cluster"]["num_gpus"]:
            continue
        measured = last.tokens_per_s_per_gpu / first.tokens_per_s_per_gpu - 1
        simulated = predicted[last.key] / predicted[first.key] - 1
        meets = measured * simulated > 0 and abs(simulated) >= 0.5 * abs(measured)
        table.append(
            {
                "series": "|".join(key),
                "gpus": [r.spec_dict["cluster"]["num_gpus"] for r in (first, last)],
                "rows": [first.key, last.key],
                "measured": measured,
                "simulated": simulated,
                "meets": meets,
            }
        )
    return table


def trend_row(row: Row, predicted: float) -> str:
    """One end of a trend series: its run (micro-batch, accumulation, checkpointing), its
    measured MFU and the simulated throughput's error."""
    p = row.spec_dict["parallel"]
    gpus = row.spec_dict["cluster"]["num_gpus"]
    accumulation = p["global_batch_size"] // (p["micro_batch_size"] * gpus)
    return (
        f"{gpus:4d} GPUs  micro-batch {p['micro_batch_size']:3d} x {accumulation:2d}  "
        f"recompute {p['recompute']:4s}  measured MFU {row.mfu:6.2%}  "
        f"error {predicted / row.tokens_per_s_per_gpu - 1:+6.1%}"
    )


def memory_fit_rows(rows: list[MemoryRow]) -> list[MemoryRow]:
    """Declared scope of the allocator fit: the 1-D FSDP runs, fit part of the split.

    The FSDP x TP and FSDP x TP x PP runs are left out of the fit (and reported): they test
    the stack mechanisms of the framework profile (FP8 all-gathers, DTensor TP's gathered
    inputs, the vocabulary-parallel loss, FSDP2's unsharded gradients under pipelining), which
    come from documentation, not from a fit. The H200 runs are held out as a whole.
    """
    one_d = [r for r in rows if "tp" not in r.key and "-cp" not in r.key and r.key.startswith("8b")]
    return [r for r in one_d if not held_out(r.key)]


def memory_report(fit: bool) -> None:
    """Print simtrain's peak memory against torchtitan's measured peaks.

    With ``fit``, first fit the caching allocator's overhead fraction (fragmentation: reserved
    over allocated) on :func:`memory_fit_rows`, by a grid search on the mean absolute error.
    """
    from simtrain.catalog.frameworks import get_framework
    from simtrain.memory import estimate_memory

    gib = 2**30
    rows = torchtitan_memory_rows()
    estimates = {}
    for row in rows:
        spec = experiment_from_dict(row.spec_dict, row.key)
        estimates[row.key] = estimate_memory(spec, row.capacity_gib * gib)
    current = get_framework("torchtitan").memory.allocator_overhead_fraction

    def peak(row: MemoryRow, fraction: float) -> float:
        est = estimates[row.key]
        allocator = est.breakdown_bytes.get("overhead.allocator", 0.0)
        transient = allocator / current if current else est.activations_bytes + est.buffers_bytes
        return (est.peak_bytes - allocator + fraction * transient) / gib

    fraction = current
    if fit:
        fit_rows = memory_fit_rows(rows)
        grid = [i / 100 for i in range(51)]
        fraction = min(
            grid,
            key=lambda f: sum(abs(peak(r, f) / r.measured_gib - 1) for r in fit_rows),
        )
        print(f"allocator_overhead_fraction fitted on {[r.key for r in fit_rows]}: {fraction}")
    print(f"{'run':34s} {'part':9s} {'measured':>9s} {'simtrain':>9s} {'error':>7s}")
    for row in rows:
        part = "held-out" if held_out(row.key) else "fit"
        if row not in memory_fit_rows(rows) and part == "fit":
            part = "not fit"
        value = peak(row, fraction)
        error = value / row.measured_gib - 1
        print(f"{row.key:34s} {part:9s} {row.measured_gib:9.1f} {value:9.1f} {error:+7.1%}")


def async_tp_pairs(rows: list[Row]) -> list[dict[str, Any]]:
    """Each async-TP row with its vanilla-TP twin: measured and simulated speed-up.

    The ratio async / vanilla does not depend on the part's absolute speed (the torchtitan
    H100 rows run on a catalog part faster than theirs), so it tests the async-TP mechanism
    alone. Also the simulated step's compute and exposed communication of both.
    """
    by_key = {row.key: row for row in rows}
    pairs = []
    for row in rows:
        if not row.key.endswith("-async-tp"):
            continue
        twin = by_key[row.key.removesuffix("-async-tp")]
        sims = {}
        for variant in (twin, row):
            spec = variant.spec()
            summary = simulate(spec).summary()
            sims[variant.key] = summary | {"tps": summary["tokens_per_s"] / spec.cluster.num_gpus}
        van, asy = sims[twin.key], sims[row.key]
        pairs.append(
            {
                "pair": twin.key,
                "measured": (twin.tokens_per_s_per_gpu, row.tokens_per_s_per_gpu),
                "simulated": (van["tps"], asy["tps"]),
                "measured_gain": row.tokens_per_s_per_gpu / twin.tokens_per_s_per_gpu - 1,
                "simulated_gain": asy["tps"] / van["tps"] - 1,
                "compute_s": (van["compute_s"], asy["compute_s"]),
                "exposed_comm_s": (van["exposed_comm_s"], asy["exposed_comm_s"]),
                "step_s": (van["step_time_s"], asy["step_time_s"]),
            }
        )
    return pairs


def print_async_tp_pairs(suite: str, rows: list[Row]) -> None:
    """Print :func:`async_tp_pairs` of a suite (nothing when it has no async-TP rows)."""
    for p in async_tp_pairs(rows):
        (mv, ma), (sv, sa) = p["measured"], p["simulated"]
        (cv, ca), (ev, ea) = p["compute_s"], p["exposed_comm_s"]
        print(
            f"{suite} {p['pair']:34s} measured {mv:7.1f} -> {ma:7.1f} "
            f"({p['measured_gain']:+6.1%})  simulated {sv:7.1f} -> {sa:7.1f} "
            f"({p['simulated_gain']:+6.1%})  compute {cv:.2f} -> {ca:.2f} s, "
            f"exposed comm {ev:.2f} -> {ea:.2f} s"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=sorted(SUITES), action="append")
    parser.add_argument("--report", action="store_true", help="simulate and print errors")
    parser.add_argument("--write-suites", action="store_true", help="write held-out cases")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--rows", action="store_true", help="with --report: every row; with --trend: both ends"
    )
    parser.add_argument("--trend", action="store_true", help="FULL_SHARD scaling trends")
    parser.add_argument(
        "--async-tp", action="store_true", help="async-TP speed-ups, measured and simulated"
    )
    parser.add_argument("--memory", action="store_true", help="torchtitan peak memory check")
    parser.add_argument("--fit-memory", action="store_true", help="with --memory: fit first")
    args = parser.parse_args(argv)
    suites = args.suite or sorted(SUITES)
    report: list[dict[str, Any]] = []
    if args.memory:
        memory_report(args.fit_memory)
    for suite in suites:
        rows = load_rows(suite)
        if args.write_suites and suite not in CHECK_ONLY:
            print(f"{suite}: wrote {write_suite(suite, rows)} held-out cases", file=sys.stderr)
        if args.async_tp:
            print_async_tp_pairs(suite, rows)
        if not (args.report or args.trend):
            continue
        predicted = {row.key: predict(row) for row in rows}
        if args.trend:
            trends = trend_table(rows, predicted)
            by_key = {row.key: row for row in rows}
            for tr in trends:
                print(
                    f"{suite:12s} {tr['series']:40s} {tr['gpus'][0]:4d} -> {tr['gpus'][1]:4d}  "
                    f"measured {tr['measured']:+6.1%}  simulated {tr['simulated']:+6.1%}  "
                    f"{'meets' if tr['meets'] else 'misses'}"
                )
                if args.rows:  # which end of the series is off, and how it was run
                    for key in tr["rows"]:
                        print(f"{'':12s}   {trend_row(by_key[key], predicted[key])}")
            if trends:
                met = sum(tr["meets"] for tr in trends)
                print(f"{suite:12s} trend met on {met} of {len(trends)} FULL_SHARD series")
        if not args.report:
            continue
        errors: dict[str, list[float]] = {"fit": [], "held_out": []}
        for row in rows:
            error = predicted[row.key] / row.tokens_per_s_per_gpu - 1
            part = "held_out" if row.held_out else "fit"
            errors[part].append(error)
            if args.rows:
                print(f"{suite:12s} {part:8s} {error:+7.1%}  {row.key}", file=sys.stderr)
        for part, values in errors.items():
            report.append({"suite": suite, "set": part, **error_table(values)})
    if args.report:
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            for r in report:
                if r["rows"]:
                    print(
                        f"{r['suite']:12s} {r['set']:8s} rows {r['rows']:4d}  "
                        f"MAPE {r['mape']:6.1%}  max {r['max']:6.1%}  "
                        f"mean signed {r['mean_signed']:+6.1%}"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
